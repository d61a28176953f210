"""The batches table's rows (pure): a batch's record, its URLs' outcomes, its notifications.

One row per batch, row key = batch id::

    m:client m:submitted_at m:sent m:unique m:invalid m:total m:priority m:cache_hours
    m:notify m:milestone_step m:state m:done_at m:outcomes (JSON counts, when done)
    m:results (JSON: the results file's path and signed URL, when done)
    u:<url>                 {"o": outcome, "at": ..., "s": HTTP status, "w": WARC file,
                             "off": offset, "f": fetched_at, "d": detail}
    n:sent:<transition>     when the notification went out (topic published)
    n:hook:<transition>     {"attempts": [{"at":..., "status":..., "error":...}], "ok": bool}

Every write is a cell set, so writing the same outcome twice (a redelivery, a replayed bundle)
changes nothing: the cells, not a counter, are what a tally is rebuilt from. The webtable row
of the URL gets ``b:<batch id>`` = the outcome too (which batches asked for it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from transforms.core.batches import (
    STATE_DONE,
    STATE_RUNNING,
    BatchSpec,
    BatchTally,
    PreparedBatch,
    batch_outcome,
)
from transforms.core.records import BatchEvent, CrawlRequest
from transforms.formats.rows import Row, from_iso, iso
from transforms.formats.schema import (
    BATCH_META_FAMILY,
    BATCH_NOTIFY_FAMILY,
    BATCH_URL_FAMILY,
    URL_BATCH_FAMILY,
)

Cells = Mapping[str, Mapping[str, str]]


def record_row(batch: PreparedBatch, submitted_at: float) -> Row:
    spec = batch.spec
    meta = {"client": spec.client, "submitted_at": iso(submitted_at), "sent": str(batch.sent),
            "unique": str(len(batch.urls)), "invalid": str(len(batch.invalid)),
            "total": str(batch.total), "priority": str(spec.priority),
            "cache_hours": "" if spec.cache_hours is None else str(spec.cache_hours),
            "notify": spec.notify or "", "milestone_step": str(spec.milestone_step),
            "state": STATE_RUNNING}
    return Row(spec.batch_id, {BATCH_META_FAMILY: meta}, submitted_at)


def state_row(batch_id: str, state: str, at: float, outcomes: Mapping[str, int],
              results: Mapping[str, str] | None = None) -> Row:
    """The record's state; when done, its counts, its time and where the results file is
    (``m:results``: JSON ``{"path": ..., "signed_url": ...}``)."""
    meta = {"state": state, "outcomes": json.dumps(dict(sorted(outcomes.items())))}
    if state == STATE_DONE:
        meta["done_at"] = iso(at)
    if results:
        meta["results"] = json.dumps(dict(results))
    return Row(batch_id, {BATCH_META_FAMILY: meta}, at)


def events_for(request: CrawlRequest, url_status: str, at: float, *,
               http_status: int | None = None, fetched_at: float | None = None,
               warc_file: str | None = None, warc_offset: int | None = None,
               detail: str = "") -> tuple[BatchEvent, ...]:
    """The batch events of a request's terminal status (none for the crawl's own URLs)."""
    outcome = batch_outcome(url_status)
    return tuple(BatchEvent(b, request.url, outcome, at, http_status, fetched_at, warc_file,
                            warc_offset, detail[:300]) for b in request.batches)


def outcome_rows(events: Iterable[BatchEvent]) -> list[Row]:
    """The batches-table cells of ``events`` (one ``u:<url>`` cell each)."""
    rows = []
    for e in events:
        doc: dict[str, object] = {"o": e.outcome, "at": round(e.at, 3)}
        if e.http_status is not None:
            doc["s"] = e.http_status
        if e.fetched_at is not None:
            doc["f"] = round(e.fetched_at, 3)
        if e.warc_file:
            doc["w"], doc["off"] = e.warc_file, e.warc_offset
        if e.detail:
            doc["d"] = e.detail
        rows.append(Row(e.batch_id, {BATCH_URL_FAMILY: {e.url: json.dumps(doc)}}, e.at))
    return rows


def with_batch_cells(row: Row, events: Iterable[BatchEvent]) -> Row:
    """The URL's webtable row with a ``b:<batch id>`` cell (the outcome) per event."""
    cells = {e.batch_id: e.outcome for e in events}
    if not cells:
        return row
    return row._replace(cells={**row.cells, URL_BATCH_FAMILY: cells})


def notified_row(batch_id: str, transition: str, at: float) -> Row:
    return Row(batch_id, {BATCH_NOTIFY_FAMILY: {f"sent:{transition}": iso(at)}}, at)


def hook_row(batch_id: str, transition: str, attempts: list[dict[str, object]], ok: bool,
             at: float) -> Row:
    doc = json.dumps({"attempts": attempts, "ok": ok})
    return Row(batch_id, {BATCH_NOTIFY_FAMILY: {f"hook:{transition}": doc}}, at)


@dataclass
class BatchRecord:
    """A batch as its row says: the spec, sizes, state, outcomes per URL, notifications."""

    spec: BatchSpec
    submitted_at: float
    sent: int
    unique: int
    invalid: int
    total: int
    state: str
    done_at: float | None
    urls: dict[str, dict[str, object]] = field(default_factory=dict)
    notified: dict[str, float] = field(default_factory=dict)
    hooks: dict[str, dict[str, object]] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)

    def tally(self) -> BatchTally:
        tally = BatchTally(self.total)
        for url, doc in self.urls.items():
            at = doc.get("at")
            tally.add(url, str(doc.get("o")), float(at) if isinstance(at, int | float) else 0.0)
        return tally


def read_record(batch_id: str, cells: Cells | None) -> BatchRecord | None:
    """The batch's record from its row's cells, None without a ``m:client`` (no such batch)."""
    if not cells:
        return None
    meta = cells.get(BATCH_META_FAMILY, {})
    if "client" not in meta:
        return None

    def number(name: str, default: float = 0) -> float:
        try:
            return float(meta.get(name) or default)
        except ValueError:
            return default

    cache = meta.get("cache_hours") or None
    spec = BatchSpec(batch_id, meta["client"], int(number("priority")),
                     float(cache) if cache else None, meta.get("notify") or None,
                     int(number("milestone_step", 25)))
    urls = {}
    for url, text in cells.get(BATCH_URL_FAMILY, {}).items():
        try:
            urls[url] = json.loads(text)
        except ValueError:
            urls[url] = {"o": "unknown"}
    notified, hooks = {}, {}
    for column, value in cells.get(BATCH_NOTIFY_FAMILY, {}).items():
        kind, _, transition = column.partition(":")
        if kind == "sent":
            notified[transition] = from_iso(value) or 0.0
        elif kind == "hook":
            try:
                hooks[transition] = json.loads(value)
            except ValueError:
                pass
    try:
        results = json.loads(meta.get("results") or "{}")
    except ValueError:
        results = {}
    return BatchRecord(spec, from_iso(meta.get("submitted_at")) or 0.0, int(number("sent")),
                       int(number("unique")), int(number("invalid")), int(number("total")),
                       meta.get("state", STATE_RUNNING), from_iso(meta.get("done_at")), urls,
                       notified, hooks, {str(k): str(v) for k, v in results.items()})
