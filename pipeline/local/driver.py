"""Runs the streaming pipeline locally (DirectRunner, or FlinkRunner on a local Flink) with
progress and stopping conditions.

The DirectRunner cannot stop a streaming job by itself, and metrics queried from a running
streaming job come back empty (after ``cancel`` they hold only the first bundles' counts). So
progress is read where an operator would read it in production: the hosts table, which the
frontier updates as each key's work changes (pages, errors, bytes, pending URLs per key). The
job stops when ``--max_pages`` is reached (after the last WARC files are written) or when the
crawl has been quiescent for ``--idle_timeout`` seconds: the same signal ``crawler status``
shows (``pipeline.ops.status``: nothing queued, nothing in flight, no key rebuilding, no
recrawl due within the idle timeout).

On the DirectRunner the Pub/Sub read is the at-least-once, non-blocking one of
``pipeline.local.pubsub_read``: a message is acknowledged only once its URLs are recorded, so a run
killed at any point loses nothing, and no heartbeat is needed to keep timers running.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

import apache_beam as beam
from google.cloud import bigtable
from google.cloud.bigtable import row_filters

from pipeline.graph import build_pipeline
from pipeline.local import pubsub_read as local_pubsub
from pipeline.local import runner_queues
from pipeline.local import tuning as local_tuning
from pipeline.ops.status import host_busy, running_batches
from pipeline.options import CrawlerOptions
from pipeline.settings import CrawlSettings
from transforms.batch_progress import outcomes_counted
from transforms.core import latency
from transforms.core.records import HostStats
from transforms.exports import unwritten_rows
from transforms.fetchers import service as fetch_service
from transforms.formats.schema import HOST_FAMILY, PENDING_COLUMN
from transforms.frontier import drain

_LOG = logging.getLogger(__name__)
RATE_WINDOW = 10.0
FREEZE_AFTER_SECONDS = 5.0  # pipeline.local.tuning.freeze_started_job
STARTUP_SECONDS = 120.0  # a job that has not crawled anything by then is stuck
_COUNTERS = ("fetched", "errors", "bytes", "robots_blocked", "dedup_dropped", "filtered",
             "budget_exceeded", "accepted", "queued", "out_of_scope")


@dataclass
class HostRow:
    host: str
    values: dict[str, str]

    def number(self, name: str) -> float:
        try:
            return float(self.values.get(name, "0"))
        except ValueError:
            return 0.0


@dataclass
class Totals:
    """Sums over the hosts table; ``busy_hosts`` counts the keys that are not quiescent."""

    counters: dict[str, int] = field(default_factory=dict)
    hosts: int = 0
    active_hosts: int = 0
    leases: int = 0
    busy_hosts: int = 0

    def __getitem__(self, name: str) -> int:
        return self.counters.get(name, 0)

    def snapshot(self) -> tuple[int, ...]:
        return (*[self[c] for c in _COUNTERS], self.hosts, self.leases, self.busy_hosts)

    @property
    def idle(self) -> bool:
        """The crawl is quiescent (``pipeline.ops.status.host_busy`` for every key)."""
        return self.busy_hosts == 0


# The hosts-table columns progress needs (not the saved robots.txt text, up to 500 KiB a key).
_HOST_COLUMNS = "^(" + "|".join([f.name for f in dataclasses.fields(HostStats)]
                                + [PENDING_COLUMN]) + ")$"


def read_hosts(project: str, instance: str, table: str) -> list[HostRow]:
    """All rows of the hosts table, decoded (their counters and state, newest cells)."""
    client = bigtable.Client(project=project, admin=False)
    rows = client.instance(instance).table(table).read_rows(filter_=row_filters.RowFilterChain([
        row_filters.ColumnQualifierRegexFilter(_HOST_COLUMNS.encode()),
        row_filters.CellsColumnLimitFilter(1)]))
    out = []
    for row in rows:
        cells = row.cells.get(HOST_FAMILY, {})
        values = {k.decode(): v[0].value.decode("utf-8", "replace") for k, v in cells.items()}
        out.append(HostRow(row.row_key.decode(), values))
    return out


def _no_running_batches(project: str, instance: str, table: str) -> bool:
    """No client batch is ``running`` (the pipeline marks a batch done on any runner; an
    unreadable table counts as none, as before batches existed)."""
    try:
        return running_batches(bigtable.Client(project=project, admin=False).instance(instance),
                               table) == 0
    except Exception as exc:
        _LOG.warning("could not read the batches table: %s", exc)
        return True


def totals_of(hosts: list[HostRow], now: float | None = None, horizon: float = 0.0) -> Totals:
    """Sums the hosts rows; keys busy at ``now`` (default: the current time) with recrawls due
    within ``horizon`` seconds are counted in ``busy_hosts``."""
    now = time.time() if now is None else now
    t = Totals()
    for h in hosts:
        for name in _COUNTERS:
            t.counters[name] = t.counters.get(name, 0) + int(h.number(name))
        t.hosts += 1
        active = h.values.get("lease_active") == "1"
        t.leases += int(active)
        t.active_hosts += int(active or h.number("queued") > 0)
        t.busy_hosts += int(host_busy(h.values, now, horizon))
    return t


def format_progress(t: Totals, rate: float, elapsed: float) -> str:
    return (f"[{elapsed:6.1f}s] pages {t['fetched']:>6}  {rate:6.1f} pages/s  "
            f"hosts active {t.active_hosts:>3}/{t.hosts:<3}  queued {t['queued']:>6}  "
            f"errors {t['errors']:>4}  robots-blocked {t['robots_blocked']:>4}")


def loop_latency(hosts: list[HostRow]) -> dict[str, int]:
    """The loop-latency histogram of the whole crawl (``transforms.core.latency``), summed over
    the hosts' rows."""
    return latency.merge(latency.parse_histogram(h.values.get("loop_latency", ""))
                         for h in hosts)


