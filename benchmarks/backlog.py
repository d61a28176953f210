"""Backlog benchmark: the cost per fetched page as one host's backlog grows to a million URLs,
and the time a new job takes to resume such a host.

    python -m benchmarks.backlog --pages 34500 --out results/backlog.json  (make bench-backlog)
    python -m benchmarks.backlog --smoke --out /tmp/backlog.json           (seconds; a test)

A generated site on one loopback host, served by ``pipeline.demo.server`` (gzip, keep-alive):
page ``/p/N`` links to 30 new pages, ``/p/30N+1`` .. ``/p/30N+30``, so after ``n`` pages the
host has about ``29 n`` URLs queued. ``crawler crawl`` runs it unthrottled (one request at a
time, as any host), as a separate process, until ``--pages`` pages; then a second job
(``crawler run`` on the same tables, its state empty) resumes the host for ``--resume-pages``
more. Measured:

* pages/s per decile of the first run's pages (from the server's log), and the ratio of the last
  decile to the first (goal: at least 0.8): a cost per page that grew with the backlog would
  show here;
* the crawler process's CPU time per page, per decile, and the emulators' (on a small machine
  they compete for the same cores, so pages/s also moves with the emulators' cost);
* the crawler process's RSS, sampled every second (goal: flat), and its peak;
* state bytes written per page (the frontier counts what it writes, ``h:state_bytes``);
* resume time: from the second job's start to its first request to the host.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.server import LoggedServers
from pipeline.local import emulators
from pipeline.local.state_file import read_json

REPO = Path(__file__).resolve().parent.parent
ADDRESS = "127.0.0.41"
LINKS = 30


def page(n: int, links: int = LINKS) -> bytes:
    """Page ``n`` of the generated site: a title, some text and its ``links`` new pages."""
    hrefs = "".join(f'<li><a href="/p/{links * n + i}">page {links * n + i}</a></li>'
                    for i in range(1, links + 1))
    return (f"<!doctype html><html><head><title>Page {n}</title></head><body><h1>Page {n}"
            f"</h1><p>Generated page {n} of an endless site: every page links to {links} new "
            f"pages.</p><ul>{hrefs}</ul></body></html>").encode()


def respond(view: RequestView) -> Reply:
    path = view.target.split("?", 1)[0]
    if path.startswith("/p/") and path[3:].isdigit():
        return Reply(body=page(int(path[3:])))
    if path == "/":
        return Reply(body=page(0))
    return Reply(404, b"<h1>not found</h1>")


def deciles(hits: Sequence[Hit]) -> list[float]:
    """Pages/s in each tenth of the fetched pages (by request start)."""
    starts = sorted(h.start for h in hits if h.path != "/robots.txt" and h.method == "GET")
    if len(starts) < 20:
        return []
    size = len(starts) // 10
    rates = []
    for i in range(10):
        chunk = starts[i * size:(i + 1) * size + 1]
        span = chunk[-1] - chunk[0]
        rates.append(round((len(chunk) - 1) / span, 1) if span > 0 else 0.0)
    return rates


class ProcessSampler:
    """Samples, every ``interval`` seconds, the crawler process's RSS and CPU time and the CPU
    time of the local stack's emulators (found through the stack's state file once it is up):
    on a 2-core machine the emulators' CPU is the crawler's competition, so pages/s alone
    cannot tell a crawler that slows down from an emulator that does."""

    def __init__(self, pid: int, state: Path, interval: float = 1.0) -> None:
        self.pid, self.state, self.interval = pid, state, interval
        # (seconds since the epoch, crawler RSS MB, crawler CPU s, emulators' CPU s)
        self.samples: list[tuple[float, float, float, float]] = []
        self._groups: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            mb = rss_mb(self.pid)
            if mb:
                self.samples.append((time.time(), mb, cpu_seconds([self.pid]),
                                     cpu_seconds(self._emulator_pids())))

    def _emulator_pids(self) -> list[int]:
        if not self._groups:
            data = read_json(self.state / "local.json")
            self._groups = [int(p) for p in (data or {}).get("pids", {}).values()]
        groups = set(self._groups)
        return [p.pid for p in emulators.processes() if p.pgid in groups]

    @property
    def rss(self) -> list[tuple[float, float]]:
        """(seconds since the first sample, MB)."""
        t0 = self.samples[0][0] if self.samples else 0.0
        return [(round(t - t0, 1), mb) for t, mb, _, _ in self.samples]


def rss_mb(pid: int) -> float:
    """Resident memory of one process, MB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time of ``pids`` (those still alive), seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def cpu_ms_per_page(hits: Sequence[Hit], samples: Sequence[tuple[float, float, float, float]],
                    column: int) -> list[float]:
    """CPU ms per page in each tenth of the pages: the CPU time (``column`` of the samples: 2
    the crawler, 3 the emulators) spent between the tenth's first and last request starts."""
    starts = sorted(h.start for h in hits if h.path != "/robots.txt" and h.method == "GET")
    if len(starts) < 20 or len(samples) < 2:
        return []
    times = [s[0] for s in samples]

    def cpu_at(t: float) -> float:
        i = max(0, min(len(times) - 2, bisect.bisect_left(times, t) - 1))
        (t0, c0), (t1, c1) = (times[i], samples[i][column]), (times[i + 1],
                                                               samples[i + 1][column])
        return c0 + (c1 - c0) * min(1.0, max(0.0, (t - t0) / (t1 - t0 or 1)))

    size = len(starts) // 10
    out = []
    for i in range(10):
        chunk = starts[i * size:(i + 1) * size + 1]
        pages = len(chunk) - 1
        out.append(round(1000 * (cpu_at(chunk[-1]) - cpu_at(chunk[0])) / max(1, pages), 2))
    return out


