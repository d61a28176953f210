"""The frontier's view of the tables: what it writes and reads back, behind one small interface.

The frontier's durable memory is three tables: the webtable (the status of every URL, the
source of truth), the frontier index (the work still to do, ``transforms.formats.index``) and
the hosts table (one row per key: counters, the last robots.txt verdict, whether the key has
work pending). :class:`FrontierStore` is everything the frontier does with them; the Bigtable
implementation is ``transforms.stores.bigtable``, and ``transforms.stores.memory`` keeps the same
tables in a dict for tests (it is not a mock: it applies the same row formats, cell timestamps
and write order).

Writes come in a :class:`StoreBatch` and are applied in an order that keeps the index a
superset of the pending work whatever point a crash stops them at: index entries first, then
webtable rows, then hosts rows, then index deletions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from transforms.core.records import UrlRecord
from transforms.core.robots import RobotsRules
from transforms.core.url_keys import url_fingerprint
from transforms.formats.index import IndexEntry, entry_from_cells
from transforms.formats.rows import Row, url_record
from transforms.formats.schema import (
    INDEX_FAMILY,
)

Cells = dict[str, dict[str, str]]


@dataclass
class StoreBatch:
    """Writes of one frontier step, applied in the order of the fields."""

    index_puts: list[IndexEntry] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)  # webtable
    batch_rows: list[Row] = field(default_factory=list)  # batches table: URL outcome cells
    host_rows: list[Row] = field(default_factory=list)  # hosts table
    index_deletes: list[str] = field(default_factory=list)  # index row keys

    def __bool__(self) -> bool:
        return bool(self.index_puts or self.rows or self.batch_rows or self.host_rows
                    or self.index_deletes)

    def extend(self, other: StoreBatch) -> None:
        self.index_puts += other.index_puts
        self.rows += other.rows
        self.batch_rows += other.batch_rows
        self.host_rows += other.host_rows
        self.index_deletes += other.index_deletes


Read = Callable[[], Any]


@dataclass
class BundleWork:
    """What a bundle of frontier steps leaves to do at its end, and in which order.

    ``flush`` writes the bundle's ``StoreBatch`` first, then starts the leases and the reads
    its keys asked for, then hands back the acknowledgement tokens:

    * a read started before the writes could run before them: a refill would then see, as
      pending, the entries of URLs this bundle just harvested (held) or admitted, and put
      them in the head a second time;
    * a lease started before the writes would run even when they fail, and the runner retries
      the bundle, which starts the same lease again: the host's URLs fetched twice, two
      connections at once.
    """

    writes: StoreBatch = field(default_factory=StoreBatch)
    leases: list[Any] = field(default_factory=list)
    reads: list[tuple[str, Read]] = field(default_factory=list)
    tokens: list[Any] = field(default_factory=list)

    def flush(self, write: Callable[[StoreBatch], None], start_lease: Callable[[Any], None],
              start_read: Callable[[str, Read], None]) -> list[Any]:
        """Writes, then starts the leases and the reads (``start_read(job_id, read)``);
        returns the tokens."""
        if self.writes:
            write(self.writes)
        for lease in self.leases:
            start_lease(lease)
        for job_id, read in self.reads:
            start_read(job_id, read)
        tokens = self.tokens
        self.writes, self.leases, self.reads, self.tokens = StoreBatch(), [], [], []
        return tokens


@dataclass(frozen=True)
class IndexPage:
    """The first eligible entries of a key's index, in rank order.

    Attributes:
        entries: eligible entries not in the caller's ``skip`` set.
        next_eligible_at: the earliest ``eligible_at`` of an entry seen that is not eligible
            yet (a scheduled recrawl), or None.
        exhausted: the read reached the end of the key's index (``entries`` is all there is).
        last_key: the last index row key read, when the read stopped before the end: a
            later read may continue after it (``after`` of ``FrontierStore.index_page``).
    """

    entries: tuple[IndexEntry, ...]
    next_eligible_at: float | None
    exhausted: bool
    last_key: str | None = None


@dataclass(frozen=True)
class RebuildPage:
    """One page of a key's webtable rows, read back to rebuild its state.

    Attributes:
        records: the rows of the page that belong to the key.
        after: the row key to continue after, None when this was the last page.
        robots: the robots.txt verdict saved in the hosts table (first page only), or None.
        url_rules: the DUST rules the key adopted, saved in the hosts table (first page only).
        index: the first page of the key's index (first page only), or None.
    """

    records: tuple[UrlRecord, ...]
    after: str | None
    robots: RobotsRules | None = None
    index: IndexPage | None = None
    url_rules: tuple[str, ...] = ()  # the key's DUST rules (first page only)


class FrontierStore(Protocol):
    """What the frontier does with its tables. Methods block; the frontier calls the reads off
    the runner's thread (``transforms.fetchers.service``) and the writes at the end of a bundle."""

    def write(self, batch: StoreBatch) -> None:
        """Applies ``batch`` (see :class:`StoreBatch` for the order); raises on failure."""
        ...

    def url_records(self, urls: Sequence[str]) -> dict[str, UrlRecord]:
        """The rows of ``urls`` that exist, by URL."""
        ...

    def index_page(self, key: str, limit: int, skip: frozenset[bytes], now: float,
                   scan_limit: int, incarnation: str = "", after: str | None = None
                   ) -> IndexPage:
        """Up to ``limit`` eligible entries of ``key``'s index (of its rows after ``after``,
        when given), reading at most ``scan_limit`` rows; entries whose URL fingerprint is in
        ``skip`` (in the head already) or that ``incarnation`` holds are passed."""
        ...

    def rebuild_page(self, key: str, after: str | None, limit: int, first: bool,
                     index_limit: int, now: float) -> RebuildPage:
        """Up to ``limit`` of the key's webtable rows after ``after``; with ``first``, also
        the saved robots verdict and the first ``index_limit`` index entries."""
        ...

    def pending_keys(self) -> list[str]:
        """Keys whose hosts row says they have work pending (``h:pending``)."""
        ...

    def write_rows(self, table: str, rows: Iterable[Row]) -> None:
        """Rows of any table, for the pipeline's sinks (in the order given)."""
        ...

    def read_row(self, table: str, key: str) -> Cells | None:
        """The newest cells of one row of any table, or None when it has none."""
        ...

    def read_rows(self, table: str, keys: Sequence[str]) -> dict[str, Cells]:
        """The newest cells of many rows of any table in one call; rows without cells are
        left out."""
        ...

    def scan_rows(self, table: str, family: str) -> list[tuple[str, Cells]]:
        """Every row of ``table`` with the newest cells of ``family`` only (small tables:
        the batches table's records)."""
        ...

    def close(self) -> None:
        """Lets go of what the store holds (a shared store may keep its client)."""
        ...


