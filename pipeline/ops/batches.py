"""Client batches from the outside: submitting one, and reading where it stands.

``crawler submit`` / ``crawler batch`` (``pipeline.cli.batches``) and the HTTP API
(``pipeline.api``) both call these functions, so a batch is checked, published and reported the
same way whichever door it came through. Publishing and the batches table are passed in (a
``Publish`` callable and a :class:`BatchTable`): the CLI and the API give a Pub/Sub publisher and
the Bigtable store, tests a list and the memory store.

Submitting writes nothing to the table: it publishes one batch message on the frontier topic and
the pipeline's intake records the batch (``transforms.formats.batch_rows``). A batch id that
already has a record is answered as existing and nothing is published; two submissions racing
before the intake has recorded the first both publish, and the intake keeps the first (the same
id again is nothing new there too).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import google.cloud.pubsub_v1 as pubsub_v1

from transforms.core.batches import STATE_DONE, BatchError, BatchSpec, prepare_batch
from transforms.formats.batch_messages import encode_prepared
from transforms.formats.batch_rows import BatchRecord, Cells, read_record
from transforms.formats.messages import BadMessage
from transforms.formats.rows import iso
from transforms.formats.schema import BATCH_META_FAMILY, BATCHES_TABLE

Publish = Callable[[bytes, Mapping[str, str]], None]
"""Publishes one message (body, attributes) on the frontier topic and returns once it is
accepted; raises if it was not."""

PUBLISH_TIMEOUT = 60.0  # seconds to wait for Pub/Sub to accept a batch message


class BatchTable(Protocol):
    """The reads this module needs from a store (``BigtableStore``, ``MemoryFrontierStore``)."""

    def read_row(self, table: str, key: str) -> Cells | None: ...

    def scan_rows(self, table: str, family: str) -> Sequence[tuple[str, Cells]]: ...


class BatchIdTaken(BatchError):
    """The batch id is recorded for another client (batch ids are one namespace: the row key)."""


@dataclass(frozen=True)
class SubmitResult:
    """What a submission did: the batch's id and sizes, and whether it existed already (then
    the sizes are the recorded batch's and nothing was published)."""

    batch_id: str
    client: str
    sent: int
    unique: int
    invalid: int
    existing: bool = False


def pubsub_publisher(project: str, topic: str, timeout: float = PUBLISH_TIMEOUT) -> Publish:
    """A ``Publish`` on ``projects/<project>/topics/<topic>`` that waits for each message's ack,
    so a submission is reported only once Pub/Sub holds it. One client, thread-safe (the API
    publishes from worker threads)."""
    client = pubsub_v1.PublisherClient()
    path = client.topic_path(project, topic)

    def publish(data: bytes, attributes: Mapping[str, str]) -> None:
        client.publish(path, data, **dict(attributes)).result(timeout=timeout)

    return publish


def submit_batch(spec: BatchSpec, raw_urls: Sequence[str], *, publish: Publish,
                 store: BatchTable, table: str = BATCHES_TABLE) -> SubmitResult:
    """Checks a batch and publishes it on the frontier topic, unless its id is recorded already.

    Args:
        spec: the batch's options, with the client and the batch id (``new_batch_id()`` when
            the client gave none).
        raw_urls: the URLs as the client sent them.
        publish: sends the batch message (see :data:`Publish`).
        store: where the batches table is read.
        table: the batches table's name in ``store``.

    Returns:
        The batch id and sizes; ``existing=True`` (nothing published) when the id is recorded.

    Raises:
        BatchError: a batch that cannot be accepted (too many URLs, none, a bad option, too
            large for one message), or :class:`BatchIdTaken`.
    """
    prepared = prepare_batch(spec, raw_urls)
    record = read_record(spec.batch_id, store.read_row(table, spec.batch_id))
    if record is not None:
        if record.spec.client != spec.client:
            raise BatchIdTaken(f"batch id {spec.batch_id!r} is in use by another client: "
                               "choose another id")
        return SubmitResult(spec.batch_id, spec.client, record.sent, record.unique,
                            record.invalid, existing=True)
    try:
        data, attributes = encode_prepared(prepared)
    except BadMessage as exc:
        raise BatchError(str(exc)) from exc
    publish(data, attributes)
    return SubmitResult(spec.batch_id, spec.client, prepared.sent, len(prepared.urls),
                        len(prepared.invalid))


# -- reading -----------------------------------------------------------------------------------


def batch_status(store: BatchTable, batch_id: str, now: float,
                 table: str = BATCHES_TABLE) -> dict[str, Any] | None:
    """A batch's status as JSON (see :func:`status_doc`), None before the pipeline has recorded
    it (or for an id never submitted)."""
    record = read_record(batch_id, store.read_row(table, batch_id))
    return None if record is None else status_doc(record, now)


def status_doc(record: BatchRecord, now: float) -> dict[str, Any]:
    """The status of a recorded batch: sizes, state, counts per outcome from its ``u:`` cells
    (each URL once), progress, ETA at the batch's own rate, and its notifications."""
    tally = record.tally()
    done = record.state == STATE_DONE
    eta = 0.0 if done else tally.eta_seconds(now)
    doc = _summary(record, dict(sorted(tally.outcomes.items())))
    doc.update({
        "eta_seconds": None if eta is None else round(eta, 1),
        "priority": record.spec.priority,
        "cache_hours": record.spec.cache_hours,
        "notify": record.spec.notify,
        "milestone_step": record.spec.milestone_step,
        "notifications": _notifications(record),
    })
    if record.results:
        doc["results"] = dict(record.results)
    return doc


