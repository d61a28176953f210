"""``HostFrontier``: per-host politeness, robots.txt, dedup and queueing, with leases that fetch;
its durable memory is the webtable and the frontier index, its state a bounded cache of them.

One key per host (the politeness key, ``transforms.core.url_keys.politeness_key``, or
``host#shard``). The stateful DoFn owns everything about its key and is the only one that ever
contacts the host, so the politeness invariant needs no coordination:

    at most one request to a host is open at any time, and request starts to a host are at least
    ``delay = max(--min-delay, robots Crawl-delay)`` apart.

Why the fetch runs inside the frontier's lease: a Beam graph is acyclic and the DirectRunner
runs every transform on one thread, so a separate fetch stage would either block that thread
for a whole lease or send "lease done" and robots.txt results back through Pub/Sub. The lease
goes to ``FetchService`` (an asyncio loop in a background thread, many hosts in flight) and
its outcome is collected by the key's own REAL_TIME timer. Reads of the tables (a lease's check
of its URLs' rows, a rebuild, a refill) run on the same service's threads, never on the
runner's.

Timeline of one key (delay d, lease size k = lease_seconds / d):

    t0       URLs arrive, state empty  -> rebuild read submitted, URLs wait   timer t0 + 0.02
    t0+.02   timer: rows, index, robots verdict read back -> phase ready, URLs admitted:
             index entries and ``queued`` rows written at the end of the bundle, before the
             state commits and before the messages are acknowledged
    t0+.02   no robots verdict -> robots lease                               timer + 0.05
    t0+.07   timer: robots rules (saved in the hosts table) -> lease of k URLs from the head,
             which first checks their rows (a URL already terminal is not fetched again);
             the service fetches them d apart and parses each page as it arrives, while the
             next request waits for its turn, and looks the pages' contents up (copies?)
    t0+kd    timer: outcome -> each page's links to this key admitted now (same admission,
             same ``queued`` rows and index entries, written at the end of this bundle) and
             merged into the head; results out with their parsed pages and their links to
             other keys (the loop); recrawl entries in; next lease at last end + d, with the
             links just found in it when they rank first
    ...      head below a quarter -> the next index page is read; the index empty and nothing
             scheduled -> no timer; the key is idle until new URLs arrive

So a level of a site costs one lease turn (a timer firing) instead of a trip through the loop
(publish, pull, decode: a second or more), and a host whose pages link to each other keeps
its own queue full. Links to other keys, and a hot host's links to its sibling shards, still
take the loop, grouped by host; the loop's latency is measured where they arrive (``on_element``
with ``discovered_at``: the ``loop_latency_ms`` distribution and the hosts table's histogram).
What the loop guaranteed still holds: the same-key links are durable (index and rows) before
the bundle that harvested them commits, so before their page's row can say it is done; a
redelivered message or a lease replayed after a restart finds them in the seen filter, rebuilt
from those rows.

State per key (``transforms.frontier.state`` has the cells and their versioned formats) is
bounded: a head of ``--frontier_head_size`` URLs, arrivals and inbox until the next timer, the
seen filter in capped stages, robots.txt at 500 KiB. Per element the DoFn writes the small
``host`` cell, appends arrivals and rewrites at most one seen-filter stage; the head is
rewritten once per timer firing, whatever the host's backlog. The seen filter of a key is
kept parsed in a process-wide cache (checked against a version in the ``host`` cell), so an
element does not read it from state either.

Outputs: fetch results with their extraction (main: ``Discovered``, a parsed page or an
unstored result with the links for other keys; a bare ``FetchResult`` when extraction failed
here), frontier decisions (``outcomes``), host counters (``stats``),
requests for other keys (``discovered``: sitemaps named elsewhere) and ``acks``: the Pub/Sub
acknowledgements whose URLs are now recorded (emitted after the bundle's table writes), and
``batch_events``: (batch id, ``BatchEvent``s) for client batch URLs the frontier decided (refused
at admission, ``fresh``/``cached``), also emitted after the writes that record them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (
    BagStateSpec,
    ReadModifyWriteStateSpec,
    TimerSpec,
    on_timer,
)
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from transforms import METRICS_NAMESPACE
from transforms.core.extraction import Extraction, extract
from transforms.core.records import BatchEvent, FetchResult, FrontierWork, by_batch
from transforms.fetchers.service import leases_paused, shared_fetch_service
from transforms.frontier import drain
from transforms.frontier.cells import FrontierCells
from transforms.frontier.context import Effects, FrontierConfig, IoRequest, fetch_of
from transforms.frontier.copies import CopyCheck, RecentContent
from transforms.frontier.hostcore import HostCore
from transforms.frontier.leases import Lease
from transforms.frontier.state import JOB_REBUILD
from transforms.frontier.store import BundleWork, FrontierStore, StoreSpec

# The contents this process saw last, shared by the DoFn's instances (``transforms.frontier.
# copies``): a lease's pages are looked up here before the dedup table.
_RECENT_CONTENT = RecentContent()

OUTCOMES_TAG = "outcomes"
STATS_TAG = "stats"
DISCOVERED_TAG = "discovered"
ACKS_TAG = "acks"
BATCH_EVENTS_TAG = "batch_events"


def _work(value: Any) -> FrontierWork:
    if isinstance(value, FrontierWork):
        return value
    return FrontierWork(tuple(value))  # a plain tuple of requests (tests, older producers)


class _HostFrontierFn(beam.DoFn):
    """Keyed by frontier key. Input: (key, FrontierWork). Outputs: see the module docstring.

    A thin shell: state cells and timer in, ``HostCore`` decides, effects out.
    Invariant: at most one lease per key is out, and a lease starts no earlier than the previous
    lease's last request end plus the key's delay.
    """

    HOST_STATE = ReadModifyWriteStateSpec("host", BytesCoder())
    ROBOTS_STATE = ReadModifyWriteStateSpec("robots", BytesCoder())
    HEAD_STATE = ReadModifyWriteStateSpec("head", BytesCoder())
    ARRIVALS_STATE = BagStateSpec("arrivals", BytesCoder())
    INBOX_STATE = BagStateSpec("inbox", BytesCoder())
    SEEN_STATE = ReadModifyWriteStateSpec("seen", BytesCoder())
    SEEN_FROZEN_STATE = BagStateSpec("seen_frozen", BytesCoder())
    LEASE_TIMER = TimerSpec("lease", TimeDomain.REAL_TIME)

    def __init__(self, config: FrontierConfig, store: StoreSpec) -> None:
        self._config = config
        self._store_spec = store

    def setup(self) -> None:
        # The fetch service is the worker process's (one asyncio loop for every instance, so a
        # lease one instance starts can be collected by another): never closed by a DoFn.
        self._service = shared_fetch_service(self._config.fetch)
        self._store: FrontierStore = self._store_spec.open()
        self._copies = CopyCheck(self._store, self._config.dedup_table, _RECENT_CONTENT)
        self._metrics: dict[str, Any] = {}
        self._lease_size = Metrics.distribution(METRICS_NAMESPACE, "lease_size")
        self._state_bytes = Metrics.distribution(METRICS_NAMESPACE, "state_bytes_per_step")
        self._leases_not_started = Metrics.counter(METRICS_NAMESPACE, "leases_not_started")
        self._loop_latency = Metrics.distribution(METRICS_NAMESPACE, "loop_latency_ms")

    def teardown(self) -> None:
        self._store.close()

    def start_bundle(self) -> None:
        self._bundle = BundleWork()
        self._batch_events: list[BatchEvent] = []

    def finish_bundle(self) -> Iterator[Any]:
        """Writes the bundle's decisions, then starts its leases and the reads of the tables
        its keys asked for (``BundleWork`` says why in this order), then releases the
        acknowledgements that waited for the writes (the runner commits the state after this
        returns)."""
        tokens = self._bundle.flush(self._store.write, self._start_lease, self._service.run)
        now = Timestamp.now()
        for token in tokens:
            yield beam.pvalue.TaggedOutput(ACKS_TAG,
                                           WindowedValue(token, now, (GlobalWindow(),)))
        events, self._batch_events = self._batch_events, []
        for item in by_batch(events):  # their cells are written: TrackBatches may count them
            yield beam.pvalue.TaggedOutput(BATCH_EVENTS_TAG, WindowedValue(
                item, now, (GlobalWindow(),)))

    # -- the two entry points ----------------------------------------------------------------

    def process(self, element: tuple[str, Any],
                host_state=beam.DoFn.StateParam(HOST_STATE),
                robots_state=beam.DoFn.StateParam(ROBOTS_STATE),
                head_state=beam.DoFn.StateParam(HEAD_STATE),
                arrivals_state=beam.DoFn.StateParam(ARRIVALS_STATE),
                inbox_state=beam.DoFn.StateParam(INBOX_STATE),
                seen_state=beam.DoFn.StateParam(SEEN_STATE),
                seen_frozen_state=beam.DoFn.StateParam(SEEN_FROZEN_STATE),
                timer=beam.DoFn.TimerParam(LEASE_TIMER)) -> Iterator[Any]:
        key, value = element
        work = _work(value)
        now = time.time()
        cells = FrontierCells(host_state, robots_state, head_state, arrivals_state, inbox_state,
                              seen_state, seen_frozen_state)
        core = cells.core(self._config, key)
        if work.discovered_at is not None and work.requests:
            self._loop_latency.update(int(1000 * max(0.0, now - work.discovered_at)))
        effects = core.on_element(work.requests, work.tokens, now, work.rules,
                                  work.discovered_at)
        yield from self._carry_out(key, core, effects, cells, timer, now)

    @on_timer(LEASE_TIMER)
    def on_lease_timer(self, key=beam.DoFn.KeyParam,
                       host_state=beam.DoFn.StateParam(HOST_STATE),
                       robots_state=beam.DoFn.StateParam(ROBOTS_STATE),
                       head_state=beam.DoFn.StateParam(HEAD_STATE),
                       arrivals_state=beam.DoFn.StateParam(ARRIVALS_STATE),
                       inbox_state=beam.DoFn.StateParam(INBOX_STATE),
                       seen_state=beam.DoFn.StateParam(SEEN_STATE),
                       seen_frozen_state=beam.DoFn.StateParam(SEEN_FROZEN_STATE),
                       timer=beam.DoFn.TimerParam(LEASE_TIMER)) -> Iterator[Any]:
        now = time.time()
        cells = FrontierCells(host_state, robots_state, head_state, arrivals_state, inbox_state,
                              seen_state, seen_frozen_state)
        core = cells.core(self._config, key)
        if core.new_state:  # a timer of a key whose state was dropped: nothing to collect
            return
        # No new lease while the process is stopping, or while the pages fetched already wait
        # in the runner (``transforms.frontier.drain``: the local runner's backpressure).
        allowed = not leases_paused() and not drain.backlogged(self._service.fetched_held)
        effects = core.on_timer(self._service.poll, now, allowed)
        yield from self._carry_out(key, core, effects, cells, timer, now)

    # -- the shell ---------------------------------------------------------------------------

    def _carry_out(self, key: str, core: HostCore, fx: Effects, cells: FrontierCells, timer,
                   now: float) -> Iterator[Any]:
        hs = core.state
        for lease in fx.leases:  # started once this bundle's writes are in (finish_bundle)
            self._bundle.leases.append(lease)
            self._lease_size.update(len(lease.requests))
        if fx.io is not None:  # started once this bundle's writes are in (finish_bundle)
            self._bundle.reads.append((fx.io.job_id, self._reader(key, fx.io)))
        if fx.wakes and hs.timer_at is not None:
            timer.set(Timestamp(hs.timer_at))
        self._state_bytes.update(cells.write(key, core, fx))
        self._bundle.writes.extend(fx.writes)
        self._bundle.tokens.extend(fx.tokens)
        self._batch_events.extend(fx.batch_events)
        self._flush_metrics(core.ctx.counters)
        drain.note_emitted(sum(1 for r in fx.results if fetch_of(r).index_key))
        yield from fx.results
        for outcome in fx.outcomes:
            yield beam.pvalue.TaggedOutput(OUTCOMES_TAG, outcome)
        for request in fx.discovered:
            yield beam.pvalue.TaggedOutput(DISCOVERED_TAG, request)
        if fx.changed:
            yield beam.pvalue.TaggedOutput(STATS_TAG, core.stats(now))

    def _start_lease(self, lease: Lease) -> None:
        if leases_paused():  # the local run is stopping: its URLs stay queued for the next
            self._leases_not_started.inc()
            return
        self._service.submit(lease, verify=self._store.url_records, extract=self._extract,
                             copies=self._copies)

    def _extract(self, result: FetchResult) -> Extraction:
        cfg = self._config
        return extract(result, cfg.robots_agent, cfg.fetch.max_body_bytes, cfg.scope)

    def _reader(self, key: str, io: IoRequest) -> Callable[[], Any]:
        """The blocking read an ``IoRequest`` asks for, to run on the service's threads."""
        store, cfg = self._store, self._config
        if io.kind == JOB_REBUILD:
            return lambda: store.rebuild_page(key, io.after, cfg.rebuild_page, io.first,
                                              cfg.head_size, time.time())
        scan_limit = cfg.refill_size + cfg.head_size + cfg.max_lease_urls
        incarnation, after = io.incarnation, io.after
        return lambda: store.index_page(key, cfg.refill_size, io.skip, time.time(), scan_limit,
                                        incarnation, after)

    def _flush_metrics(self, counters: Counter[str]) -> None:
        for name, n in counters.items():
            if name not in self._metrics:
                self._metrics[name] = Metrics.counter(METRICS_NAMESPACE, name)
            self._metrics[name].inc(n)


