"""``FindNearDuplicates``: stored pages -> the near copies among them (MinHash LSH as keyed
state, backed by the ``dedup`` table).

Each page with a MinHash signature (``PageContent.signature``) and no exact original
(``duplicate_of``, found by the exact stage before it) goes to its 10 band keys
(``transforms.core.lsh.band_keys``). One band key's state is its bucket: a bounded list of
(URL, host, signature) candidates, a cache of the key's ``l#<band key>`` row. For each page the
key compares it with the candidates and reports the best one at or above the threshold as its
original (``transforms.core.lsh.judge``); a page that matched nothing joins the bucket, first
come kept, within the bounds that ``transforms.core.lsh`` documents.

    StoredPage -> ProbeBands -> (band key, Probe) x 10 -> [shuffle] -> JudgeBands
        -> NearDuplicate(url, host, original, similarity, at)

Reports: a page reaches up to 10 keys, so it can match in several bands. The judging DoFn keeps
its reports until the end of the bundle and emits one per URL (the most similar original);
a page whose bands were judged in different bundles (or by different workers) is reported once
per such bundle, at most once per band. Consumers keep the latest or the most similar; writing
``p:near_duplicate_of`` to the webtable is idempotent for them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.utils.windowed_value import WindowedValue

from transforms import METRICS_NAMESPACE
from transforms.core.bounded import BoundedLru, shared_lru
from transforms.core.lsh import (
    DEFAULT_THRESHOLD,
    MIN_THRESHOLD,
    Candidate,
    Match,
    band_keys,
    judge,
)
from transforms.core.records import NearDuplicate, StoredPage
from transforms.formats.band_rows import (
    band_row,
    band_row_key,
    bucket_from_cells,
)
from transforms.formats.rows import Row
from transforms.formats.schema import DEDUP_TABLE
from transforms.frontier.store import StoreSpec

_LOG = logging.getLogger(__name__)



class Probe(NamedTuple):
    """A page as one band key sees it, with the key's row as read when it was sent (``hint``:
    its cells, {} for no row; None when not read), so a key with no state needs no read."""

    url: str
    host: str
    signature: bytes
    at: float
    hint: dict[str, dict[str, str]] | None = None


PREFETCH_PAGES = 200  # pages whose band rows one read fetches, at most
RECENT_BUCKETS = 10_000  # band buckets a process remembers after writing them (~1,000 pages)


class _ProbeBandsFn(beam.DoFn):
    """StoredPage -> (band key, Probe) for each band of a page that has a signature and is
    not an exact duplicate (those are counted and dropped here).

    The bundle's band rows are read from the table in one call (every ``PREFETCH_PAGES``
    pages, and at the end of the bundle) and sent with the probes: a key judging its first
    page then needs no read of its own, which would be one round trip per band per page."""

    def __init__(self, store: StoreSpec, table: str) -> None:
        self._spec, self._table = store, table

    def setup(self) -> None:
        self._store = self._spec.open()
        self._signed = Metrics.counter(METRICS_NAMESPACE, "pages_signed")
        self._unsigned = Metrics.counter(METRICS_NAMESPACE, "near_dup_skipped_no_signature")
        self._exact = Metrics.counter(METRICS_NAMESPACE, "near_dup_skipped_exact_duplicate")
        self._rows_read = Metrics.counter(METRICS_NAMESPACE, "band_rows_read")

    def teardown(self) -> None:
        self._store.close()

    def start_bundle(self) -> None:
        self._waiting: list[tuple[Probe, list[str], Any, Any]] = []

    def process(self, stored: StoredPage, window=beam.DoFn.WindowParam,
                timestamp=beam.DoFn.TimestampParam) -> Iterator[tuple[str, Probe]]:
        page = stored.page
        if page.duplicate_of:
            self._exact.inc()
            return
        if page.content is None or not page.content.signature:
            self._unsigned.inc()
            return
        self._signed.inc()
        probe = Probe(page.fetch.request.url, page.fetch.host, page.content.signature,
                      page.fetch.fetched_at)
        self._waiting.append((probe, band_keys(probe.signature), window, timestamp))
        if len(self._waiting) >= PREFETCH_PAGES:
            for value in self._flush():
                yield value.value

    def finish_bundle(self) -> Iterator[WindowedValue]:
        yield from self._flush()

    def _flush(self) -> list[WindowedValue]:
        waiting, self._waiting = self._waiting, []
        if not waiting:
            return []
        keys = [key for _, keys, _, _ in waiting for key in keys]
        asked = list(dict.fromkeys(band_row_key(k) for k in keys))
        rows = self._store.read_rows(self._table, asked)
        self._rows_read.inc(len(asked))
        return [WindowedValue((key, probe._replace(hint=rows.get(band_row_key(key), {}))),
                              timestamp, (window,))
                for probe, keys, window, timestamp in waiting for key in keys]


class _JudgeBandsFn(beam.DoFn):
    """One band key's bucket: compares each page with it, reports the best match and admits
    the page per ``transforms.core.lsh.judge``.

    Where a bucket lives: in the key's ``l#<band key>`` row of the dedup table, written at the
    end of each bundle, before the bundle's reports leave. A probe carries the row as read
    when its page was probed (``Probe.hint``); a row this process wrote since may be newer, so
    the process keeps its last ``RECENT_BUCKETS`` written buckets (a shared
    ``transforms.core.bounded.BoundedLru``), and those win over the hint. Timeline of one key::

        page arrives -> bucket = this bundle's unwritten row, else the recent bucket, else
        the hint (else a read) -> judge -> changed bucket kept for the bundle -> report kept
        ... end of bundle -> changed rows written, and remembered as recent -> reports out

    Memory: no runner state per key. ``BUCKET`` is declared, never written, so that the runner
    keys the step (a band key's pages are judged in one place, one at a time); per-key state
    would grow by ten keys per page for the life of the job (a runner keeps every key's state),
    where the table already holds the buckets. Bound: ``RECENT_BUCKETS`` buckets of at most
    ``MAX_CANDIDATES`` candidates (``transforms.core.lsh``) per process, plus one bundle's rows.
    """

    BUCKET = ReadModifyWriteStateSpec("bucket", BytesCoder())

    def __init__(self, store: StoreSpec, table: str, threshold: float,
                 clock: Callable[[], float] = time.time) -> None:
        self._spec, self._table = store, table
        self._threshold, self._clock = threshold, clock

    def setup(self) -> None:
        self._store = self._spec.open()
        self._recent: BoundedLru[str, tuple[Candidate, ...]] = shared_lru(
            ("near-duplicate buckets", str(id(self._store)), self._table), RECENT_BUCKETS)
        self._checked = Metrics.counter(METRICS_NAMESPACE, "lsh_candidates_checked")
        self._found = Metrics.counter(METRICS_NAMESPACE, "near_duplicates_found")
        self._rows_read = Metrics.counter(METRICS_NAMESPACE, "band_rows_read")
        self._rows_written = Metrics.counter(METRICS_NAMESPACE, "band_rows_written")

    def teardown(self) -> None:
        self._store.close()

    def start_bundle(self) -> None:
        # The bundle's changed rows, by band key; also read before the store, so a key read
        # again in the bundle sees its own unwritten changes. Reset per bundle: a retried
        # bundle must not see the rows of the failed attempt.
        self._unwritten: dict[str, tuple[Row, tuple[Candidate, ...]]] = {}
        self._reports: dict[str, tuple[NearDuplicate, Any, Any]] = {}

    def process(self, element: tuple[str, Probe], unused_state=beam.DoFn.StateParam(BUCKET),
                window=beam.DoFn.WindowParam,
                timestamp=beam.DoFn.TimestampParam) -> Iterator[Any]:
        key, probe = element
        bucket = self._load(key, probe.hint)
        self._checked.inc(sum(1 for c in bucket if c.url != probe.url))
        verdict = judge(bucket, Candidate(probe.url, probe.host, probe.signature),
                        self._threshold)
        if verdict.bucket is not None:
            # Stamped with the clock, not the page's fetch time: a page fetched earlier but
            # judged later must still make the newest cell of the row.
            self._unwritten[key] = (band_row(key, verdict.bucket, self._clock()),
                                    verdict.bucket)
        if verdict.match is not None:
            self._keep(probe, verdict.match, window, timestamp)
        yield from ()

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self._unwritten:
            self._store.write_rows(self._table, [row for row, _ in self._unwritten.values()])
            self._rows_written.inc(len(self._unwritten))
            for key, (_, bucket) in self._unwritten.items():
                self._recent.put(key, bucket)
            self._unwritten = {}
        for report, timestamp, window in self._reports.values():
            self._found.inc()
            _LOG.info("near duplicate", extra={"url": report.url, "original": report.original,
                                               "similarity": report.similarity})
            yield WindowedValue(report, timestamp, (window,))
        self._reports = {}

    def _load(self, key: str, hint: dict[str, dict[str, str]] | None
              ) -> tuple[Candidate, ...]:
        pending = self._unwritten.get(key)
        if pending is not None:
            return pending[1]
        recent = self._recent.get(key)
        if recent is not None:
            return recent
        if hint is not None:  # read with the probe (ProbeBands), no round trip of its own
            return bucket_from_cells(hint or None)
        self._rows_read.inc()
        return bucket_from_cells(self._store.read_row(self._table, band_row_key(key)))

    def _keep(self, probe: Probe, match: Match, window: Any, timestamp: Any) -> None:
        """Keeps the bundle's best report per URL (one page matches in several bands)."""
        kept = self._reports.get(probe.url)
        if kept is None or match.similarity > kept[0].similarity:
            report = NearDuplicate(probe.url, probe.host, match.original, match.similarity,
                                   probe.at)
            self._reports[probe.url] = (report, timestamp, window)


class FindNearDuplicates(beam.PTransform):
    """PCollection[StoredPage] -> PCollection[NearDuplicate]: pages whose main text is a near
    copy (estimated Jaccard >= ``threshold``) of a page seen before, in this job or an earlier
    one (the buckets live in ``table``)."""

    def __init__(self, store: StoreSpec, table: str = DEDUP_TABLE,
                 threshold: float = DEFAULT_THRESHOLD) -> None:
        """Raises:
            ValueError: when ``threshold`` is not in [``MIN_THRESHOLD``, 1] (below it the
                bands rarely make a pair at the threshold a candidate).
        """
        super().__init__()
        if not MIN_THRESHOLD <= threshold <= 1.0:
            raise ValueError(f"near-duplicate threshold must be in [{MIN_THRESHOLD}, 1], "
                             f"got {threshold}")
        self._store, self._table = store, table
        self._threshold = threshold

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        return (pages
                | "ProbeBands" >> beam.ParDo(_ProbeBandsFn(self._store, self._table))
                .with_output_types(
                    tuple[str, Probe])
                | "JudgeBands" >> beam.ParDo(_JudgeBandsFn(
                    self._store, self._table, self._threshold))
                .with_output_types(NearDuplicate))
