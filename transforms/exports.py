"""``WriteExports``: export rows -> Hive-partitioned Parquet files, rolled by row count or time.

The analysts' streaming export (``transforms.formats.exports`` has the datasets and schemas).
Rows are spread over ``shards`` keys, a bundle's rows for a shard travelling as one element
(a keyed element per row was the stage's largest cost on the local runner); each shard
buffers rows in bag state and, when it holds
``roll_rows`` rows or ``roll_seconds`` after its first buffered row, whichever comes first,
writes one complete Parquet file per (dataset, dt, hour) among them, under
``{prefix}/{dataset}/dt=YYYY-MM-DD/hour=HH/``. A file is written whole and closed before its
path is emitted: a reader never sees a partial file (GCS objects appear on close; a local file
appears at its final name only once complete, through Beam's ``FileSystems``).

File names are ``part-{opened}-{shard}-{seq}-{token}.parquet``: ``opened`` is when the roll's
first row arrived and ``seq`` the shard's roll number, both held in state, and ``token`` a
digest of the file's bytes, so a roll retried after a failure rewrites the same names rather
than adding copies. Rows are written at least once: a roll that is retried with more rows
buffered writes other files, and its first attempt's files stay; queries that must not count
twice group by ``url`` and ``fetched_at``/``at``.

A shard also writes what it holds when the watermark passes the end of the window: at the
end of a bounded input, and when a streaming job is drained. A local run stops by cancelling,
so it first waits until :func:`unwritten_rows` is 0 (as it waits for ``transforms.frontier
.drain``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import apache_beam as beam
from apache_beam.coders import Coder, VarIntCoder
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (
    BagStateSpec,
    ReadModifyWriteStateSpec,
    TimerSpec,
    on_timer,
)
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from transforms import METRICS_NAMESPACE
from transforms.formats.exports import (
    SCHEMAS,
    ExportRow,
    export_path,
    group_rows,
    parquet_bytes,
)

_LOG = logging.getLogger(__name__)
PARQUET_MIME = "application/vnd.apache.parquet"
_LOCK = threading.Lock()
_UNWRITTEN = [0]  # rows buffered by this process's export shards and not written yet


def _note_unwritten(n: int) -> None:
    with _LOCK:
        _UNWRITTEN[0] += n


def unwritten_rows() -> int:
    """Rows this process's export shards hold that are in no file yet (exact on a
    single-process runner such as the DirectRunner; a local run waits for 0 before it stops)."""
    with _LOCK:
        return _UNWRITTEN[0]


STATE_VERSION = 1
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _encode_time(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime(_TIME_FORMAT)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def encode_state_row(row: ExportRow) -> bytes:
    """A buffered row as versioned bytes (not a pickle, so a job ``--update``d with a new
    column reads the rows an older one buffered): version byte 1, then JSON ``{"d": dataset,
    "t": event time, "r": columns}`` with timestamps as ISO 8601 UTC, microseconds."""
    doc = {"d": row.dataset, "t": row.at, "r": row.row}
    return bytes([STATE_VERSION]) + json.dumps(doc, default=_encode_time,
                                               separators=(",", ":")).encode("utf-8")


def decode_state_row(data: bytes) -> ExportRow:
    """The inverse of :func:`encode_state_row`, to the current schema: a column the bytes
    lack is null, one the schema no longer has is dropped.

    Raises:
        ValueError: bytes of an unknown version or dataset.
    """
    if data[:1] != bytes([STATE_VERSION]):
        raise ValueError(f"export row state of unknown version {data[:1]!r}")
    doc = json.loads(data[1:])
    if doc["d"] not in SCHEMAS:
        raise ValueError(f"export row state of unknown dataset {doc['d']!r}")
    row = {}
    for field in SCHEMAS[doc["d"]]:
        value = doc["r"].get(field.name)
        if value is not None and str(field.type).startswith("timestamp"):
            value = datetime.strptime(value, _TIME_FORMAT).replace(tzinfo=UTC)
        row[field.name] = value
    return ExportRow(doc["d"], float(doc["t"]), row)


class ExportRowCoder(Coder):
    """The bag state's coder: :func:`encode_state_row`."""

    def encode(self, value: ExportRow) -> bytes:
        return encode_state_row(value)

    def decode(self, encoded: bytes) -> ExportRow:
        return decode_state_row(encoded)

    def is_deterministic(self) -> bool:
        return False


