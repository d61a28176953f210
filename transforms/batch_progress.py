"""``TrackBatches``: counts each client batch's URL outcomes and announces its milestones and its
end, on any runner.

Input: (batch id, the ``BatchEvent``s of one write) from the steps that write a batch URL's
terminal status (the frontier, the webtable sink, the intake for invalid URLs), each emitted
after its cells are durable, and (batch id, ``BatchWake``) from ``WakeRunningBatches`` at the
start of a job.

State per batch id (``ProgressMeta``, a few hundred bytes): the spec, the counts, the
transitions announced and the webhook attempts. The set of URLs counted (``BatchTally``, 8
bytes per URL) is kept in a process-wide cache, checked against the count in state; when it is
missing or stale (a new worker, a restart, a moved key) it is rebuilt from the batch's row, whose
``u:<url>`` cells are the truth. So an event costs one set lookup and one small state write, a
redelivered event is counted once, and a row read happens once per batch per worker.

An announcement (``transforms.core.batches.transitions_due``: ``25%``, ``50%``, ``75%``,
``done``):

1. for ``done``: the per-URL results file (JSONL) and the record's ``m:state=done``;
2. the notification on the notifications topic (``n:sent:<transition>`` written after it);
3. if the batch named a webhook: a signed POST; a failure is tried again with back-off by the
   key's timer, at most ``MAX_NOTIFY_ATTEMPTS`` times, and every attempt is written to
   ``n:hook:<transition>``.

A crash between 2 and its cell makes a redelivery with the same ``idempotency_key``, which the
receiver drops: exactly once as the client sees it. Events lost in a crash after their cells were
written are not lost to the count: while a batch runs, its timer re-reads the row every
``reconcile_seconds`` without events, and a new job wakes every running batch.
"""

from __future__ import annotations

import json
import logging
import pickle
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp
from google.cloud import storage

from transforms import METRICS_NAMESPACE
from transforms.core.batches import (
    MAX_NOTIFY_ATTEMPTS,
    STATE_DONE,
    STATE_RUNNING,
    TRANSITION_DONE,
    BatchSpec,
    BatchTally,
    notification_body,
    retry_delay,
    transitions_due,
)
from transforms.core.records import BatchEvent, BatchWake
from transforms.fetchers.webhook import attempt_to_json, post_webhook
from transforms.formats.batch_rows import (
    BatchRecord,
    hook_row,
    notified_row,
    read_record,
    state_row,
)
from transforms.frontier.store import StoreSpec
from transforms.stores.pubsub import shared_publisher
from transforms.stores.results_file import results_link, write_results

_LOG = logging.getLogger(__name__)
_CACHE_SIZE = 256


@dataclass(frozen=True)
class ProgressConfig:
    """Where the batches are and how they are announced.

    Attributes:
        table: the batches table.
        notifications_topic: ``projects/P/topics/T``; "" publishes nothing.
        results_prefix: where results files go (``gs://bucket/prefix/batches/``); "" none.
        secrets: each client's webhook signing secret (``transforms.core.clients``).
        allow_private_networks: webhooks may target private addresses (tests, demos).
        reconcile_seconds: a running batch without events re-reads its row this often.
    """

    table: str
    notifications_topic: str = ""
    results_prefix: str = ""
    secrets: tuple[tuple[str, str], ...] = ()
    allow_private_networks: bool = False
    reconcile_seconds: float = 30.0


@dataclass
class HookState:
    body: str
    attempts: list[dict[str, object]] = field(default_factory=list)
    next_at: float | None = None
    ok: bool = False


@dataclass
class ProgressMeta:
    spec: BatchSpec
    total: int
    finished: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    first_at: float | None = None
    last_at: float | None = None
    state: str = STATE_RUNNING
    sent: list[str] = field(default_factory=list)
    hooks: dict[str, HookState] = field(default_factory=dict)
    last_event_at: float = 0.0


_TALLIES: OrderedDict[str, BatchTally] = OrderedDict()
_COUNTED = [0]  # outcomes counted in this process: the local driver's sign of progress


def note_counted(n: int) -> None:
    with _TALLIES_LOCK:
        _COUNTED[0] += n


def outcomes_counted() -> int:
    """Batch outcomes this process has counted (the local driver treats a change as
    progress: the sinks can still be writing outcomes after the last fetch)."""
    with _TALLIES_LOCK:
        return _COUNTED[0]
_TALLIES_LOCK = threading.Lock()


