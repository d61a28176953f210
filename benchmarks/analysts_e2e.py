"""What issue 15 (duplicates, page content, exports) costs the end-to-end crawl: pages/s of the
crawler before the change and now, measured in the same run.

    python -m benchmarks.analysts_e2e --repeat 3 --out results/analysts_e2e.json
    python -m benchmarks.analysts_e2e --full --repeat 3     (make bench-analysts)
    python -m benchmarks.analysts_e2e --repeat 1 --out /tmp/a.json      (seconds; the smoke test)

"before" is the baseline commit (``f41468e``, the last one before the issue's work), checked out
as a detached git worktree under the work folder and removed at the end; "now" is this source
tree as it is. Both run with this virtualenv as ``python -m pipeline.cli.main crawl ...``, with
``PYTHONPATH`` and the working directory set to their tree, so that tree's ``pipeline`` and
``transforms`` are imported ahead of the editable install (whose finder comes after the path).
A child started the same way checks that before anything is measured.

Both crawl the same nginx-served sites in ``benchmarks.e2e``'s ``unthrottled`` regime, with the
same command line, a fresh nginx (its own access log) and a fresh local stack per run:
``--smoke`` (the default) the two generated hosts, ``--full`` the Debian documentation sites
that are installed. Runs alternate before, now, before, now, ... so that drifting machine load
(another session's tests) falls on both alike; the load average before every run is recorded.
Reported: medians over the repetitions of pages/s while crawling (from the server's log) and of
the crawler process's CPU ms per page (``wait4``), the ratios now/before, and whether the
slowdown is within the goal of 15%.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.e2e import (
    FULL_REGIMES,
    OUR_AGENT,
    REPO,
    SMOKE_REGIMES,
    group_cpu_seconds,
    ours_command,
    run_measured,
    smoke_sites,
)
from benchmarks.e2e_report import Regime
from benchmarks.server_metrics import crawl_metrics
from benchmarks.testbed import (
    FULL_SITES,
    HostedSite,
    Site,
    Testbed,
    TestbedError,
    find_nginx,
    host_sites,
)
from pipeline.local.stack import load_local_stack, stop_local_stack

BASELINE = "f41468e"  # the last commit before issue 15
GOAL_RATIO = 0.85  # now/before pages/s: a slowdown of at most 15%
REGIME = "unthrottled"
# With -m the working directory comes first on the path, then PYTHONPATH: both are the tree.
CRAWLER = (sys.executable, "-m", "pipeline.cli.main")
# Present only after the change: the probe checks the child imports it iff its tree has it.
MARKER_MODULE = "transforms.core.duplicates"
PROBE = ("import importlib.util, json, pipeline.cli.main, transforms\n"
         "print(json.dumps({'pipeline': pipeline.cli.main.__file__, "
         "'transforms': transforms.__file__, "
         f"'marker': importlib.util.find_spec({MARKER_MODULE!r}) is not None}}))")


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class Variant:
    """A crawler version: the source tree its child processes import first."""

    name: str
    tree: Path

    def env(self) -> dict[str, str]:
        """This process's environment with the tree ahead of everything on the import path."""
        rest = os.environ.get("PYTHONPATH")
        return dict(os.environ, PYTHONPATH=os.pathsep.join([str(self.tree), *([rest] if rest
                                                                               else [])]))


def probe_imports(variant: Variant) -> dict[str, Any]:
    """Where a child started as the crawl's is imports ``pipeline`` and ``transforms`` from.

    Raises:
        BenchError: when they come from outside the variant's tree, or the marker module's
            presence disagrees with the tree's files (the other tree's packages leaked in).
    """
    proc = subprocess.run([sys.executable, "-c", PROBE], env=variant.env(), cwd=variant.tree,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"{variant.name}: the crawler does not import:\n{proc.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    tree = variant.tree.resolve()
    for package in ("pipeline", "transforms"):
        if not Path(found[package]).resolve().is_relative_to(tree):
            raise BenchError(f"{variant.name}: {package} imported from {found[package]}, "
                             f"not from {tree}")
    on_disk = (tree / (MARKER_MODULE.replace(".", "/") + ".py")).is_file()
    if found["marker"] != on_disk:
        raise BenchError(f"{variant.name}: {MARKER_MODULE} importable={found['marker']} but "
                         f"present in the tree={on_disk}")
    return found


@contextmanager
def baseline_tree(commit: str, parent: Path) -> Iterator[Path]:
    """A detached git worktree of ``commit`` under ``parent``, removed on exit."""
    tree = parent / "before"
    proc = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree),
                           commit], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"git worktree add {commit} failed: {proc.stderr.strip()}")
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)


