"""``crawler seed``, ``crawler run`` and ``crawler crawl``: sending work and running crawls.

``crawl`` is the README's one command: a fresh local stack, the demo site (or the given URLs),
seed, run to completion, summary; on the demo it also prints the servers' own view of
politeness and completeness.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from pipeline.cli.common import state_dir, use_local_stack
from pipeline.demo.log import crawlable_paths, politeness_report
from pipeline.demo.site import DemoSite
from pipeline.local.stack import start_local_stack, stop_local_stack
from pipeline.main import is_embedded_flink, is_local_flink_cluster, is_local_prism, run
from pipeline.ops.seeding import publish_seeds
from pipeline.options import CrawlerOptions
from transforms.formats.schema import DEFAULT_TOPIC


def register(sub: Any) -> None:
    seed = sub.add_parser("seed", help="publish URLs to the frontier topic")
    seed.add_argument("urls", nargs="*")
    seed.add_argument("--file", help="file with one URL per line ('-' for stdin)")
    seed.add_argument("--priority", type=int, default=0, help="higher is fetched first")
    seed.add_argument("--depth", type=int, default=0, help="depth to record for the seeds")
    seed.add_argument("--project", help="Google Cloud project (default: the local stack's)")
    seed.add_argument("--topic", help=f"frontier topic (default: {DEFAULT_TOPIC})")
    seed.set_defaults(handler=cmd_seed)
    running = sub.add_parser("run", help="run the pipeline; other flags go to CrawlerOptions "
                             "and Beam", add_help=False)
    running.set_defaults(handler=cmd_run, pipeline_flags=True)
    crawl = sub.add_parser("crawl", help="local stack + (demo site) + seed + run + summary; "
                           "other flags go to the pipeline; the stack keeps running for "
                           "show/ls until `crawler local down`")
    crawl.add_argument("urls", nargs="*", help="seed URLs (default: the bundled demo site)")
    crawl.add_argument("--demo-hosts", type=int, default=3)
    crawl.add_argument("--demo-pages", type=int, default=80)
    crawl.set_defaults(handler=cmd_crawl, pipeline_flags=True)


def cmd_seed(args: argparse.Namespace) -> int:
    urls = list(args.urls)
    if args.file:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        urls += [line.strip() for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
    if not urls:
        print("no URLs given (pass URLs or --file FILE)", file=sys.stderr)
        return 2
    stack = use_local_stack(args)
    project = args.project or (stack.project if stack else None)
    topic = args.topic or (stack.topic if stack else DEFAULT_TOPIC)
    if not project:
        print("no --project and no local stack running (crawler local up)", file=sys.stderr)
        return 2
    report = publish_seeds(urls, project, topic, depth=args.depth, priority=args.priority)
    for url, reason in report.invalid:
        print(f"rejected {url!r}: {reason}", file=sys.stderr)
    print(f"published {report.published_urls} URLs for {report.hosts} hosts in "
          f"{report.messages} messages to projects/{project}/topics/{topic}")
    return 0 if report.published_urls else 1


def _local_flink(beam_argv: list[str]) -> bool:
    """Flink or Prism on this machine (embedded, or a local cluster): it reads the local stack."""
    options = CrawlerOptions(beam_argv)
    return (is_embedded_flink(options) or is_local_flink_cluster(options)
            or is_local_prism(options))


def cmd_run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    stack = use_local_stack(args)
    runner_given = any(a.startswith("--runner") for a in beam_argv)
    if stack is not None and (not runner_given or _local_flink(beam_argv)):
        beam_argv = stack.pipeline_args(beam_argv)
    elif not runner_given:
        print("the local stack is not running: start it with `crawler local up`, or pass "
              "--runner DataflowRunner and real resources", file=sys.stderr)
        return 2
    try:
        summary = run(beam_argv)
    except ValueError as exc:
        print(f"invalid options: {exc}", file=sys.stderr)
        return 2
    failed = getattr(summary, "failed", None)
    return 1 if failed else 0


def cmd_crawl(args: argparse.Namespace, beam_argv: list[str]) -> int:
    return crawl(args, beam_argv, state_dir(args))


DEMO_DEFAULTS: dict[str, str | None] = {
    "--min_delay": "0.2", "--idle_timeout": "8", "--warc_roll_seconds": "3",
    "--allow_private_networks": None,  # the demo site is on loopback; the SSRF guard is on
}
WEB_DEFAULTS: dict[str, str | None] = {"--max_pages": "200"}


def _with_defaults(argv: list[str], defaults: dict[str, str | None]) -> list[str]:
    """Flags from ``defaults`` the user did not give (None: a switch without a value)."""
    given = {"--" + a.split("=", 1)[0][2:].replace("-", "_") for a in argv if a.startswith("--")}
    return [k if v is None else f"{k}={v}" for k, v in defaults.items() if k not in given] + argv


def crawl(args: argparse.Namespace, beam_argv: list[str], where: Path) -> int:
    print("starting a fresh local stack (Pub/Sub, Bigtable and GCS emulators) ...", flush=True)
    stop_local_stack(where)
    stack = start_local_stack(where)
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
        pipeline_args = stack.pipeline_args(beam_argv)
        policy = CrawlerOptions(pipeline_args).settings().policy
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