def _cached_tally(batch_id: str, finished: int) -> BatchTally | None:
    with _TALLIES_LOCK:
        tally = _TALLIES.get(batch_id)
        if tally is None or tally.finished != finished:
            return None
        _TALLIES.move_to_end(batch_id)
        return tally


def _cache_tally(batch_id: str, tally: BatchTally) -> None:
    with _TALLIES_LOCK:
        _TALLIES[batch_id] = tally
        _TALLIES.move_to_end(batch_id)
        while len(_TALLIES) > _CACHE_SIZE:
            _TALLIES.popitem(last=False)


class _TrackFn(beam.DoFn):
    META = ReadModifyWriteStateSpec("meta", BytesCoder())
    TIMER = TimerSpec("batch", TimeDomain.REAL_TIME)

    def __init__(self, config: ProgressConfig, store: StoreSpec) -> None:
        self._config, self._spec = config, store

    def setup(self) -> None:
        self._store = self._spec.open()
        self._secrets = dict(self._config.secrets)
        self._publisher = (shared_publisher(self._config.notifications_topic)
                           if self._config.notifications_topic else None)
        self._counted = Metrics.counter(METRICS_NAMESPACE, "batch_outcomes_counted")
        self._repeats = Metrics.counter(METRICS_NAMESPACE, "batch_outcomes_repeated")
        self._notified = Metrics.counter(METRICS_NAMESPACE, "batch_notifications")
        self._hook_failures = Metrics.counter(METRICS_NAMESPACE, "webhook_failures")
        self._done = Metrics.counter(METRICS_NAMESPACE, "batches_done")

    def teardown(self) -> None:
        self._store.close()  # the publisher is the process's: it is not closed here

    def process(self, element: tuple[str, Any], meta_state=beam.DoFn.StateParam(META),
                timer=beam.DoFn.TimerParam(TIMER)) -> Iterator[Any]:
        batch_id, item = element
        now = time.time()
        meta, tally = self._load(batch_id, meta_state, fresh=isinstance(item, BatchWake))
        if meta is None or tally is None:
            _LOG.warning("batch event without a batch record", extra={"batch": batch_id})
            return
        if not isinstance(item, BatchWake):
            events = (item,) if isinstance(item, BatchEvent) else tuple(item)
            counted = sum(1 for e in events if tally.add(e.url, e.outcome, e.at))
            self._counted.inc(counted)
            self._repeats.inc(len(events) - counted)
            note_counted(counted)
            meta.last_event_at = now
        self._settle(batch_id, meta, tally, now)
        self._save(batch_id, meta, tally, meta_state, timer, now)
        yield from ()

    @on_timer(TIMER)
    def on_batch_timer(self, key=beam.DoFn.KeyParam, meta_state=beam.DoFn.StateParam(META),
                       timer=beam.DoFn.TimerParam(TIMER)) -> Iterator[Any]:
        now = time.time()
        stale = True
        raw = meta_state.read()
        if raw is not None:
            meta = pickle.loads(raw)
            stale = (meta.state == STATE_RUNNING
                     and now - meta.last_event_at >= self._config.reconcile_seconds)
        meta, tally = self._load(key, meta_state, fresh=stale)
        if meta is None or tally is None:
            return
        self._settle(key, meta, tally, now)
        self._save(key, meta, tally, meta_state, timer, now)
        yield from ()

    # -- state ----------------------------------------------------------------------------

    def _load(self, batch_id: str, meta_state: Any, fresh: bool
              ) -> tuple[ProgressMeta | None, BatchTally | None]:
        raw = meta_state.read()
        meta: ProgressMeta | None = pickle.loads(raw) if raw is not None else None
        tally = None if fresh or meta is None else _cached_tally(batch_id, meta.finished)
        if tally is not None:
            return meta, tally
        record = read_record(batch_id, self._store.read_row(self._config.table, batch_id))
        if record is None:
            return meta, None
        tally = record.tally()
        if meta is None:
            meta = _meta_from_record(record)
        _cache_tally(batch_id, tally)
        return meta, tally

    def _save(self, batch_id: str, meta: ProgressMeta, tally: BatchTally, meta_state: Any,
              timer: Any, now: float) -> None:
        meta.finished, meta.outcomes = tally.finished, dict(tally.outcomes)
        meta.first_at, meta.last_at = tally.first_at, tally.last_at
        _cache_tally(batch_id, tally)
        meta_state.write(pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL))
        due = [h.next_at for h in meta.hooks.values() if h.next_at is not None]
        if meta.state == STATE_RUNNING:
            due.append(now + self._config.reconcile_seconds)
        if due:
            timer.set(Timestamp(min(due)))

    # -- announcements --------------------------------------------------------------------

    def _settle(self, batch_id: str, meta: ProgressMeta, tally: BatchTally, now: float) -> None:
        for transition in transitions_due(tally, meta.spec.milestone_step, meta.sent):
            self._announce(batch_id, meta, tally, transition, now)
        for transition, hook in meta.hooks.items():
            if hook.next_at is not None and hook.next_at <= now:
                self._call_hook(batch_id, meta, transition, hook, now)

    def _announce(self, batch_id: str, meta: ProgressMeta, tally: BatchTally, transition: str,
                  now: float) -> None:
        results: dict[str, str] = {}
        if transition == TRANSITION_DONE:
            results = self._finish(batch_id, tally, now)
            meta.state = STATE_DONE
            self._done.inc()
        body = json.dumps(notification_body(meta.spec, tally, transition, now, results),
                          separators=(",", ":"))
        if self._publisher is not None:
            self._publisher([(body.encode(), {"kind": "batch", "batch": batch_id,
                                              "transition": transition})])
        self._store.write_rows(self._config.table, [notified_row(batch_id, transition, now)])
        meta.sent.append(transition)
        self._notified.inc()
        _LOG.info("batch transition", extra={"batch": batch_id, "transition": transition,
                                             "percent": tally.percent()})
        if meta.spec.notify:
            hook = meta.hooks[transition] = HookState(body)
            self._call_hook(batch_id, meta, transition, hook, now)

    def _finish(self, batch_id: str, tally: BatchTally, now: float) -> dict[str, str]:
        """Writes the results file from the row's cells, then marks the record done."""
        link: dict[str, str] = {}
        if self._config.results_prefix:
            record = read_record(batch_id, self._store.read_row(self._config.table, batch_id))
            path = f"{self._config.results_prefix.rstrip('/')}/{batch_id}.jsonl"
            gcs = storage.Client() if path.startswith("gs://") else None  # one for both calls
            write_results(path, record.urls if record is not None else {}, client=gcs)
            link = {str(k): str(v) for k, v in results_link(path, client=gcs).items()}
        self._store.write_rows(self._config.table,
                               [state_row(batch_id, STATE_DONE, now, tally.outcomes, link)])
        return link

    def _call_hook(self, batch_id: str, meta: ProgressMeta, transition: str, hook: HookState,
                   now: float) -> None:
        assert meta.spec.notify is not None
        attempt = post_webhook(meta.spec.notify, hook.body.encode(),
                               secret=self._secrets.get(meta.spec.client, ""),
                               idempotency_key=f"{batch_id}:{transition}",
                               allow_private_networks=self._config.allow_private_networks)
        hook.attempts.append(attempt_to_json(attempt))
        hook.ok = attempt.ok
        if attempt.ok or len(hook.attempts) >= MAX_NOTIFY_ATTEMPTS:
            hook.next_at = None
        else:
            self._hook_failures.inc()
            hook.next_at = now + retry_delay(len(hook.attempts))
        self._store.write_rows(self._config.table,
                               [hook_row(batch_id, transition, hook.attempts, hook.ok, now)])


def _meta_from_record(record: BatchRecord) -> ProgressMeta:
    hooks = {t: HookState(body="", attempts=list(h.get("attempts", [])),  # type: ignore[call-overload]
                          ok=bool(h.get("ok")))
             for t, h in record.hooks.items()}
    return ProgressMeta(record.spec, record.total, state=record.state,
                        sent=sorted(record.notified), hooks=hooks)


class TrackBatches(beam.PTransform):
    """(batch id, BatchEvent | (BatchEvent, ...) | BatchWake) -> nothing: the batches table
    and the notifications are the output (see the module docstring)."""

    def __init__(self, config: ProgressConfig, store: StoreSpec) -> None:
        super().__init__()
        self._config, self._store = config, store

    def expand(self, events: beam.PCollection) -> beam.PCollection:
        return events | "CountAndAnnounce" >> beam.ParDo(_TrackFn(self._config, self._store))


def secrets_of(clients: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The (client, secret) pairs of a clients map, for ``ProgressConfig.secrets``."""
    return tuple(sorted((name, getattr(c, "secret", "")) for name, c in clients.items()))


__all__ = ["BatchWake", "ProgressConfig", "TrackBatches"]
