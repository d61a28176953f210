"""Soak benchmark: does the crawler's memory stay bounded over a long unthrottled crawl?

    python -m benchmarks.soak --pages 50000 --out-dir results          (``make bench-soak``)
    python -m benchmarks.soak --pages 5000 --out-dir /tmp/x            (the suite's smoke soak)
    python -m benchmarks.soak --runner flink ...                       (embedded Flink)
    python -m benchmarks.soak --trace ...      (tracemalloc top holders at 1,000 and 10,000 pages)

Serves ``benchmarks.soak_site.SoakSite`` (generated hosts with traps and dead links, the project's
trap site, a faults host with 50 MB bodies and a gzip bomb) and runs ``crawler crawl`` on it as a
user would, unthrottled, until ``--pages`` fetches. Every ``--interval`` seconds it samples the
resident set (``/proc/PID/status`` VmRSS) of the crawler's processes: the Python ones (the
driver, which also runs the pipeline on the DirectRunner, and any SDK worker) and, apart, any
JVM of its process group (the embedded Flink job server); the emulators run in their own
sessions and are not counted. Pages are the GET requests the test bed answered.

The figures: peak RSS, and the slope of RSS against pages after ``--warmup`` pages (least
squares, KB per page). Writes ``soak[-RUNNER].json`` and ``soak[-RUNNER].png`` to the output
folder and prints the figures; with ``--max-slope-kb`` / ``--max-peak-mb`` it exits 1 when a
figure is above its bound.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.soak_site import SoakSite

REPO = Path(__file__).resolve().parent.parent
TRACE_AT = (1_000, 10_000)


@dataclass(frozen=True)
class Sample:
    """One sample: seconds since launch, pages fetched, RSS of the Python processes and of
    the JVMs of the crawler's process group (MB)."""

    t: float
    pages: int
    rss_mb: float
    jvm_mb: float