def format_latency(histogram: dict[str, int]) -> str:
    """``p50 20 ms, p90 200 ms, p99 1000 ms (123 links)``, or ``-`` without links."""
    links = sum(histogram.values())
    if not links:
        return "- (no link came through the loop)"
    parts = []
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        value = latency.percentile(histogram, q)
        shown = f">{latency.BUCKETS_MS[-1]}" if value == float("inf") else f"{value:.0f}"
        parts.append(f"{name} {shown} ms")
    return f"{', '.join(parts)} ({links} links; upper bucket edges)"


def format_summary(hosts: list[HostRow], t: Totals, elapsed: float, reason: str,
                   limit: int = 20, active: float | None = None, scope: str = "any") -> str:
    """The final table: totals, then the busiest hosts.

    ``active`` is the time until the last change (the crawl without the idle wait); pages/s is
    computed over it when given. ``scope`` is the crawl's ``--scope``.
    """
    busy = active if active else elapsed
    rate = t["fetched"] / busy if busy > 0 else 0.0
    lines = [f"Crawl stopped: {reason}", "",
             f"  pages fetched     {t['fetched']}", f"  pages/s           {rate:.2f}",
             f"  bytes             {t['bytes']}", f"  errors            {t['errors']}",
             f"  robots-blocked    {t['robots_blocked']}",
             f"  dedup-dropped     {t['dedup_dropped']}",
             f"  filtered (policy) {t['filtered']}",
             f"  over budget       {t['budget_exceeded']}", f"  still queued      {t['queued']}",
             f"  scope             {scope} ({t['out_of_scope']} links out of scope)",
             f"  loop latency      {format_latency(loop_latency(hosts))}",
             f"  hosts             {t.hosts}", f"  wall time         {elapsed:.1f} s"]
    if active:
        lines.append(f"  crawling time     {active:.1f} s (until the last change)")
    lines.append("")
    header = (f"  {'host':<32} {'pages':>6} {'errors':>6} {'blocked':>7} {'queued':>6} "
              f"{'delay':>5}  {'robots':<12} {'rules':>5} {'crawl-delay':>11}")
    lines.append(header)
    lines.append("  " + "-" * (len(header) - 2))
    for h in sorted(hosts, key=lambda h: -h.number("fetched"))[:limit]:
        lines.append(f"  {h.host:<32} {int(h.number('fetched')):>6} "
                     f"{int(h.number('errors')):>6} {int(h.number('robots_blocked')):>7} "
                     f"{int(h.number('queued')):>6} {h.number('delay'):>5.2f}  "
                     f"{h.values.get('robots_status', ''):<12} {robots_rules_cell(h):>5} "
                     f"{crawl_delay_cell(h):>11}")
    if len(hosts) > limit:
        lines.append(f"  ... and {len(hosts) - limit} more hosts")
    return "\n".join(lines)