def precompile(tree: Path) -> None:
    """Byte-compiles the tree's packages, so a fresh worktree's first run does not pay for
    compiling (its CPU per page would count it)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "pipeline", "transforms"],
                   cwd=tree, capture_output=True)


def run_variant(variant: Variant, regime: Regime, hosted: Sequence[HostedSite], run_dir: Path,
                extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """One crawl, as ``benchmarks.e2e.run_once`` runs ours, by the variant's tree."""
    seeds = [h.seed_url for h in hosted]
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [*CRAWLER, *ours_command(regime, seeds, run_dir)[1:], *extra_args]
    load = os.getloadavg()
    with Testbed(list(hosted), run_dir / "nginx", delay=regime.delay or None) as bed:
        try:
            usage = run_measured(command, run_dir / "crawler.log", regime.timeout,
                                 env=variant.env(), cwd=variant.tree)
        finally:
            stack_cpu = stop_stack(run_dir / "state")
    robots = {h.authority: h.robots_txt(regime.delay or None) for h in hosted}
    metrics = crawl_metrics(bed.requests(), robots, OUR_AGENT.split("/", 1)[0])
    pages = metrics.pages
    return {"variant": variant.name, "usage": asdict(usage), "pages": pages,
            "pages_per_s": round(metrics.pages_per_s, 3),
            "pages_per_wall_s": round(pages / usage.wall_s, 3) if usage.wall_s else 0.0,
            "cpu_per_page_ms": round(1000 * usage.cpu_s / pages, 3) if pages else None,
            "stack_cpu_per_page_ms": round(1000 * stack_cpu / pages, 3) if pages else None,
            "duplicates": metrics.duplicates, "disallowed": metrics.disallowed,
            "load_before": [round(x, 2) for x in load]}


def stop_stack(state_dir: Path) -> float:
    """The emulators' CPU seconds, then stops them (the stack's state file is the same in both
    versions)."""
    stack = load_local_stack(state_dir)
    cpu = group_cpu_seconds(list(stack.pids.values())) if stack else 0.0
    stop_local_stack(state_dir)
    return cpu


def stats(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def ok(run: dict[str, Any]) -> bool:
    return bool(run["usage"]["exit_code"] == 0 and not run["usage"]["timed_out"]
                and run["pages"] > 0)


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per variant, medians and ranges over its successful runs; the ratios now/before of the
    medians, and of each repetition's pair (before and now run back to back)."""
    out: dict[str, Any] = {}
    for name in ("before", "now"):
        mine = [r for r in runs if r["variant"] == name and ok(r)]
        out[name] = {"runs": len(mine),
                     "failed": sum(1 for r in runs if r["variant"] == name and not ok(r))}
        for key in ("pages", "pages_per_s", "pages_per_wall_s", "cpu_per_page_ms",
                    "stack_cpu_per_page_ms"):
            out[name][key] = stats([r[key] for r in mine if r[key] is not None])
        out[name]["wall_s"] = stats([r["usage"]["wall_s"] for r in mine])
        out[name]["peak_rss_mb"] = stats([r["usage"]["peak_rss_mb"] for r in mine])

    def ratio(key: str) -> float | None:
        b, n = out["before"][key], out["now"][key]
        return round(n["median"] / b["median"], 3) if b and n and b["median"] else None

    pairs = [(b, n) for b, n in zip([r for r in runs if r["variant"] == "before"],
                                    [r for r in runs if r["variant"] == "now"], strict=False)
             if ok(b) and ok(n) and b["pages_per_s"]]
    speed = ratio("pages_per_s")
    out["ratio"] = {"pages_per_s": speed, "pages_per_wall_s": ratio("pages_per_wall_s"),
                    "cpu_per_page_ms": ratio("cpu_per_page_ms"),
                    "pages_per_s_paired": [round(n["pages_per_s"] / b["pages_per_s"], 3)
                                           for b, n in pairs]}
    out["slowdown_pct"] = round(100 * (1 - speed), 1) if speed is not None else None
    out["goal_ratio"] = GOAL_RATIO
    out["meets_goal"] = speed is not None and speed >= GOAL_RATIO
    return out


def report(summary: dict[str, Any]) -> str:
    """A few lines for the terminal."""
    lines = [f"{'':24}{'before':>25}{'now':>25}"]
    for key, label in (("pages_per_s", "pages/s while crawling"),
                       ("pages_per_wall_s", "pages/s over wall time"),
                       ("cpu_per_page_ms", "CPU ms/page (crawler)"),
                       ("stack_cpu_per_page_ms", "CPU ms/page (emulators)"),
                       ("pages", "pages"), ("peak_rss_mb", "peak RSS, MB")):
        cells = []
        for name in ("before", "now"):
            s = summary[name][key]
            cells.append(f"{_num(s['median'])} ({_num(s['min'])}..{_num(s['max'])})" if s
                         else "-")
        lines.append(f"{label:24}{cells[0]:>25}{cells[1]:>25}")
    r = summary["ratio"]
    lines.append(f"now/before: pages/s {r['pages_per_s']}, over wall time {r['pages_per_wall_s']},"
                 f" CPU/page {r['cpu_per_page_ms']}; paired pages/s {r['pages_per_s_paired']}")
    lines.append(f"slowdown {summary['slowdown_pct']}% (goal: at most "
                 f"{100 * (1 - GOAL_RATIO):.0f}%): {'met' if summary['meets_goal'] else 'NOT met'}")
    return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.2f}"


