"""End-to-end benchmark: our crawler against Scrapy on real documentation sites, same run.

    python -m benchmarks.e2e --repeat 3 --out-dir results        (``make bench``)
    python -m benchmarks.e2e --smoke --out-dir /tmp/x            (seconds; part of the tests)

For every regime and repetition, each crawler gets a fresh nginx (its own access log) serving the
same sites on the same loopback hosts, the same seeds, delay, per-host concurrency and page cap,
and runs as a separate process whose CPU time and peak RSS come from ``wait4``. Our crawler runs
as a user would run it, ``crawler crawl URL...``: it starts its local stack (the Pub/Sub,
Bigtable and GCS emulators) and runs the streaming pipeline on each local runner in turn
(``ours``: the DirectRunner, ``ours-prism``: Beam's Prism, ``ours-flink``: an embedded Flink;
``--crawlers`` picks); the emulators' CPU is reported beside the pipeline's. Peak RSS is given
twice: the crawler process's (``wait4``) and the sum over its process group, sampled every
0.2 s (the crawler plus the Prism or Flink processes it started). Everything else is measured
at the server: pages, the crawling window, duplicates, disallowed fetches, concurrency, gaps,
robots.txt first.

Regimes: ``unthrottled`` (no delay, one request at a time per host), ``unthrottled-c4`` (four
at a time), ``polite`` (delay d on H hosts, whose ideal is H/d pages/s; one host's robots.txt
also asks for Crawl-delay: d), and ``site``: three sites crawled to the end, unthrottled, one
request at a time per host, ours with ``--scope host``, Scrapy with ``allowed_domains``; its
figures add the share of each host's span spent idle (from the log) and our loop latency (from
our run summary).
Writes ``e2e.json``, ``e2e.md`` and ``e2e.png`` (pages over time) to the output folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.e2e_report import CRAWLERS, RUNNER_FLAGS, Regime, markdown, plot, summarize
from benchmarks.scrapy_run import USER_AGENT as SCRAPY_AGENT
from benchmarks.server_metrics import crawl_metrics, pages_over_time
from benchmarks.testbed import (
    FULL_SITES,
    HostedSite,
    Site,
    Testbed,
    TestbedError,
    host_sites,
    install_packages,
    missing_packages,
)

OUR_AGENT = "beam-crawler-bench/0.1"
REPO = Path(__file__).resolve().parent.parent


SITE_CRAWL = ("apache", "postgresql", "git")  # the site regime's three documentation sites
FULL_REGIMES = (Regime("unthrottled", 0.0, 1, 1500, 420.0),
                Regime("unthrottled-c4", 0.0, 4, 1500, 420.0),
                Regime("polite", 0.25, 1, 500, 300.0),
                Regime("site", 0.0, 1, 20_000, 900.0, sites=SITE_CRAWL, scope="host"))
SMOKE_REGIMES = (Regime("unthrottled", 0.0, 1, 40, 150.0),
                 Regime("unthrottled-c4", 0.0, 4, 40, 150.0),
                 Regime("polite", 0.1, 1, 30, 150.0),
                 Regime("site", 0.0, 1, 1000, 150.0, scope="host"))


@dataclass(frozen=True)
class Usage:
    """A finished process: wall seconds, CPU seconds (user + system), peak RSS, exit code."""

    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    exit_code: int
    timed_out: bool
    peak_group_rss_mb: float = 0.0  # the process group's summed RSS, sampled
    peak_children_rss_mb: float = 0.0  # the same less the process's own (Prism, Flink's JVMs)


def group_rss_bytes(pgid: int) -> tuple[int, int]:
    """The summed resident set of every live process in process group ``pgid``, and that of
    the group's leader (process ``pgid``) alone."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = leader = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # state, ppid, pgrp, ...; rss is field 24 (index 21 here)
            rss = int(fields[21]) * page
            total += rss
            if stat.parent.name == str(pgid):
                leader = rss
    return total, leader


def run_measured(cmd: Sequence[str], log: Path, timeout: float,
                 env: dict[str, str] | None = None, cwd: Path = REPO) -> Usage:
    """Runs ``cmd`` in its own session, in ``cwd`` (another source tree's, to run that tree's
    crawler with ``python -m``); CPU and peak RSS from ``wait4`` cover the process and the
    children it waited for (processes it leaves running, like the emulators, are not)."""
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=cwd, start_new_session=True)
    timed_out = False
    peak_group = peak_children = 0
    next_sample = 0.0
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() >= next_sample:
                total, own = group_rss_bytes(proc.pid)
                peak_group = max(peak_group, total)
                peak_children = max(peak_children, total - own)
                next_sample = time.monotonic() + 0.2
            if time.monotonic() - started > timeout and not timed_out:
                timed_out = True
                os.killpg(proc.pid, signal.SIGINT)
            if time.monotonic() - started > timeout + 30:
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.05)
    except BaseException:  # interrupted: the crawler must not outlive the benchmark
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Usage(round(time.monotonic() - started, 3), round(usage.ru_utime + usage.ru_stime, 3),
                 round(usage.ru_maxrss / 1024, 1), proc.returncode, timed_out,
                 round(max(peak_group / 2**20, usage.ru_maxrss / 1024), 1),
                 round(peak_children / 2**20, 1))


