"""``DetectDuplicates``: exact duplicates across URLs, keyed by content digest.

Between ``ExtractLinks`` and ``PublishLinks``: a parsed page is keyed by its content
(``transforms.core.duplicates.content_key``: the normalized main text's digest, or the payload
digest for a page without text) and judged against that content's record
(``transforms.core.duplicates.judge``):

    Discovered(links, page) -> key "t:<text digest>" -> record in state (read from the dedup
      table on the key's first element: the table is the truth, state its cache)
      (the bundle's rows read in one call before the shuffle and sent with the pages)
      -> first URL: the original; later URLs: duplicate_of; same bytes: a WARC revisit
      -> a duplicate's links dropped unless --follow_duplicate_links
      -> DUST evidence (two URLs of one key, same text) rides with the links to the frontier
      -> changed records written to the dedup table at the end of the bundle, before the
         bundle's outputs are committed downstream

Fetch results that are not pages (errors, redirects, sitemaps) and pages that could not be
decoded pass through untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.coders import PickleCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.utils.windowed_value import WindowedValue

from transforms import METRICS_NAMESPACE
from transforms.core.bounded import BoundedLru, shared_lru
from transforms.core.duplicates import DigestRecord, Probe, content_key, judge
from transforms.core.records import Discovered, ParsedPage
from transforms.formats.digest_rows import digest_row, digest_row_key, record_from_cells
from transforms.formats.rows import Row
from transforms.formats.schema import DEDUP_TABLE
from transforms.formats.warc import capture_date
from transforms.frontier.store import StoreSpec

PREFETCH_PAGES = 50  # pages whose digest rows one read fetches, at most
PREFETCH_BYTES = 8 << 20  # ... and at most this many body bytes waiting for it
RECENT_RECORDS = 20_000  # content records a process remembers after writing them


class _KeyByContentFn(beam.DoFn):
    """Discovered page -> (content key, (Discovered, the key's dedup row as read now)).

    The bundle's digest rows are read in one call (every ``PREFETCH_PAGES`` pages or
    ``PREFETCH_BYTES`` of bodies, and at the end of the bundle): a key judging its first page
    then needs no read of its own. The judge prefers its state; the row only fills an empty
    state, which happens on a key's first page in a job, before any write of its own."""

    def __init__(self, store: StoreSpec, table: str) -> None:
        self._spec, self._table = store, table

    def setup(self) -> None:
        self._store = self._spec.open()

    def teardown(self) -> None:
        self._store.close()

    def start_bundle(self) -> None:
        self._waiting: list[tuple[str, Discovered, Any, Any]] = []
        self._bytes = 0

    def process(self, item: Discovered, window=beam.DoFn.WindowParam,
                timestamp=beam.DoFn.TimestampParam) -> Iterator[tuple[str, Any]]:
        page = item.item
        assert isinstance(page, ParsedPage)
        self._waiting.append((content_key(page), item, window, timestamp))
        self._bytes += len(page.fetch.body or b"")
        if len(self._waiting) >= PREFETCH_PAGES or self._bytes >= PREFETCH_BYTES:
            for value in self._flush():
                yield value.value

    def finish_bundle(self) -> Iterator[WindowedValue]:
        yield from self._flush()

    def _flush(self) -> list[WindowedValue]:
        waiting, self._waiting, self._bytes = self._waiting, [], 0
        if not waiting:
            return []
        rows = self._store.read_rows(self._table, [digest_row_key(k) for k, *_ in waiting])
        return [WindowedValue((key, (item, rows.get(digest_row_key(key), {}))), timestamp,
                              (window,)) for key, item, window, timestamp in waiting]


class _PageOrOther(beam.PartitionFn):
    """Partition 0: parsed pages with a digest; 1: everything else."""

    def partition_for(self, element: Any, num_partitions: int, *args: Any,
                      **kwargs: Any) -> int:
        return 0 if isinstance(element.item, ParsedPage) and bool(element.item.checksum) else 1


class _JudgeFn(beam.DoFn):
    """One content key's record: judges each page against it (``transforms.core.duplicates``).

    Where a record lives: in the key's row of the dedup table, written at the end of each
    bundle, before the bundle's outputs are committed. A page carries the row as read when it
    was keyed; a record this process wrote since may be newer, so the process keeps its last
    ``RECENT_RECORDS`` written records (a shared ``transforms.core.bounded.BoundedLru``),
    and those win over the row sent with the page.

    Memory: no runner state per key. ``RECORD`` is declared, never written, so that the runner
    keys the step (a content's pages are judged in one place, one at a time); per-key state
    would grow by a key per distinct page for the life of the job, where the table already
    holds the records. Bound: ``RECENT_RECORDS`` records (a few URLs each) per process, plus
    one bundle's rows.
    """

    RECORD = ReadModifyWriteStateSpec("record", PickleCoder())

    def __init__(self, store: StoreSpec, table: str, follow_links: bool) -> None:
        self._spec, self._table, self._follow = store, table, follow_links

    def setup(self) -> None:
        self._store = self._spec.open()
        self._recent: BoundedLru[str, DigestRecord] = shared_lru(
            ("content records", str(id(self._store)), self._table), RECENT_RECORDS)
        self._pages = Metrics.counter(METRICS_NAMESPACE, "dedup_pages")
        self._duplicates = Metrics.counter(METRICS_NAMESPACE, "duplicates_found")
        self._payload_duplicates = Metrics.counter(METRICS_NAMESPACE, "duplicates_payload")
        self._revisits = Metrics.counter(METRICS_NAMESPACE, "revisits_identical_payload")
        self._links_dropped = Metrics.counter(METRICS_NAMESPACE, "duplicate_links_dropped")
        self._evidence = Metrics.counter(METRICS_NAMESPACE, "dust_evidence")
        self._reads = Metrics.counter(METRICS_NAMESPACE, "dedup_rows_read")

    def teardown(self) -> None:
        self._store.close()

    def start_bundle(self) -> None:
        self._rows: dict[str, tuple[Row, DigestRecord]] = {}

    def process(self, element: tuple[str, tuple[Discovered, Any]],
                unused_state=beam.DoFn.StateParam(RECORD)) -> Iterator[Discovered]:
        key, (item, row) = element
        page = item.item
        assert isinstance(page, ParsedPage)
        pending = self._rows.get(key)  # written by this bundle, not yet stored
        record = pending[1] if pending is not None else self._recent.get(key)
        if record is None:  # not written lately by this process: its row, read with the page
            self._reads.inc()
            record = record_from_cells(row or None)
        fetch = page.fetch
        words = page.content.word_count if page.content is not None else 0
        probe = Probe(fetch.request.url, fetch.host, fetch.final_url, page.checksum,
                      capture_date(fetch), fetch.fetched_at, words, not fetch.request.revisit)
        record, verdict, changed = judge(record, probe)
        if changed:
            self._rows[key] = (digest_row(key, record, fetch.fetched_at), record)
        self._pages.inc()
        links = item.links
        if verdict.duplicate_of is not None:
            self._duplicates.inc()
            if verdict.revisit is not None:
                self._payload_duplicates.inc()
            if not self._follow and links:
                self._links_dropped.inc(len(links))
                links = ()
        if verdict.revisit is not None:
            self._revisits.inc()
        if verdict.duplicate_of is not None or verdict.revisit is not None:
            page = dataclasses.replace(
                page, duplicate_of=verdict.duplicate_of, duplicate_kind=verdict.kind,
                revisit=verdict.revisit,
                outlinks=page.outlinks if links or not item.links else ())
        rules = item.rules
        if verdict.rule is not None:
            self._evidence.inc()
            rules = (*rules, (probe.url, verdict.rule, key))
        yield Discovered(links, page, rules)

    def finish_bundle(self) -> None:
        if self._rows:
            self._store.write_rows(self._table, [row for row, _ in self._rows.values()])
            for key, (_, record) in self._rows.items():
                self._recent.put(key, record)
            self._rows = {}


class DetectDuplicates(beam.PTransform):
    """Discovered -> Discovered, pages annotated with ``duplicate_of`` / ``revisit`` (see the
    module docstring). ``follow_links``: a duplicate's links still go to the frontier."""

    def __init__(self, store: StoreSpec, table: str = DEDUP_TABLE,
                 follow_links: bool = False) -> None:
        super().__init__()
        self._store, self._table, self._follow = store, table, follow_links

    def expand(self, discovered: beam.PCollection) -> beam.PCollection:
        pages, others = discovered | "SplitPages" >> beam.Partition(_PageOrOther(), 2)
        judged = (pages
                  | "KeyByContent" >> beam.ParDo(_KeyByContentFn(self._store, self._table))
                  .with_output_types(tuple[str, Any])
                  | "JudgeContent" >> beam.ParDo(_JudgeFn(self._store, self._table,
                                                          self._follow)))
        return (judged, others) | "AllDiscovered" >> beam.Flatten()