def write_file(path: str, data: bytes, mime_type: str) -> None:
    """Writes ``data`` as the whole file ``path`` (``gs://`` or local) and closes it.

    UNCOMPRESSED: Beam would otherwise pick a compression from the extension."""
    with FileSystems.create(path, mime_type=mime_type,
                            compression_type=CompressionTypes.UNCOMPRESSED) as out:
        out.write(data)


class _ExportRollFn(beam.DoFn):
    """Keyed by shard. Buffers export rows; writes one Parquet file per (dataset, dt, hour)
    at ``roll_rows`` rows or ``roll_seconds`` after the first buffered row.

    Invariant: ``OPENED`` is set exactly when ``ROWS`` is not empty, and then a flush timer
    is set. Timeline: row arrives -> buffered; first row: OPENED = now, timer at now +
    roll_seconds -> more rows -> ``roll_rows`` reached (write now) or the timer fires (write)
    or the watermark passes the window's end (write) -> files closed -> their paths out,
    state cleared. A timer that fires on an empty buffer (its roll was written at
    ``roll_rows``) does nothing.
    """

    ROWS = BagStateSpec("rows", ExportRowCoder())
    COUNT = ReadModifyWriteStateSpec("count", VarIntCoder())
    SEQ = ReadModifyWriteStateSpec("seq", VarIntCoder())
    OPENED = ReadModifyWriteStateSpec("opened", VarIntCoder())
    FLUSH = TimerSpec("flush", TimeDomain.REAL_TIME)
    END = TimerSpec("end", TimeDomain.WATERMARK)

    def __init__(self, prefix: str, roll_rows: int, roll_seconds: float) -> None:
        self._prefix = prefix.rstrip("/")
        self._roll_rows = roll_rows
        self._roll_seconds = roll_seconds

    def setup(self) -> None:
        self._rows = Metrics.counter(METRICS_NAMESPACE, "export_rows")
        self._files = Metrics.counter(METRICS_NAMESPACE, "export_files")
        self._bytes = Metrics.counter(METRICS_NAMESPACE, "export_bytes")

    def process(self, element: tuple[str, tuple[ExportRow, ...]],
                rows=beam.DoFn.StateParam(ROWS), count=beam.DoFn.StateParam(COUNT),
                seq=beam.DoFn.StateParam(SEQ), opened=beam.DoFn.StateParam(OPENED),
                flush=beam.DoFn.TimerParam(FLUSH), end=beam.DoFn.TimerParam(END),
                window=beam.DoFn.WindowParam) -> Iterator[str]:
        shard, batch = element
        buffered = count.read() or 0
        for row in batch:
            if not buffered:
                now = time.time()
                opened.write(int(now))
                flush.set(Timestamp(now + self._roll_seconds))
                end.set(window.max_timestamp())
            rows.add(row)
            buffered += 1
            if buffered >= self._roll_rows:
                yield from self._roll(int(shard), rows, count, seq, opened)
                buffered = 0
        count.write(buffered)

    @on_timer(FLUSH)
    def on_flush(self, key=beam.DoFn.KeyParam, rows=beam.DoFn.StateParam(ROWS),
                 count=beam.DoFn.StateParam(COUNT), seq=beam.DoFn.StateParam(SEQ),
                 opened=beam.DoFn.StateParam(OPENED)) -> Iterator[str]:
        yield from self._roll(int(key), rows, count, seq, opened)

    @on_timer(END)
    def on_end(self, key=beam.DoFn.KeyParam, rows=beam.DoFn.StateParam(ROWS),
               count=beam.DoFn.StateParam(COUNT), seq=beam.DoFn.StateParam(SEQ),
               opened=beam.DoFn.StateParam(OPENED)) -> Iterator[str]:
        yield from self._roll(int(key), rows, count, seq, opened)

    def _roll(self, shard: int, rows, count, seq, opened) -> Iterator[str]:
        buffered: list[ExportRow] = list(rows.read())
        opened_at = opened.read() or int(time.time())
        rows.clear()
        count.clear()
        opened.clear()
        if not buffered:  # a timer of a roll already written when the row count was reached
            return
        number = (seq.read() or 0) + 1
        seq.write(number)
        for (dataset, dt, hour), group in group_rows(buffered).items():
            data = parquet_bytes(dataset, group)
            token = hashlib.sha1(data).hexdigest()[:8]
            path = export_path(self._prefix, dataset, (dt, hour), "parquet", opened_at,
                               shard, number, token)
            write_file(path, data, PARQUET_MIME)
            self._rows.inc(len(group))
            self._files.inc()
            self._bytes.inc(len(data))
            _LOG.info("export file written", extra={
                "path": path, "dataset": dataset, "dt": dt, "hour": hour,
                "rows": len(group), "bytes": len(data), "shard": shard, "seq": number})
            _note_unwritten(-len(group))
            yield path


