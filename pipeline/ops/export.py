"""``crawler export``: the webtable's pages and outcomes as Hive-partitioned files, by a batch
Beam job on the crawl's runners.

The row-key space is cut into ranges (Bigtable's ``sample_row_keys`` plus a fixed split by the
first character of the reversed host, since the emulator samples nothing); each range is one
element, scanned by ``_ScanRangeFn`` with the Bigtable client (latest cells of families f, c,
p, s). A webtable row gives its URL's latest outcome, its page and its near-duplicate record
(``transforms.formats.exports.rows_from_cells``); rows whose event time (``fetched_at`` for
pages, ``at`` otherwise) is outside [since, until) are dropped. Rows are grouped by (dataset,
dt, hour, shard) and ``_WriteGroupFn`` writes each group as one file, streaming it to its
destination (Parquet a row group at a time, or JSON Lines)::

    ranges -> Reshuffle -> scan + filter -> key (dataset, dt, hour, shard) -> GroupByKey
      -> one file per key: {out}/{dataset}/dt=YYYY-MM-DD/hour=HH/
                           part-{start}-{shard}-000001-{run}.{parquet|jsonl}

File names carry the job's start time and a run id, so a retried write rewrites its own file
and a second export into the same place adds files beside the first's.
"""

from __future__ import annotations

import itertools
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from transforms import METRICS_NAMESPACE
from transforms.formats.exports import (
    DATASETS,
    FORMATS,
    ExportRow,
    export_path,
    jsonl_line,
    partition_of,
    rows_from_cells,
    write_parquet,
)
from transforms.formats.schema import (
    CONTENT_FAMILY,
    FETCH_FAMILY,
    PARSE_FAMILY,
    SCHEDULE_FAMILY,
)

# Row keys start with the reversed host: a digit (IPv4), '[' (IPv6) or a letter.
FIXED_SPLITS = tuple(c.encode() for c in "123456789[abcdefghijklmnopqrstuvwxyz")
MIME = {"parquet": "application/vnd.apache.parquet", "jsonl": "application/x-ndjson"}


def parse_time(text: str, flag: str) -> float:
    """An ISO 8601 date or time (``2026-11-25``, ``2026-11-25T10:00``, ``...Z``,
    ``...+01:00``; UTC when it names no zone) -> seconds since the epoch.

    Raises:
        ValueError: ``text`` is not such a time (the message names ``flag``).
    """
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not an ISO 8601 date or time, e.g. 2026-11-25 "
                         "or 2026-11-25T10:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


@dataclass(frozen=True)
class ExportSpec:
    """What one export reads and writes; picklable, so the DoFns carry it.

    Attributes:
        project, instance, table: the webtable.
        out: where the datasets go (``gs://bucket/prefix`` or a local directory).
        fmt: ``parquet`` or ``jsonl``.
        since, until: the event-time window [since, until), seconds; None: unbounded.
        shards: files per (dataset, dt, hour): rows are spread over them by URL.
        run_id: in every file name of this export.
        started_at: the export's start (the time in file names).
    """

    project: str
    instance: str
    table: str
    out: str
    fmt: str = "parquet"
    since: float | None = None
    until: float | None = None
    shards: int = 1
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    started_at: float = field(default_factory=time.time)

    def validate(self) -> None:
        """Raises ValueError with a clear message for an export that cannot run."""
        if self.fmt not in FORMATS:
            raise ValueError(f"--format {self.fmt!r}: use one of {', '.join(FORMATS)}")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("--since must be before --until")
        if self.shards < 1:
            raise ValueError("--shards must be at least 1")
        if not self.out:
            raise ValueError("--out is required (a local directory or gs://bucket/prefix)")

    def within(self, at: float) -> bool:
        return ((self.since is None or at >= self.since)
                and (self.until is None or at < self.until))


def key_ranges(samples: Iterable[bytes], fixed: Iterable[bytes] = FIXED_SPLITS
               ) -> list[tuple[bytes, bytes]]:
    """Contiguous [start, end) row-key ranges that cover the whole table (b"" is open), cut at
    the sampled keys and the fixed split points."""
    points = sorted({key for key in (*samples, *fixed) if key})
    bounds = [b"", *points, b""]
    return list(itertools.pairwise(bounds))


def shard_of(url: str, shards: int) -> int:
    """A stable shard for ``url`` (the same in every worker and every run)."""
    return zlib.crc32(url.encode("utf-8")) % shards