def list_batches(store: BatchTable, client: str | None = None,
                 table: str = BATCHES_TABLE) -> list[dict[str, Any]]:
    """The recorded batches (of ``client``, or all), newest first, each with its sizes, state
    and counts per outcome.

    One scan of the ``m`` family; a done batch's counts come from its ``m:outcomes`` cell, a
    running batch's row is read whole for its ``u:`` cells, so the cost follows the batches
    still running, not all the batches ever submitted.
    """
    found = []
    for key, cells in store.scan_rows(table, BATCH_META_FAMILY):
        record = read_record(key, cells)
        if record is None or (client is not None and record.spec.client != client):
            continue
        found.append((record, cells.get(BATCH_META_FAMILY, {}).get("outcomes")))
    found.sort(key=lambda item: (item[0].submitted_at, item[0].spec.batch_id), reverse=True)
    docs = []
    for record, recorded in found:
        outcomes = _recorded_outcomes(recorded) if record.state == STATE_DONE else None
        if outcomes is None:
            full = read_record(record.spec.batch_id,
                               store.read_row(table, record.spec.batch_id)) or record
            outcomes = dict(sorted(full.tally().outcomes.items()))
        docs.append(_summary(record, outcomes))
    return docs


def _summary(record: BatchRecord, outcomes: Mapping[str, int]) -> dict[str, Any]:
    finished = sum(outcomes.values())
    percent = 100.0 if record.total == 0 else round(100.0 * finished / record.total, 1)
    return {
        "batch_id": record.spec.batch_id,
        "client": record.spec.client,
        "state": record.state,
        "total": record.total,
        "finished": finished,
        "percent": min(percent, 100.0),
        "outcomes": dict(outcomes),
        "submitted_at": iso(record.submitted_at) if record.submitted_at else None,
        "done_at": None if record.done_at is None else iso(record.done_at),
        "sent": record.sent,
        "unique": record.unique,
        "invalid": record.invalid,
    }


def _recorded_outcomes(text: str | None) -> dict[str, int] | None:
    """``m:outcomes`` (JSON counts) if it is readable, else None (count from the cells)."""
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or not all(isinstance(v, int) for v in doc.values()):
        return None
    return {str(k): int(v) for k, v in sorted(doc.items())}


def _transition_order(transition: str) -> tuple[float, str]:
    """Milestones by their percent, then ``done`` (and anything else) after them."""
    if transition.endswith("%"):
        try:
            return float(transition[:-1]), transition
        except ValueError:
            pass
    return 1000.0, transition


def _notifications(record: BatchRecord) -> list[dict[str, Any]]:
    """Per transition: when it went out on the topic, and the webhook's attempts."""
    out = []
    for transition in sorted(set(record.notified) | set(record.hooks), key=_transition_order):
        sent_at = record.notified.get(transition)
        hook = record.hooks.get(transition)
        attempts = hook.get("attempts") if hook else None
        out.append({
            "transition": transition,
            "sent_at": None if sent_at is None else iso(sent_at),
            "webhook": None if hook is None else {
                "ok": bool(hook.get("ok")),
                "attempts": attempts if isinstance(attempts, list) else []},
        })
    return out


# -- text --------------------------------------------------------------------------------------


def format_duration(seconds: float) -> str:
    """``45s``, ``12m 30s``, ``3h 05m``: an ETA at the grain a person plans by."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def format_status(doc: Mapping[str, Any]) -> str:
    """A batch's status (a :func:`status_doc`) for a terminal."""
    eta = doc.get("eta_seconds")
    lines = [
        f"batch {doc['batch_id']} (client {doc['client']}): {doc['state']}",
        f"  submitted {doc.get('submitted_at') or '-'}"
        + (f", done {doc['done_at']}" if doc.get("done_at") else ""),
        f"  sent {doc['sent']:,} URLs: {doc['unique']:,} unique, {doc['invalid']:,} invalid; "
        f"total {doc['total']:,}",
        f"  finished {doc['finished']:,} of {doc['total']:,} ({doc['percent']:.1f}%), ETA "
        + ("unknown yet" if eta is None else format_duration(float(eta))),
    ]
    outcomes = doc.get("outcomes") or {}
    if outcomes:
        width = max(len(name) for name in outcomes)
        lines.append("  outcomes:")
        lines += [f"    {name:<{width}}  {count:>7,}" for name, count in outcomes.items()]
    notifications = doc.get("notifications") or []
    if notifications:
        lines.append("  notifications:")
        lines += [f"    {_notification_line(n)}" for n in notifications]
    return "\n".join(lines)


def _notification_line(entry: Mapping[str, Any]) -> str:
    text = f"{entry['transition']:<5} sent {entry.get('sent_at') or '-'}"
    hook = entry.get("webhook")
    if hook:
        count = len(hook.get("attempts") or [])
        result = "ok" if hook.get("ok") else "not delivered"
        text += f"; webhook {result} after {count} attempt{'' if count == 1 else 's'}"
    return text


def format_list(docs: Sequence[Mapping[str, Any]]) -> str:
    """Batches (from :func:`list_batches`) as a table, newest first."""
    if not docs:
        return "no batches"
    header = ("BATCH", "CLIENT", "STATE", "FINISHED", "TOTAL", "PERCENT", "SUBMITTED")
    rows = [(str(d["batch_id"]), str(d["client"]), str(d["state"]), f"{d['finished']:,}",
             f"{d['total']:,}", f"{d['percent']:.1f}%", str(d.get("submitted_at") or "-"))
            for d in docs]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in [header, *rows])