def group_cpu_seconds(pgids: Sequence[int]) -> float:
    """CPU seconds of every live process in these process groups (the emulators)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in pgids:  # fields after the command: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def scrapy_command(regime: Regime, seeds: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "benchmarks.scrapy_run", "--delay", f"{regime.delay:g}",
            "--concurrency", str(regime.concurrency), "--max-pages", str(regime.max_pages),
            "--timeout", f"{regime.timeout - 10:g}", *seeds]


def ours_command(regime: Regime, seeds: Sequence[str], run_dir: Path) -> list[str]:
    """``crawler crawl`` with the regime's delay and cap, kept on the seeds' hosts as Scrapy's
    ``allowed_domains`` keeps Scrapy (the doc sites link to the internet): by ``--scope`` when
    the regime names one, else by a policy with ``allow_domains``; more than one request per
    host comes from the policy's ``shards`` (N frontier keys per host, each with the delay)."""
    crawler = Path(sys.executable).with_name("crawler")
    run_dir.mkdir(parents=True, exist_ok=True)
    policy = run_dir / "policy.json"
    hosts = sorted({urlsplit(u).hostname or "" for u in seeds})
    defaults: dict[str, Any] = {"shards": regime.concurrency}
    if not regime.scope:
        defaults["allow_domains"] = hosts
    policy.write_text(json.dumps({"defaults": defaults}))
    scope = [f"--scope={regime.scope}"] if regime.scope else []
    return [str(crawler), "--state-dir", str(run_dir / "state"), "crawl", *seeds,
            f"--min_delay={regime.delay:g}", f"--max_pages={regime.max_pages}",
            "--allow_private_networks", f"--crawl_user_agent={OUR_AGENT}",
            "--idle_timeout=5", "--warc_roll_seconds=3", f"--policy={policy}", *scope]


def loop_latency_of(log: Path) -> str:
    """The loop-latency figures of our run summary (``p50 ... ms, ...``), or "" without one."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    match = re.search(r"^\s*loop latency\s+(.+)$", text, re.M)
    return match.group(1).strip() if match else ""


def run_once(crawler: str, regime: Regime, hosted: list[HostedSite], run_dir: Path,
             ours_args: Sequence[str] = ()) -> dict[str, Any]:
    if regime.sites:
        hosted = [h for h in hosted if h.site.name in regime.sites]
    seeds = [h.seed_url for h in hosted]
    run_dir.mkdir(parents=True, exist_ok=True)
    stack_cpu = 0.0
    with Testbed(hosted, run_dir / "nginx", delay=regime.delay or None) as bed:
        launched = time.time()
        if crawler == "scrapy":
            usage = run_measured(scrapy_command(regime, seeds), run_dir / "scrapy.log",
                                 regime.timeout)
            agent = SCRAPY_AGENT
        else:
            state = run_dir / "state"
            try:
                usage = run_measured([*ours_command(regime, seeds, run_dir),
                                      *RUNNER_FLAGS[crawler], *ours_args],
                                     run_dir / "ours.log", regime.timeout)
            finally:
                stack_cpu = _stop_stack(state)
            agent = OUR_AGENT
    requests = bed.requests()
    robots = {h.authority: h.robots_txt(regime.delay or None) for h in hosted}
    metrics = crawl_metrics(requests, robots, agent.split("/", 1)[0])
    return {"crawler": crawler, "regime": regime.name, "usage": asdict(usage),
            "stack_cpu_s": round(stack_cpu, 3), "metrics": metrics.to_json(),
            "loop_latency": loop_latency_of(run_dir / "ours.log") if crawler != "scrapy" else "",
            "cpu_per_page_ms": round(1000 * usage.cpu_s / metrics.pages, 3) if metrics.pages
            else None,
            "timeline": pages_over_time(requests, launched)}


def _stop_stack(state_dir: Path) -> float:
    """The emulators' CPU seconds, then ``crawler local down``."""
    from pipeline.local.stack import load_local_stack

    stack = load_local_stack(state_dir)
    cpu = group_cpu_seconds(list(stack.pids.values())) if stack else 0.0
    subprocess.run([str(Path(sys.executable).with_name("crawler")), "--state-dir", str(state_dir),
                    "local", "down"], capture_output=True, cwd=REPO)
    return cpu