def choose_sites(full: bool, root: Path, site_pages: int) -> tuple[list[Site], list[str]]:
    """The sites to crawl, and the documentation sites skipped because not installed."""
    if not full:
        return list(smoke_sites(root, site_pages)), []
    have = [s for s in FULL_SITES if s.root.is_dir()]
    if not have:
        raise TestbedError("no documentation site is installed: python -m benchmarks.testbed "
                           "--full")
    return have, [s.package for s in FULL_SITES if s not in have]


def main(argv: list[str] | None = None, progress: Callable[[str], None] = print
         ) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per version (default: 3)")
    parser.add_argument("--smoke", action="store_true",
                        help="two small generated hosts (the default)")
    parser.add_argument("--full", action="store_true",
                        help="the installed Debian documentation sites instead")
    parser.add_argument("--out", default="results/analysts_e2e.json")
    parser.add_argument("--work-dir", help="worktree, nginx and crawler state (default: temp)")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit (default: {BASELINE})")
    parser.add_argument("--before-tree",
                        help="an existing checkout of the baseline instead of a git worktree")
    parser.add_argument("--site-pages", type=int, default=25,
                        help="pages per generated host with --smoke (default: 25, as e2e)")
    parser.add_argument("--max-pages", type=int,
                        help="the crawl's page cap (default: the e2e regime's)")
    parser.add_argument("--crawler-arg", action="append", default=[], metavar="FLAG",
                        help="an extra pipeline flag for both versions (repeatable; it must "
                             "exist in both)")
    args = parser.parse_args(argv)
    if args.smoke and args.full:
        parser.error("--smoke and --full exclude each other")
    if find_nginx() is None:
        raise TestbedError("nginx is not installed: python -m benchmarks.testbed")
    regime = next(r for r in (FULL_REGIMES if args.full else SMOKE_REGIMES) if r.name == REGIME)
    if args.max_pages:
        regime = dataclasses.replace(regime, max_pages=args.max_pages)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="analysts-e2e-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    sites, skipped = choose_sites(args.full, work / "sites", args.site_pages)
    hosted = host_sites(sites)
    load_start = os.getloadavg()
    try:
        with _before(args, work) as before_tree:
            variants = (Variant("before", before_tree), Variant("now", REPO))
            imports = {v.name: probe_imports(v) for v in variants}
            for v in variants:
                precompile(v.tree)
            progress(f"before: {before_tree} ({args.baseline}); now: {REPO}; sites: "
                     + ", ".join(f"{h.site.name} {h.base_url}" for h in hosted))
            runs = []
            for rep in range(1, args.repeat + 1):
                for v in variants:  # alternating, so drifting machine load hits both
                    run = run_variant(v, regime, hosted, work / f"{rep}-{v.name}",
                                      args.crawler_arg)
                    run["rep"] = rep
                    runs.append(run)
                    u = run["usage"]
                    progress(f"#{rep} {v.name:6}: {run['pages']} pages, {run['pages_per_s']:.1f} "
                             f"pages/s while crawling, wall {u['wall_s']:.1f} s, CPU "
                             f"{u['cpu_s']:.1f} s ({run['cpu_per_page_ms']} ms/page), exit "
                             f"{u['exit_code']}, load {run['load_before'][0]}")
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    summary = summarize(runs)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "repeat": args.repeat,
            "sites": [f"{h.site.name} ({h.site.package or 'generated'})" for h in hosted],
            "not_installed": skipped, "regime": asdict(regime), "baseline": args.baseline,
            "imports": imports,
            "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python "
                       f"{platform.python_version()}, {platform.system()} {platform.release()}",
            "load_avg_start": [round(x, 2) for x in load_start],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()],
            "command": "python -m benchmarks.analysts_e2e " + " ".join(argv or sys.argv[1:])}
    result = {"meta": meta, "summary": summary, "runs": runs}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    progress("\n" + report(summary))
    return result


@contextmanager
def _before(args: argparse.Namespace, work: Path) -> Iterator[Path]:
    if args.before_tree:
        yield Path(args.before_tree).resolve()
    else:
        with baseline_tree(args.baseline, work) as tree:
            yield tree


if __name__ == "__main__":
    main()