BATCH_ROWS = 1000  # rows of a bundle sent to a shard as one element, at most


class _BatchByShardFn(beam.DoFn):
    """ExportRow -> (shard, rows): a bundle's rows, spread over ``shards`` keys, as one element
    per shard and window (at the end of the bundle, or at ``BATCH_ROWS``), stamped with its
    earliest row's element time. The rows count as unwritten from here until their file is
    written."""

    def __init__(self, shards: int) -> None:
        self._shards = shards

    def start_bundle(self) -> None:
        self._batches: dict[tuple[str, Any], tuple[Any, list[ExportRow]]] = {}

    def process(self, row: ExportRow, window=beam.DoFn.WindowParam,
                timestamp=beam.DoFn.TimestampParam) -> Iterator[Any]:
        shard = str(random.randrange(self._shards))
        earliest, batch = self._batches.setdefault((shard, window), (timestamp, []))
        if timestamp < earliest:
            self._batches[(shard, window)] = (timestamp, batch)
        batch.append(row)
        _note_unwritten(1)
        if len(batch) >= BATCH_ROWS:
            del self._batches[(shard, window)]
            yield shard, tuple(batch)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        batches, self._batches = self._batches, {}
        for (shard, window), (earliest, batch) in batches.items():
            yield WindowedValue((shard, tuple(batch)), earliest, (window,))


class WriteExports(beam.PTransform):
    """ExportRows -> the paths of the Parquet files written (one per dataset, partition and
    roll of a shard).

    Args:
        prefix: where the datasets go, e.g. ``gs://bucket/exports`` or a local directory.
        roll_seconds: a file is written at most this long after its first row arrived.
        roll_rows: ... or once a shard holds this many rows (bounds the state per shard).
        shards: writers in parallel (keys); each writes its own files.
    """

    def __init__(self, prefix: str, roll_seconds: float = 60.0, roll_rows: int = 5000,
                 shards: int = 2) -> None:
        super().__init__()
        if roll_seconds <= 0 or roll_rows < 1 or shards < 1:
            raise ValueError("WriteExports needs roll_seconds > 0, roll_rows >= 1, shards >= 1")
        self._prefix = prefix
        self._roll_seconds = roll_seconds
        self._roll_rows = roll_rows
        self._shards = shards

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        return (rows
                | "AssignShard" >> beam.ParDo(_BatchByShardFn(self._shards))
                .with_output_types(tuple[str, Any])
                | "RollFiles" >> beam.ParDo(
                    _ExportRollFn(self._prefix, self._roll_rows, self._roll_seconds)))