def robots_rules_cell(h: HostRow) -> str:
    """The number of robots.txt rules the host parsed, or ``-`` when it parsed no robots.txt."""
    if h.values.get("robots_status") != "parsed":
        return "-"
    return str(int(h.number("robots_rules")))


def crawl_delay_cell(h: HostRow) -> str:
    """The Crawl-delay the host's robots.txt asks of us, in seconds, or ``-`` for none."""
    value = h.values.get("crawl_delay", "")
    try:
        return f"{float(value):.2f}" if value else "-"
    except ValueError:
        return "-"


@dataclass
class RunSummary:
    reason: str
    elapsed: float
    totals: Totals
    hosts: list[HostRow]
    failed: BaseException | None = None
    active: float = 0.0  # seconds until the last change: the crawl without the idle wait


LOCAL_BACKLOG_RESULTS = 2_500  # fetched pages in the local process, at most (about): ~10 s of crawl


def run_local(options: CrawlerOptions, settings: CrawlSettings, out: TextIO = sys.stdout,
              poll_seconds: float = 1.0) -> RunSummary:
    """Runs the crawl locally (DirectRunner, or FlinkRunner on a local Flink) until a
    stopping condition; prints progress. ``settings`` are the options' (validated)."""
    local_tuning.install()
    local_tuning.tune_gc()
    fetch_service.resume_leases()  # a run stopped earlier in this process paused them
    drain.reset()
    # Backpressure: the frontier's results and the row sink run in this process on the local
    # runners, so pages waiting in the runner are bounded by count (transforms.frontier.drain).
    drain.set_backlog_limit(LOCAL_BACKLOG_RESULTS)
    runner_queues.skip_empty_bundles(True)
    if options.uses_native_pubsub():
        local_pubsub.install()
    p = beam.Pipeline(options=options)
    build_pipeline(p, options, settings=settings)
    try:
        return _drive(p.run(), settings, out, poll_seconds)
    finally:
        drain.set_backlog_limit(0)  # a pipeline run later in this process sets its own
        runner_queues.skip_empty_bundles(False)


def _drain(timeout: float = 120.0, settle: float = 1.0, stuck: float = 20.0) -> bool:
    """Stops new leases, then waits until no lease is out or uncollected and every result the
    frontier emitted has its row (``transforms.frontier.drain``), steadily for ``settle`` seconds,
    so the tables hold everything fetched and a later job fetches none of it again. Returns False if
    ``timeout`` passed first, or if nothing moved for ``stuck`` seconds with no lease out (Prism
    can leave a few results pending downstream until new input arrives, which a stopping run
    never sends; their URLs stay ``queued`` in the webtable and the next run fetches them)."""
    fetch_service.pause_leases()
    limit = time.monotonic() + timeout
    steady_since = None
    last: tuple[int, int, int] | None = None
    moved_at = time.monotonic()
    while time.monotonic() < limit:
        leases, unsettled, unwritten = (fetch_service.leases_outstanding(), drain.unsettled(),
                                        unwritten_rows())
        idle = leases == 0 and unsettled <= 0 and unwritten == 0
        now = time.monotonic()
        if (leases, unsettled, unwritten) != last:
            last, moved_at = (leases, unsettled, unwritten), now
        if not idle:
            steady_since = None
            if leases == 0 and now - moved_at >= stuck:
                break
        elif steady_since is None:
            steady_since = now
        elif now - steady_since >= settle:
            return True
        time.sleep(0.1)
    _LOG.warning("stopping with %d leases out and %d results without a row",
                 fetch_service.leases_outstanding(), drain.unsettled())
    return False