# A client batch's revisit of a URL still in flight (in the head, out in a lease, or not yet
# written) is looked at again this much later: by the index read, and by a deferred entry.
REVISIT_RETRY_SECONDS = 5.0


def scan_index(rows: Iterable[tuple[str, Cells]], limit: int, skip: frozenset[bytes],
               now: float, scan_limit: int, incarnation: str = "") -> IndexPage:
    """Builds an :class:`IndexPage` from index rows in key order (shared by the stores)."""
    entries: list[IndexEntry] = []
    next_eligible: float | None = None
    read = 0
    for row_key_, cells in rows:
        read += 1
        last = row_key_
        entry = entry_from_cells(row_key_, cells.get(INDEX_FAMILY, {}))
        if entry.held(incarnation, now):
            pass  # fetched by this incarnation; its sink deletes it once its row is durable
        elif entry.eligible_at > now:
            if next_eligible is None or entry.eligible_at < next_eligible:
                next_eligible = entry.eligible_at
        elif url_fingerprint(entry.request.url) not in skip:
            entries.append(entry)
        elif entry.request.batches and entry.request.revisit:
            # A batch's revisit of a URL in flight: look again once that has settled.
            again = now + REVISIT_RETRY_SECONDS
            next_eligible = again if next_eligible is None else min(next_eligible, again)
        if len(entries) >= limit or read >= scan_limit:
            return IndexPage(tuple(entries), next_eligible, False, last)
    return IndexPage(tuple(entries), next_eligible, True)


def key_records(key: str, rows: Iterable[tuple[str, Cells]]) -> list[UrlRecord]:
    """The rows of a webtable scan that belong to frontier key ``key`` (``s:host``): a host's
    row prefixes also hold its other shards' rows."""
    out = []
    for row_key_, cells in rows:
        record = url_record(row_key_, cells)
        if record is not None and record.key == key:
            out.append(record)
    return out


class StoreSpec(Protocol):
    """A picklable description of a store, opened in a DoFn's ``setup``."""

    def open(self) -> Any: ...