def _rss_kb(pid: int) -> tuple[int, str, int]:
    """(VmRSS kB, command name, process group) of ``pid``; (0, "", -1) when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0, "", -1
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields.get("VmRSS", "0 kB").split()[0])
    name, rest = stat.rsplit(")", 1)[0].split("(", 1)[1], stat.rsplit(")", 1)[1].split()
    return rss, name, int(rest[2])


def group_rss_mb(pgid: int) -> tuple[float, float]:
    """(Python MB, JVM MB): the resident sets of the live processes of process group ``pgid``
    (JVMs apart, everything else as the crawler's)."""
    python = jvm = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        rss, name, group = _rss_kb(int(entry.name))
        if group != pgid:
            continue
        if name == "java":
            jvm += rss
        else:  # the crawler (its command name is its script's), SDK workers, helpers
            python += rss
    return round(python / 1024, 1), round(jvm / 1024, 1)


def slope_kb_per_page(samples: Sequence[Sample], warmup: int) -> float | None:
    """Least-squares slope of Python RSS against pages over the samples past ``warmup`` pages."""
    points = [(s.pages, s.rss_mb * 1024) for s in samples if s.pages >= warmup]
    if len(points) < 3 or points[-1][0] == points[0][0]:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def crawl_command(site: SoakSite, pages: int, runner: str, run_dir: Path) -> list[str]:
    crawler = Path(sys.executable).with_name("crawler")
    flags = [f"--max_pages={pages}", "--min_delay=0", "--allow_private_networks",
             "--idle_timeout=30", "--fetch_timeout=10"]
    if runner == "flink":
        flags.append("--runner=FlinkRunner")
    return [str(crawler), "--state-dir", str(run_dir / "state"), "crawl", *site.seed_urls(),
            *flags]


def soak(pages: int, runner: str, out_dir: Path, interval: float, warmup: int,
         timeout: float, trace: bool, hosts: int, pages_per_host: int) -> dict[str, object]:
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir = out_dir / f"soak-{runner}-run"
    env = dict(os.environ)
    if trace:
        env["CRAWLER_TRACEMALLOC"] = str(out_dir / f"tracemalloc-{runner}")
    samples: list[Sample] = []
    traced: list[int] = []
    with SoakSite(hosts=hosts, pages_per_host=pages_per_host) as site:
        started = time.monotonic()
        with (run_dir.parent / f"soak-{runner}.log").open("wb") as log:
            run_dir.mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen(crawl_command(site, pages, runner, run_dir), stdout=log,
                                    stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                    start_new_session=True)
        try:
            next_sample = started
            while proc.poll() is None:
                if time.monotonic() - started > timeout:
                    os.killpg(proc.pid, signal.SIGINT)
                    proc.wait(60)
                    break
                if time.monotonic() >= next_sample:
                    fetched = site.fetches()
                    python, jvm = group_rss_mb(proc.pid)
                    samples.append(Sample(round(time.monotonic() - started, 1), fetched,
                                          python, jvm))
                    next_sample += interval
                    for mark in TRACE_AT:
                        if trace and fetched >= mark and mark not in traced:
                            traced.append(mark)
                            os.kill(proc.pid, signal.SIGUSR1)
                    print(f"{samples[-1].t:7.1f} s {fetched:7d} pages  RSS {python:7.1f} MB"
                          + (f"  JVM {jvm:7.1f} MB" if jvm else ""), flush=True)
                time.sleep(0.2)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            subprocess.run([str(Path(sys.executable).with_name("crawler")), "--state-dir",
                            str(run_dir / "state"), "local", "down"], capture_output=True,
                           cwd=REPO)
        fetched = site.fetches()
    slope = slope_kb_per_page(samples, warmup)
    result: dict[str, object] = {
        "runner": runner, "pages_goal": pages, "pages": fetched, "exit_code": proc.returncode,
        "wall_s": round(time.monotonic() - started, 1), "warmup_pages": warmup,
        "peak_rss_mb": max((s.rss_mb for s in samples), default=0.0),
        "peak_jvm_mb": max((s.jvm_mb for s in samples), default=0.0),
        "slope_kb_per_page": None if slope is None else round(slope, 2),
        "traced_at_pages": traced, "samples": [asdict(s) for s in samples]}
    suffix = "" if runner == "direct" else f"-{runner}"
    (out_dir / f"soak{suffix}.json").write_text(json.dumps(result, indent=1))
    plot(result, out_dir / f"soak{suffix}.png")
    return result


def plot(result: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["samples"]
    assert isinstance(samples, list)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([s["pages"] for s in samples], [s["rss_mb"] for s in samples], label="crawler RSS")
    if any(s["jvm_mb"] for s in samples):
        ax.plot([s["pages"] for s in samples], [s["jvm_mb"] for s in samples],
                label="Flink job server JVM RSS")
    ax.axvline(int(str(result["warmup_pages"])), color="grey", linestyle=":", label="warm-up")
    ax.set_xlabel("pages fetched")
    ax.set_ylabel("resident set (MB)")
    ax.set_title(f"soak on {result['runner']}: peak {result['peak_rss_mb']} MB, "
                 f"slope {result['slope_kb_per_page']} KB/page after warm-up")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=50_000)
    parser.add_argument("--runner", choices=("direct", "flink"), default="direct")
    parser.add_argument("--out-dir", type=Path, default=Path("results"))
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--warmup", type=int, default=5_000, help="pages before the slope")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--hosts", type=int, default=6, help="generated hosts")
    parser.add_argument("--pages-per-host", type=int, default=9_000)
    parser.add_argument("--trace", action="store_true", help="tracemalloc snapshots")
    parser.add_argument("--max-slope-kb", type=float, help="fail above this slope")
    parser.add_argument("--max-peak-mb", type=float, help="fail above this peak RSS")
    args = parser.parse_args(argv)
    result = soak(args.pages, args.runner, args.out_dir, args.interval, args.warmup,
                  args.timeout, args.trace, args.hosts, args.pages_per_host)
    print(f"soak on {args.runner}: {result['pages']} pages in {result['wall_s']} s, "
          f"peak RSS {result['peak_rss_mb']} MB, slope {result['slope_kb_per_page']} KB/page "
          f"after {args.warmup} pages, exit {result['exit_code']}")
    failed = []
    slope = result["slope_kb_per_page"]
    if args.max_slope_kb is not None and (slope is None or float(str(slope)) > args.max_slope_kb):
        failed.append(f"slope {slope} KB/page > {args.max_slope_kb}")
    if args.max_peak_mb is not None and float(str(result["peak_rss_mb"])) > args.max_peak_mb:
        failed.append(f"peak {result['peak_rss_mb']} MB > {args.max_peak_mb}")
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