class FrontierOutputs(NamedTuple):
    fetched: beam.PCollection  # Discovered (or FetchResult): every fetch, extracted
    outcomes: beam.PCollection  # UrlOutcome (queued, robots_blocked, filtered, errors, ...)
    stats: beam.PCollection  # HostStats
    discovered: beam.PCollection  # CrawlRequest for other keys (sitemaps named in robots.txt)
    acks: beam.PCollection  # AckToken: messages whose URLs are recorded
    batch_events: beam.PCollection  # (batch id, (BatchEvent, ...)): batch URLs decided here


class HostFrontier(beam.PTransform):
    """Schedules and fetches each key's URLs politely. Input: (key, FrontierWork) (or a tuple
    of requests). ``store`` says where the webtable, the index and the hosts table are."""

    def __init__(self, config: FrontierConfig, store: StoreSpec) -> None:
        super().__init__()
        self._config = config
        self._store = store

    def expand(self, keyed_requests: beam.PCollection) -> FrontierOutputs:
        outputs = keyed_requests | "ScheduleAndFetch" >> beam.ParDo(
            _HostFrontierFn(self._config, self._store)).with_outputs(
                OUTCOMES_TAG, STATS_TAG, DISCOVERED_TAG, ACKS_TAG, BATCH_EVENTS_TAG,
                main="fetched")
        return FrontierOutputs(outputs.fetched, outputs[OUTCOMES_TAG], outputs[STATS_TAG],
                               outputs[DISCOVERED_TAG], outputs[ACKS_TAG],
                               outputs[BATCH_EVENTS_TAG])


__all__ = ["FrontierOutputs", "FrontierWork", "HostFrontier"]

