"""Peak RSS of ``crawler crawl`` on the four crawls of the memory issue, by one or two versions.

    python -m benchmarks.memory_crawls --out results/memory_crawls.json
    python -m benchmarks.memory_crawls --baseline COMMIT --out ...    (before and after, one run
                                                                       each, alternating)

The crawls, each a fresh ``crawler crawl`` process (peak RSS and CPU from ``wait4``, pages from
the servers' logs):

* ``docs-scoped``: three documentation sites of ``make bench``'s test bed (nginx), unthrottled,
  ``--scope host``;
* ``docs-unscoped``: the same without a scope: their links to the internet become hosts that
  never answer (this machine reaches no internet);
* ``trap``: the project's trap site (``tests.integration.sites.TrapSite``: calendars, facets,
  session ids), one host, unthrottled, to 10,000 pages;
* ``faults``: the soak test bed's faults host (two 50 MB bodies cut at ``--max_body_bytes``, a
  gzip bomb, slow, hanging and looping responses) and a generated host whose every page links to
  a dead host, ``--min_delay 0.1``, to 600 pages.

A baseline runs from a detached git worktree, as ``make bench-analysts`` runs one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.analysts_e2e import CRAWLER, Variant, baseline_tree, precompile, stop_stack
from benchmarks.e2e import OUR_AGENT, REPO, SITE_CRAWL, run_measured
from benchmarks.soak_site import SoakSite
from benchmarks.testbed import FULL_SITES, Testbed, host_sites
from tests.integration.sites import TrapSite

CRAWLS = ("docs-scoped", "docs-unscoped", "trap", "faults")
TIMEOUT = 900.0


def _flags(state: Path, pages: int, delay: float) -> list[str]:
    return ["--state-dir", str(state), "crawl", f"--min_delay={delay:g}",
            f"--max_pages={pages}", "--allow_private_networks",
            f"--crawl_user_agent={OUR_AGENT}", "--idle_timeout=15", "--fetch_timeout=10"]


def run_crawl(variant: Variant, crawl: str, run_dir: Path) -> dict[str, Any]:
    run_dir.mkdir(parents=True, exist_ok=True)
    state = run_dir / "state"
    fetched: Callable[[], int]
    if crawl.startswith("docs"):
        sites = [s for s in FULL_SITES if s.name in SITE_CRAWL]
        hosted = host_sites(sites)
        scope = ["--scope=host"] if crawl == "docs-scoped" else []
        command = [*CRAWLER, *_flags(state, 20_000, 0.0)[:3], *[h.seed_url for h in hosted],
                   *_flags(state, 20_000, 0.0)[3:], *scope]
        with Testbed(hosted, run_dir / "nginx") as bed:
            usage = _measured(command, variant, run_dir)
            pages = len(bed.requests())
    elif crawl == "trap":
        with TrapSite("127.0.4.1") as trap:
            command = [*CRAWLER, *_flags(state, 10_000, 0.0)[:3], f"{trap.base}/",
                       *_flags(state, 10_000, 0.0)[3:]]
            usage = _measured(command, variant, run_dir)
            pages = sum(1 for h in trap.requests() if h.method == "GET")
    else:
        with SoakSite(hosts=1, pages_per_host=600) as site:
            seeds = [site.seed_urls()[0], site.seed_urls()[-1]]
            command = [*CRAWLER, *_flags(state, 600, 0.1)[:3], *seeds,
                       *_flags(state, 600, 0.1)[3:]]
            usage = _measured(command, variant, run_dir)
            fetched = site.fetches
            pages = fetched()
    return {"variant": variant.name, "crawl": crawl, "pages": pages, "usage": asdict(usage)}


def _measured(command: Sequence[str], variant: Variant, run_dir: Path) -> Any:
    try:
        return run_measured(command, run_dir / "crawler.log", TIMEOUT, env=variant.env(),
                            cwd=variant.tree)
    finally:
        stop_stack(run_dir / "state")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a commit to measure first, from a git worktree")
    parser.add_argument("--crawls", nargs="*", default=list(CRAWLS), choices=CRAWLS)
    parser.add_argument("--out", type=Path, default=Path("results/memory_crawls.json"))
    args = parser.parse_args(argv)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memory-crawls-") as tmp:
        work = Path(tmp)
        variants = [Variant("now", REPO)]
        with _maybe_baseline(args.baseline, work) as before:
            if before is not None:
                precompile(before)
                variants.insert(0, Variant("before", before))
            for crawl in args.crawls:
                for variant in variants:
                    run = run_crawl(variant, crawl, work / f"{crawl}-{variant.name}")
                    runs.append(run)
                    print(f"{crawl:14s} {variant.name:6s} {run['pages']:6d} pages  peak RSS "
                          f"{run['usage']['peak_rss_mb']:7.1f} MB  CPU {run['usage']['cpu_s']:6.1f}"
                          f" s  wall {run['usage']['wall_s']:6.1f} s  exit "
                          f"{run['usage']['exit_code']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"baseline": args.baseline, "runs": runs}, indent=1))
    return 0


class _maybe_baseline:
    def __init__(self, commit: str | None, work: Path) -> None:
        self._commit, self._work = commit, work
        self._ctx: Any = None

    def __enter__(self) -> Path | None:
        if self._commit is None:
            return None
        self._ctx = baseline_tree(self._commit, self._work)
        return Path(self._ctx.__enter__())

    def __exit__(self, *exc: object) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


if __name__ == "__main__":
    sys.exit(main())