def _drive(result, settings: CrawlSettings, out: TextIO, poll_seconds: float) -> RunSummary:
    """Shows progress until a stopping condition, then cancels the job and prints the summary."""
    project, instance = settings.project, settings.bigtable_instance
    failure: list[BaseException] = []
    stopping = threading.Event()  # set before cancel: what the job raises after is expected

    def wait() -> None:
        try:
            result.wait_until_finish()
        except BaseException as exc:
            if not stopping.is_set():
                failure.append(exc)

    waiter = threading.Thread(target=wait, name="pipeline-wait", daemon=True)
    waiter.start()
    started = time.time()
    tty = out.isatty()
    last_snapshot: tuple[tuple[int, ...], int, int, int] | None = None
    last_change = started
    last_print = 0.0
    # pages/s over the last RATE_WINDOW seconds: hosts report per lease, so an instantaneous
    # rate would jump between 0 and bursts.
    recent: collections.deque[tuple[float, int]] = collections.deque([(started, 0)])
    reason = "stopped"
    hosts: list[HostRow] = []
    totals = Totals()
    job_frozen = False
    while True:
        time.sleep(poll_seconds)
        now = time.time()
        if not job_frozen and now - started >= FREEZE_AFTER_SECONDS:
            local_tuning.freeze_started_job()
            job_frozen = True
        if failure or not waiter.is_alive():
            reason = f"pipeline failed: {failure[0]!r}" if failure else "pipeline finished"
            break
        try:
            hosts = read_hosts(project, instance, settings.hosts_table)
        except Exception as exc:
            _LOG.warning("could not read the hosts table: %s", exc)
            continue
        totals = totals_of(hosts, now, settings.idle_timeout)
        recent.append((now, totals["fetched"]))
        while len(recent) > 2 and now - recent[1][0] >= RATE_WINDOW:
            recent.popleft()
        rate = (totals["fetched"] - recent[0][1]) / max(1e-9, now - recent[0][0])
        if tty or now - last_print >= 5:
            line = format_progress(totals, rate, now - started)
            out.write(("\r" + line) if tty else (line + "\n"))
            out.flush()
            last_print = now
        # Rows still to write and batch outcomes still to count are progress too: after the
        # last fetch the sinks and the batch tracker may still be catching up.
        snapshot = (totals.snapshot(), drain.unsettled(), outcomes_counted(), unwritten_rows())
        if snapshot != last_snapshot:
            last_snapshot, last_change = snapshot, now
        if settings.max_pages and totals["fetched"] >= settings.max_pages:
            reason = f"reached --max_pages {settings.max_pages}"
            # Nothing moving for two roll periods (the WARC and export files are written on
            # their timers) means what is left will not come.
            _drain(stuck=10 + 2 * max(settings.warc_roll_seconds, settings.export_roll_seconds))
            break
        if (totals.hosts and totals.idle and now - last_change >= settings.idle_timeout
                and unwritten_rows() == 0  # the export files are written
                and _no_running_batches(project, instance, settings.batches_table)):
            reason = (f"idle for {settings.idle_timeout:.0f} s (quiescent: nothing queued, nothing "
                      "in flight)")
            break
        if not totals.hosts and now - started >= max(STARTUP_SECONDS, 10 * settings.idle_timeout):
            reason = f"stalled: no host reported anything in {now - started:.0f} s"
            break
        if totals.hosts and now - last_change >= 10 * settings.idle_timeout:
            reason = f"stalled: no progress for {now - last_change:.0f} s with URLs queued"
            break
    if tty:
        out.write("\n")
    elapsed = time.time() - started
    if waiter.is_alive():
        stopping.set()
        # A cancelled portable job tears down its data channels under the in-process SDK
        # worker, which logs each as an error; they are the expected end of the run.
        logging.getLogger("apache_beam.runners.worker").setLevel(logging.CRITICAL)
        result.cancel()
    try:
        hosts = read_hosts(project, instance, settings.hosts_table)
        totals = totals_of(hosts)
    except Exception as exc:
        _LOG.warning("could not read the hosts table for the summary: %s", exc)
    summary = RunSummary(reason, elapsed, totals, hosts, failure[0] if failure else None,
                         max(0.0, last_change - started))
    out.write(format_summary(hosts, totals, elapsed, reason,
                             active=summary.active, scope=settings.scope) + "\n")
    out.flush()
    return summary
