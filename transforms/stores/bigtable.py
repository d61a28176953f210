"""The frontier's tables on Bigtable (``transforms.frontier.store.FrontierStore``) and the row
writer the pipeline's sinks share.

Blocking calls of the ``google-cloud-bigtable`` data client; the frontier makes its reads from
the fetch service's threads and its writes at the end of a bundle, so the runner's thread never
waits on a scan. Works against the Bigtable emulator through ``BIGTABLE_EMULATOR_HOST``.

Reads ask for the newest cell of each column only, and a rebuild reads only the ``f`` and ``s``
families of a host's rows. Writes are ``MutateRows`` calls of the data client, per table in the
order ``StoreBatch`` documents (split under Bigtable's limit of mutations per call); a call
that fails raises, so the bundle is retried and nothing is acknowledged before it is durable.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from google.cloud import bigtable
from google.cloud.bigtable import row_filters
from google.cloud.bigtable.data import BigtableDataClient
from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup
from google.cloud.bigtable.data.mutations import DeleteAllFromRow, RowMutationEntry, SetCell
from google.cloud.bigtable.row_set import RowRange, RowSet

from transforms.core.records import UrlRecord
from transforms.formats.index import entry_cells
from transforms.formats.index import key_prefix as index_prefix
from transforms.formats.rowkeys import host_row_prefixes, row_key
from transforms.formats.rows import (
    Row,
    robots_from_host_cells,
    url_record,
    url_rules_from_host_cells,
)
from transforms.formats.schema import (
    BATCHES_TABLE,
    DEADLETTER_TABLE,
    DEDUP_TABLE,
    FETCH_FAMILY,
    FRONTIER_TABLE,
    HOST_FAMILY,
    HOSTS_TABLE,
    INDEX_FAMILY,
    PENDING_COLUMN,
    SCHEDULE_FAMILY,
    WEBTABLE,
)
from transforms.frontier.store import (
    Cells,
    IndexPage,
    RebuildPage,
    StoreBatch,
    key_records,
    scan_index,
)


class StoreWriteError(RuntimeError):
    """Some mutations of a write were not applied."""


# Bigtable refuses a MutateRows call of more than 100,000 mutations (one per cell set or row
# deleted); a bundle that admits thousands of URLs writes more than that to one table.
MAX_MUTATIONS_PER_CALL = 50_000


def mutation_chunks(sizes: Sequence[int], limit: int = MAX_MUTATIONS_PER_CALL
                    ) -> list[tuple[int, int]]:
    """``(start, end)`` ranges of consecutive rows whose mutation counts (``sizes``) add up to
    at most ``limit`` each (a row bigger than ``limit`` alone in its range), in order."""
    chunks: list[tuple[int, int]] = []
    start = total = 0
    for i, size in enumerate(sizes):
        if total and total + size > limit:
            chunks.append((start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        chunks.append((start, len(sizes)))
    return chunks


@dataclass(frozen=True)
class BigtableStoreSpec:
    """Where the tables are; picklable, so a DoFn carries it and opens the store in ``setup``."""

    project: str
    instance: str
    webtable: str = WEBTABLE
    hosts: str = HOSTS_TABLE
    frontier: str = FRONTIER_TABLE
    deadletter: str = DEADLETTER_TABLE
    batches: str = BATCHES_TABLE
    dedup: str = DEDUP_TABLE

    def open(self) -> BigtableStore:
        """The process-wide store of this spec: the frontier's DoFns, its reads on the fetch
        service's threads and the sinks share one client, which lives as long as the process
        (runners set DoFns up and tear them down often; a read may still be running)."""
        with _STORES_LOCK:
            store = _STORES.get(self)
            if store is None:
                store = _STORES[self] = BigtableStore(self)
            return store


_STORES: dict[BigtableStoreSpec, BigtableStore] = {}
_STORES_LOCK = threading.Lock()


def to_mutation_entry(row: Row) -> RowMutationEntry:
    """A Bigtable mutation for a row: one cell per column, each at the event time
    (millisecond grain, as Bigtable keeps it).

    Built with the data client's types: the legacy ``DirectRow`` makes a protobuf per cell
    that ``Table.mutate_rows`` then converts into these, which cost 1.4x as much.
    """
    micros = int(row.at * 1000) * 1000
    return RowMutationEntry(row.key.encode("utf-8"), [
        SetCell(family, column, value, micros)
        for family, columns in row.cells.items() for column, value in columns.items()])


def _delete(key: str) -> RowMutationEntry:
    return RowMutationEntry(key.encode("utf-8"), [DeleteAllFromRow()])


def _cells(row: Any) -> Cells:
    return {family: {column.decode(): values[0].value.decode("utf-8", "replace")
                     for column, values in columns.items()}
            for family, columns in row.cells.items()}


_LATEST = row_filters.CellsColumnLimitFilter(1)


class BigtableStore:
    """``FrontierStore`` on Bigtable; also writes any table's rows for the pipeline's sinks."""

    def __init__(self, spec: BigtableStoreSpec) -> None:
        self.spec = spec
        names = (spec.webtable, spec.hosts, spec.frontier, spec.deadletter, spec.batches,
                 spec.dedup)
        self._client = bigtable.Client(project=spec.project, admin=False)
        instance = self._client.instance(spec.instance)
        self._tables = {name: instance.table(name) for name in names}
        self._data = BigtableDataClient(project=spec.project)
        self._writers = {name: self._data.get_table(spec.instance, name) for name in names}

    def close(self) -> None:
        """Nothing: the store is shared by the process (``BigtableStoreSpec.open``)."""

    # -- writing ---------------------------------------------------------------------------

    def mutate(self, table: str, entries: Sequence[RowMutationEntry]) -> None:
        """Applies ``entries`` to ``table``, in calls of at most ``MAX_MUTATIONS_PER_CALL``
        mutations, in order; raises ``StoreWriteError`` if any failed."""
        for start, end in mutation_chunks([len(e.mutations) for e in entries]):
            part = list(entries[start:end])
            try:
                self._writers[table].bulk_mutate_rows(part)
            except MutationsExceptionGroup as exc:
                first = exc.exceptions[0] if exc.exceptions else exc
                raise StoreWriteError(f"{len(exc.exceptions)} of {len(part)} row mutations of "
                                      f"{table} failed, e.g. {first}") from exc

    def write_rows(self, table: str, rows: Iterable[Row]) -> None:
        self.mutate(table, [to_mutation_entry(r) for r in rows])

    def write(self, batch: StoreBatch) -> None:
        spec = self.spec
        self.write_rows(spec.frontier, [Row(e.row_key, {INDEX_FAMILY: entry_cells(e)},
                                            e.eligible_at) for e in batch.index_puts])
        self.write_rows(spec.webtable, batch.rows)
        self.write_rows(spec.batches, batch.batch_rows)
        self.write_rows(spec.hosts, batch.host_rows)
        self.mutate(spec.frontier, [_delete(k) for k in batch.index_deletes])

    # -- reading ---------------------------------------------------------------------------

    def read_row(self, table: str, key: str) -> Cells | None:
        row = self._tables[table].read_row(key.encode("utf-8"), filter_=_LATEST)
        return None if row is None else _cells(row)

    def read_rows(self, table: str, keys: Sequence[str]) -> dict[str, Cells]:
        if not keys:
            return {}
        row_set = RowSet()
        for key in dict.fromkeys(keys):
            row_set.add_row_key(key.encode("utf-8"))
        return {row.row_key.decode(): _cells(row)
                for row in self._tables[table].read_rows(row_set=row_set, filter_=_LATEST)}

    def scan_rows(self, table: str, family: str) -> list[tuple[str, Cells]]:
        only = row_filters.RowFilterChain([
            row_filters.FamilyNameRegexFilter(f"^{family}$"), _LATEST])
        return [(row.row_key.decode(), _cells(row))
                for row in self._tables[table].read_rows(filter_=only)]

    def url_records(self, urls: Sequence[str]) -> dict[str, UrlRecord]:
        if not urls:
            return {}
        keys = {row_key(u): u for u in urls}
        row_set = RowSet()
        for key in keys:
            row_set.add_row_key(key.encode())
        out = {}
        for row in self._tables[self.spec.webtable].read_rows(row_set=row_set, filter_=_LATEST):
            key = row.row_key.decode()
            record = url_record(key, _cells(row))
            if record is not None and key in keys:
                out[keys[key]] = record
        return out

    def index_page(self, key: str, limit: int, skip: frozenset[bytes], now: float,
                   scan_limit: int, incarnation: str = "", after: str | None = None
                   ) -> IndexPage:
        prefix = index_prefix(key).encode()
        # The smallest key above ``after`` is ``after`` followed by a zero byte.
        start = prefix if after is None else after.encode() + b"\x00"
        rows = self._tables[self.spec.frontier].read_rows(
            start_key=start, end_key=prefix[:-1] + bytes([prefix[-1] + 1]), limit=scan_limit,
            filter_=_LATEST)
        return scan_index(((r.row_key.decode(), _cells(r)) for r in rows), limit, skip, now,
                          scan_limit, incarnation)

    def rebuild_page(self, key: str, after: str | None, limit: int, first: bool,
                     index_limit: int, now: float) -> RebuildPage:
        row_set = RowSet()
        for prefix in host_row_prefixes(key.split("#", 1)[0]):
            end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
            if after is not None and after >= end:
                continue
            if after is not None and after >= prefix:
                row_set.add_row_range(RowRange(start_key=after.encode(), end_key=end.encode(),
                                               start_inclusive=False))
            else:
                row_set.add_row_range(RowRange(start_key=prefix.encode(), end_key=end.encode()))
        families = row_filters.FamilyNameRegexFilter(f"^({FETCH_FAMILY}|{SCHEDULE_FAMILY})$")
        rows = []
        if row_set.row_ranges:
            for row in self._tables[self.spec.webtable].read_rows(
                    row_set=row_set, limit=limit + 1,
                    filter_=row_filters.RowFilterChain([families, _LATEST])):
                rows.append((row.row_key.decode(), _cells(row)))
        more = len(rows) > limit
        rows = rows[:limit]
        robots = index = None
        rules: tuple[str, ...] = ()
        if first:
            host = self._tables[self.spec.hosts].read_row(key.encode(), filter_=_LATEST)
            if host is not None:
                robots = robots_from_host_cells(_cells(host).get(HOST_FAMILY, {}))
                rules = url_rules_from_host_cells(_cells(host).get(HOST_FAMILY, {}))
            index = self.index_page(key, index_limit, frozenset(), now, 4 * index_limit)
        return RebuildPage(tuple(key_records(key, rows)), rows[-1][0] if more else None,
                           robots, index, rules)

    def pending_keys(self) -> list[str]:
        marked = row_filters.RowFilterChain([
            row_filters.ColumnQualifierRegexFilter(f"^{PENDING_COLUMN}$".encode()), _LATEST,
            row_filters.ValueRegexFilter(b"^1$")])
        return [row.row_key.decode()
                for row in self._tables[self.spec.hosts].read_rows(filter_=marked)]
