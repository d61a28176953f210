"""``WriteWarc``: parsed pages -> WARC/1.1 files (gzip per record), rolled by size or time.

Pages are spread over ``shards`` keys; each shard buffers pages in bag state and writes one file
when the buffered bodies reach ``roll_bytes`` or ``roll_seconds`` after the first buffered page,
whichever comes first. The file is written and closed before any page's location is emitted, so a
webtable row never points at bytes that are not durable. Files go through Beam's ``FileSystems``:
``gs://`` in production (and on the local GCS emulator), a local directory in tests.

A page with ``revisit`` set (an exact payload duplicate of an earlier capture, found by the dedup
stage) is written as a ``revisit`` record: its HTTP headers only, pointing at the original.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.coders import PickleCoder, VarIntCoder
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

from transforms import METRICS_NAMESPACE
from transforms.core.records import ParsedPage, StoredPage, WarcLocation
from transforms.formats.warc import WarcFileBuilder, warc_filename

SOFTWARE = "beam-crawler/0.1 (Apache Beam, warcio)"
_LOG = logging.getLogger(__name__)


class _WarcRollFn(beam.DoFn):
    """Keyed by shard. Buffers pages; writes a WARC file at ``roll_bytes`` or ``roll_seconds``.

    Timeline: page arrives -> buffered, flush timer set to now + roll_seconds (first page
    only) -> more pages -> size reached (flush now) or timer fires (flush) -> file closed
    -> locations out.
    """

    PAGES = BagStateSpec("pages", PickleCoder())
    SIZE = ReadModifyWriteStateSpec("size", VarIntCoder())
    SEQ = ReadModifyWriteStateSpec("seq", VarIntCoder())
    ARMED = ReadModifyWriteStateSpec("armed", VarIntCoder())
    FLUSH = TimerSpec("flush", TimeDomain.REAL_TIME)

    def __init__(self, prefix: str, roll_bytes: int, roll_seconds: float) -> None:
        self._prefix = prefix.rstrip("/")
        self._roll_bytes = roll_bytes
        self._roll_seconds = roll_seconds

    def setup(self) -> None:
        self._files = Metrics.counter(METRICS_NAMESPACE, "warc_files")
        self._records = Metrics.counter(METRICS_NAMESPACE, "warc_records")
        self._revisits = Metrics.counter(METRICS_NAMESPACE, "warc_revisit_records")
        self._bytes = Metrics.counter(METRICS_NAMESPACE, "warc_bytes")

    def process(self, element: tuple[str, ParsedPage],
                pages=beam.DoFn.StateParam(PAGES), size=beam.DoFn.StateParam(SIZE),
                seq=beam.DoFn.StateParam(SEQ), armed=beam.DoFn.StateParam(ARMED),
                flush=beam.DoFn.TimerParam(FLUSH)) -> Iterator[StoredPage]:
        shard, page = element
        # A revisit stores no payload, so its body need not sit in state until the flush.
        pages.add(_without_body(page) if page.revisit is not None else page)
        buffered_bytes = (size.read() or 0) + _stored_bytes(page)
        size.write(buffered_bytes)
        if buffered_bytes >= self._roll_bytes:
            yield from self._write(int(shard), pages, size, seq)
            armed.clear()
        elif not armed.read():
            flush.set(Timestamp(time.time() + self._roll_seconds))
            armed.write(1)

    @on_timer(FLUSH)
    def on_flush(self, key=beam.DoFn.KeyParam, pages=beam.DoFn.StateParam(PAGES),
                 size=beam.DoFn.StateParam(SIZE), seq=beam.DoFn.StateParam(SEQ),
                 armed=beam.DoFn.StateParam(ARMED)) -> Iterator[StoredPage]:
        armed.clear()
        yield from self._write(int(key), pages, size, seq)

    def _write(self, shard: int, pages, size, seq) -> Iterator[StoredPage]:
        buffered: list[ParsedPage] = list(pages.read())
        pages.clear()
        size.clear()
        if not buffered:
            return
        number = (seq.read() or 0) + 1
        seq.write(number)
        path = warc_filename(self._prefix, shard, number, time.time())
        builder = WarcFileBuilder(path.rsplit("/", 1)[-1], SOFTWARE)
        placed = [(page, builder.add(page.fetch, revisit=page.revisit)) for page in buffered]
        data = builder.getvalue()
        # UNCOMPRESSED: the records are gzip members already; ".gz" must not gzip the file again.
        with FileSystems.create(path, mime_type="application/warc",
                                compression_type=CompressionTypes.UNCOMPRESSED) as out:
            out.write(data)
        self._files.inc()
        self._records.inc(len(placed))
        self._revisits.inc(sum(page.revisit is not None for page in buffered))
        self._bytes.inc(len(data))
        _LOG.info("warc file written", extra={"path": path, "records": len(placed),
                                              "bytes": len(data)})
        for page, (offset, length) in placed:
            yield StoredPage(_without_body(page), WarcLocation(path, offset, length))


def _without_body(page: ParsedPage) -> ParsedPage:
    return dataclasses.replace(page, fetch=page.fetch.without_body())


def _stored_bytes(page: ParsedPage) -> int:
    """The payload bytes a page adds to the file: none for a revisit, which stores no body."""
    return 0 if page.revisit is not None else len(page.fetch.body or b"")


class WriteWarc(beam.PTransform):
    """ParsedPages -> StoredPages (body dropped, WARC location attached)."""

    def __init__(self, prefix: str, roll_bytes: int = 64 * 1024 * 1024,
                 roll_seconds: float = 30.0, shards: int = 4) -> None:
        super().__init__()
        self._prefix = prefix
        self._roll_bytes = roll_bytes
        self._roll_seconds = roll_seconds
        self._shards = shards

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        shards = self._shards
        return (pages
                | "AssignShard" >> beam.Map(
                    lambda page: (str(random.randrange(shards)), page)
                ).with_output_types(tuple[str, Any])
                | "RollFiles" >> beam.ParDo(
                    _WarcRollFn(self._prefix, self._roll_bytes, self._roll_seconds)))