def smoke_sites(root: Path, pages: int = 25) -> tuple[Site, ...]:
    """Two small generated sites: a chain of linked pages with a disallowed folder."""
    sites = []
    for name in ("smoke-a", "smoke-b"):
        site_root = root / name
        (site_root / "private").mkdir(parents=True, exist_ok=True)
        for i in range(pages):
            links = "".join(f'<a href="/p{j}.html">{j}</a> ' for j in (i + 1, i + 2, 0)
                            if j < pages)
            (site_root / f"p{i}.html").write_text(
                f"<html><head><title>{name} {i}</title></head><body><h1>{name} page {i}</h1>"
                f'{links}<a href="/private/secret.html">private</a></body></html>')
        (site_root / "private/secret.html").write_text("<html><body>no</body></html>")
        sites.append(Site(name, "", site_root, "/p0.html", disallow=("/private/",)))
    return tuple(sites)


def main(argv: list[str] | None = None, progress: Callable[[str], None] = print
         ) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out-dir", default="results")
    parser.add_argument("--work-dir", help="nginx and crawler state (default: a temp folder)")
    parser.add_argument("--regimes", default="unthrottled,unthrottled-c4,polite,site",
                        help="comma-separated")
    parser.add_argument("--crawlers", default=",".join(CRAWLERS),
                        help="comma-separated, of " + ", ".join(CRAWLERS))
    parser.add_argument("--smoke", action="store_true", help="two small generated hosts")
    parser.add_argument("--ours-arg", action="append", default=[], metavar="FLAG",
                        help="an extra pipeline flag for our crawler, e.g. "
                             "--ours-arg=--max_lease_urls=64 (repeatable; for experiments)")
    parser.add_argument("--no-install", action="store_true",
                        help="fail instead of apt-installing missing Debian packages")
    args = parser.parse_args(argv)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="crawl-bench-"))
    sites = smoke_sites(work / "sites") if args.smoke else FULL_SITES
    known = SMOKE_REGIMES if args.smoke else FULL_REGIMES
    wanted = set(args.regimes.split(","))
    regimes = [r for r in known if r.name in wanted]
    if not regimes:
        parser.error(f"--regimes: choose from {', '.join(r.name for r in known)}")
    crawlers = [c for c in CRAWLERS if c in args.crawlers.split(",")]
    missing = missing_packages(sites)
    if missing:
        if args.no_install:
            raise TestbedError("missing Debian packages: " + " ".join(missing))
        progress(f"installing Debian packages: {' '.join(missing)} ...")
        install_packages(missing)
    hosted = host_sites(sites)
    progress("sites: " + ", ".join(f"{h.site.name} {h.base_url}" for h in hosted))
    runs: list[dict[str, Any]] = []
    for regime in regimes:
        for rep in range(1, args.repeat + 1):
            for crawler in crawlers:  # interleaved, so drifting machine noise hits both
                run = run_once(crawler, regime, hosted, work / f"{regime.name}-{rep}-{crawler}",
                               args.ours_arg)
                run["rep"] = rep
                runs.append(run)
                m, u = run["metrics"], run["usage"]
                progress(f"{regime.name} #{rep} {crawler:10}: {m['pages']} pages, "
                         f"{m['pages_per_s']:.1f} pages/s while crawling, wall {u['wall_s']:.1f} s,"
                         f" CPU {u['cpu_s']:.1f} s, RSS {u['peak_rss_mb']:.0f} MB "
                         f"({u['peak_group_rss_mb']:.0f} with its children), "
                         f"dup {m['duplicates']}, disallowed {m['disallowed']}, "
                         f"max conc {m['max_concurrent']}, idle {m['max_idle_share']:.3f}, "
                         f"exit {u['exit_code']}"
                         + (f", loop {run['loop_latency']}" if run["loop_latency"] else ""))
    summary = summarize(runs, regimes, len(hosted))
    meta = {"date": time.strftime("%Y-%m-%d"), "repeat": args.repeat, "smoke": args.smoke,
            "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python "
                       f"{platform.python_version()}, {platform.system()} {platform.release()}",
            "sites": [f"{h.site.name} ({h.site.package or 'generated'})" for h in hosted],
            "command": "python -m benchmarks.e2e " + " ".join(argv or sys.argv[1:]),
            "ours_extra_flags": args.ours_arg}
    result = {"meta": meta, "summary": summary, "runs": runs}
    (out_dir / "e2e.json").write_text(json.dumps(result, indent=1))
    table = markdown(summary, meta)
    (out_dir / "e2e.md").write_text(table + "\n")
    plot(runs, regimes, out_dir / "e2e.png")
    progress("\n" + table)
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