def crawler_command(state: Path, *args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("crawler")), "--state-dir", str(state), *args]


def _flags(policy: Path) -> list[str]:
    return ["--min_delay=0", "--allow_private_networks", "--idle_timeout=6",
            "--warc_roll_seconds=2", "--max_seen_per_host=4000000", f"--policy={policy}"]


def run_sampled(cmd: list[str], log: Path, timeout: float, state: Path
         ) -> tuple[int, ProcessSampler]:
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True, env=os.environ.copy())
        with ProcessSampler(proc.pid, state) as rss:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGINT)
                code = proc.wait(timeout=60)
            except BaseException:
                os.killpg(proc.pid, signal.SIGKILL)
                raise
    return code, rss


def _host_cells(state: Path, key: str) -> dict[str, str]:
    from google.cloud import bigtable

    from pipeline.local.stack import load_local_stack

    stack = load_local_stack(state)
    assert stack is not None
    with stack.activate():
        row = bigtable.Client(project=stack.project).instance(stack.instance).table(
            "hosts").read_row(key.encode())
    if row is None:
        return {}
    return {c.decode(): v[0].value.decode() for c, v in row.cells.get("h", {}).items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=34_500,
                        help="pages of the first run (34,500: a backlog of a million URLs)")
    parser.add_argument("--resume-pages", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="400 pages: a quick check")
    parser.add_argument("--out", default="results/backlog.json")
    args = parser.parse_args(argv)
    pages = 400 if args.smoke else args.pages
    work = Path(tempfile.mkdtemp(prefix="crawler-backlog-"))
    state = work / "state"
    policy = work / "policy.json"
    policy.write_text(json.dumps({"defaults": {"max_pages_per_host": 10 * pages * LINKS}}))
    with LoggedServers() as servers:
        base = servers.serve(ADDRESS, respond)
        key = base.split("//", 1)[1]
        seed = base + "/p/0"
        started = time.time()
        first_run = crawler_command(state, "crawl", seed, f"--max_pages={pages}",
                                    *_flags(policy))
        code, rss = run_sampled(first_run, work / "first.log", timeout=3600, state=state)
        first = [h for h in servers.hits() if h.method == "GET"]
        cells = _host_cells(state, key)
        # A second job on the same tables, its state empty: the host is woken and rebuilt.
        resumed = time.time()
        from pipeline.local.stack import load_local_stack

        stack = load_local_stack(state)
        assert stack is not None
        with stack.activate():
            second_run = crawler_command(state, "run",
                                         f"--max_pages={pages + args.resume_pages}",
                                         *_flags(policy))
            code2, rss2 = run_sampled(second_run, work / "second.log", timeout=1800,
                                      state=state)
        second = [h for h in servers.hits() if h.method == "GET" and h.start >= resumed]
        subprocess.run(crawler_command(state, "local", "down"), capture_output=True, cwd=REPO)
    fetched = len([h for h in first if h.path != "/robots.txt"])
    rates = deciles(first)
    crawler_cpu = cpu_ms_per_page(first, rss.samples, 2)
    emulator_cpu = cpu_ms_per_page(first, rss.samples, 3)
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "pages": fetched, "links_per_page": LINKS,
        "backlog_at_end": int(cells.get("queued", "0") or 0),
        "exit_codes": [code, code2],
        "wall_s": round(resumed - started, 1),
        "pages_per_s_by_decile": rates,
        "last_to_first_decile": round(rates[-1] / rates[0], 2) if rates and rates[0] else None,
        "crawler_cpu_ms_per_page_by_decile": crawler_cpu,
        "emulators_cpu_ms_per_page_by_decile": emulator_cpu,
        "crawler_cpu_last_to_first_decile": (round(crawler_cpu[-1] / crawler_cpu[0], 2)
                                             if crawler_cpu and crawler_cpu[0] else None),
        "rss_mb": {"first_decile_end": _rss_at(rss.rss, 0.1),
                   "last": rss.rss[-1][1] if rss.rss else None,
                   "peak": max((mb for _, mb in rss.rss), default=None),
                   "samples": rss.rss},
        "state_bytes_per_page": round(int(cells.get("state_bytes", "0") or 0) / max(1, fetched)),
        "resume": {"pages": len(second),
                   "first_request_after_s": round(min(h.start for h in second) - resumed, 1)
                   if second else None,
                   "refetched": len({h.path for h in second} & {h.path for h in first}),
                   "peak_rss_mb": max((mb for _, mb in rss2.rss), default=None)},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"{fetched:,} pages, backlog {result['backlog_at_end']:,} URLs at the end\n"
          f"  pages/s by decile: {rates}\n"
          f"  last decile / first: {result['last_to_first_decile']}\n"
          f"  crawler CPU ms/page by decile: {crawler_cpu}\n"
          f"  emulators' CPU ms/page by decile: {emulator_cpu}\n"
          f"  RSS MB: after the first decile {result['rss_mb']['first_decile_end']}, last "
          f"{result['rss_mb']['last']}, peak {result['rss_mb']['peak']}\n"
          f"  state bytes written per page: {result['state_bytes_per_page']:,}\n"
          f"  resume: first request {result['resume']['first_request_after_s']} s after the "
          f"second job started; {result['resume']['pages']} pages, "
          f"{result['resume']['refetched']} of them fetched before")
    return result


def _rss_at(samples: Sequence[tuple[float, float]], fraction: float) -> float | None:
    if not samples:
        return None
    return samples[min(len(samples) - 1, int(len(samples) * fraction))][1]


if __name__ == "__main__":
    main(sys.argv[1:])
