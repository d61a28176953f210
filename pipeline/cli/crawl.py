"""``crawler crawl``: the README's one command. Fresh local stack, the demo site (or the given
URLs), seed, run to completion, summary; on the demo it also prints the servers' own view of
politeness and completeness."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from pipeline.cli.main import local_pipeline_args
from pipeline.demo.log import crawlable_paths, politeness_report
from pipeline.demo.site import DemoSite
from pipeline.local.stack import start_local_stack, stop_local_stack
from pipeline.main import run
from pipeline.ops.seeding import publish_seeds
from pipeline.options import CrawlerOptions

DEMO_DEFAULTS: dict[str, str | None] = {
    "--min_delay": "0.2", "--idle_timeout": "8", "--warc_roll_seconds": "3",
    "--allow_private_networks": None,  # the demo site is on loopback; the SSRF guard is on
}
WEB_DEFAULTS: dict[str, str | None] = {"--max_pages": "200"}


def _with_defaults(argv: list[str], defaults: dict[str, str | None]) -> list[str]:
    """Flags from ``defaults`` the user did not give (None: a switch without a value)."""
    given = {"--" + a.split("=", 1)[0][2:].replace("-", "_") for a in argv if a.startswith("--")}
    return [k if v is None else f"{k}={v}" for k, v in defaults.items() if k not in given] + argv


def crawl(args: argparse.Namespace, beam_argv: list[str], state_dir: Path) -> int:
    print("starting a fresh local stack (Pub/Sub, Bigtable and GCS emulators) ...", flush=True)
    stop_local_stack(state_dir)
    stack = start_local_stack(state_dir)
    os.environ.update(stack.env())
    site: DemoSite | None = None
    urls = list(args.urls)
    if urls:
        beam_argv = _with_defaults(beam_argv, WEB_DEFAULTS)
    else:
        site = DemoSite().start(n_hosts=args.demo_hosts, pages_per_host=args.demo_pages)
        urls = site.seed_urls()
        beam_argv = _with_defaults(beam_argv, DEMO_DEFAULTS)
        print("serving the demo site on " + ", ".join(site.hosts), flush=True)
    try:
        report = publish_seeds(urls, stack.project, stack.topic)
        for url, reason in report.invalid:
            print(f"rejected {url!r}: {reason}")
        if not report.published_urls:
            return 2
        print(f"seeded {report.published_urls} URLs; crawling ...", flush=True)
        pipeline_args = local_pipeline_args(stack, beam_argv)
        policy = CrawlerOptions(pipeline_args).policy()
        summary = run(pipeline_args)
        if site is not None:
            print("\nThe demo servers' own request logs:")
            for host in site.hosts:
                log = site.requests(host)
                rep = politeness_report(log)
                got = {r.path for r in log}
                expected = crawlable_paths(host, site.expected_fetch_paths(host),
                                           policy.for_host(host.split("//", 1)[1]), time.time())
                gap = f"{rep.min_gap:.3f} s" if rep.min_gap is not None else "-"
                robots = next((r for r in log if r.path == "/robots.txt"), None)
                sent = (f" ({robots.status}, {robots.content_encoding or 'identity'}, "
                        f"{robots.sent} bytes)" if robots is not None else "")
                print(f"  {host}: {rep.requests} requests, {len(expected & got)}/{len(expected)}"
                      f" expected paths, {len(got & site.disallowed_paths(host))} disallowed, "
                      f"max concurrent {rep.max_concurrent}, min gap {gap}, "
                      f"robots.txt first: {rep.robots_first}{sent}, "
                      f"duplicates: {rep.duplicates}")
    finally:
        if site is not None:
            site.stop()
    print("\nThe local stack is still running for `crawler show URL` and `crawler ls --host H`;"
          " stop it with `crawler local down`.")
    return 1 if getattr(summary, "failed", None) else 0