class _ScanRangeFn(beam.DoFn):
    """Scans one key range of the webtable; yields the export rows within the window."""

    def __init__(self, spec: ExportSpec) -> None:
        self._spec = spec

    def setup(self) -> None:
        from google.cloud import bigtable

        spec = self._spec
        self._client = bigtable.Client(project=spec.project, admin=False)
        self._table = self._client.instance(spec.instance).table(spec.table)
        self._scanned = Metrics.counter(METRICS_NAMESPACE, "export_scanned_rows")
        self._outside = Metrics.counter(METRICS_NAMESPACE, "export_outside_window")

    def process(self, key_range: tuple[bytes, bytes]) -> Iterator[ExportRow]:
        from google.cloud.bigtable import row_filters

        families = "|".join((FETCH_FAMILY, CONTENT_FAMILY, PARSE_FAMILY, SCHEDULE_FAMILY))
        only = row_filters.RowFilterChain([
            row_filters.FamilyNameRegexFilter(f"^({families})$"),
            row_filters.CellsColumnLimitFilter(1)])
        start, end = key_range
        for row in self._table.read_rows(start_key=start or None, end_key=end or None,
                                         filter_=only):
            self._scanned.inc()
            cells = {family: {column.decode(): values[0].value.decode("utf-8", "replace")
                              for column, values in columns.items()}
                     for family, columns in row.cells.items()}
            for export in rows_from_cells(row.row_key.decode(), cells):
                if self._spec.within(export.at):
                    yield export
                else:
                    self._outside.inc()

    def teardown(self) -> None:
        self._client.close()


class _WriteGroupFn(beam.DoFn):
    """Writes one (dataset, dt, hour, shard) group as one file; yields (dataset, path, rows)."""

    def __init__(self, spec: ExportSpec) -> None:
        self._spec = spec

    def setup(self) -> None:
        self._files = Metrics.counter(METRICS_NAMESPACE, "export_files")
        self._rows = {d: Metrics.counter(METRICS_NAMESPACE, f"export_rows_{d}")
                      for d in DATASETS}

    def process(self, element: tuple[tuple[str, str, str, int], Iterable[ExportRow]]
                ) -> Iterator[tuple[str, str, int]]:
        (dataset, dt, hour, shard), rows = element
        spec = self._spec
        path = export_path(spec.out, dataset, (dt, hour), spec.fmt, spec.started_at, shard, 1,
                           spec.run_id)
        with FileSystems.create(path, mime_type=MIME[spec.fmt],
                                compression_type=CompressionTypes.UNCOMPRESSED) as out:
            if spec.fmt == "parquet":
                count = write_parquet(out, dataset, rows)
            else:
                count = 0
                for row in rows:
                    out.write(jsonl_line(row))
                    count += 1
        self._files.inc()
        self._rows[dataset].inc(count)
        yield dataset, path, count


class ExportGraph(NamedTuple):
    rows: beam.PCollection  # ExportRow within the window
    files: beam.PCollection  # (dataset, path, rows) per file written


def build_export_pipeline(p: beam.Pipeline, spec: ExportSpec,
                          ranges: list[tuple[bytes, bytes]]) -> ExportGraph:
    """The export's graph on ``p``: scan ``ranges``, filter, group, write."""
    shards = spec.shards
    rows = (p
            | "KeyRanges" >> beam.Create(ranges)
            | "SpreadRanges" >> beam.Reshuffle()
            | "ScanWebtable" >> beam.ParDo(_ScanRangeFn(spec)))
    files = (rows
             | "KeyByPartition" >> beam.Map(lambda r: (
                 (r.dataset, *partition_of(r.at), shard_of(r.row["url"], shards)), r)
             ).with_output_types(tuple[tuple[str, str, str, int], Any])
             | "GroupByPartition" >> beam.GroupByKey()
             | "WriteFiles" >> beam.ParDo(_WriteGroupFn(spec)))
    return ExportGraph(rows, files)


@dataclass(frozen=True)
class ExportSummary:
    rows: dict[str, int]  # per dataset
    files: int
    seconds: float
    scanned: int

    def format(self, spec: ExportSpec) -> str:
        counts = ", ".join(f"{d} {self.rows.get(d, 0)}" for d in DATASETS)
        return (f"exported {counts} rows in {self.files} {spec.fmt} files under {spec.out} "
                f"({self.scanned} webtable rows scanned, {self.seconds:.1f} s)")


def sample_ranges(spec: ExportSpec) -> list[tuple[bytes, bytes]]:
    """The key ranges to scan: ``sample_row_keys`` of the table plus the fixed split."""
    from google.cloud import bigtable

    client = bigtable.Client(project=spec.project, admin=False)
    try:
        table = client.instance(spec.instance).table(spec.table)
        return key_ranges(sample.row_key for sample in table.sample_row_keys())
    finally:
        client.close()


def _counter(result: Any, name: str) -> int:
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE)
                                   .with_name(name))
    total = 0
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        total += value or 0
    return total


def run_export(spec: ExportSpec, options: PipelineOptions) -> ExportSummary:
    """Runs the export as a batch job (``options`` pick the runner; DirectRunner by default),
    waits for it, and returns what it wrote.

    Raises:
        ValueError: an invalid ``spec``.
    """
    spec.validate()
    started = time.monotonic()
    options.view_as(StandardOptions).streaming = False
    p = beam.Pipeline(options=options)
    build_export_pipeline(p, spec, sample_ranges(spec))
    result = p.run()
    result.wait_until_finish()
    return ExportSummary(rows={d: _counter(result, f"export_rows_{d}") for d in DATASETS},
                         files=_counter(result, "export_files"),
                         seconds=time.monotonic() - started,
                         scanned=_counter(result, "export_scanned_rows"))
