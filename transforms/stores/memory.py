"""The frontier's tables in memory: ``MemoryFrontierStore`` (``transforms.frontier.store.
FrontierStore``) for tests, benchmarks and the frontier driver. It is not a mock: it applies the
same row formats, cell timestamps and write order as the Bigtable store
(``transforms.stores.bigtable``)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from transforms.core.records import UrlRecord
from transforms.formats.index import entry_cells, entry_from_cells
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
    FETCH_FAMILY,
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

_MEMORY_STORES: dict[str, MemoryFrontierStore] = {}
_MEMORY_LOCK = threading.Lock()


@dataclass(frozen=True)
class MemoryStoreSpec:
    """A :class:`MemoryFrontierStore` by name: every DoFn of a process that opens the same name
    shares one store (tests read it back with :func:`memory_store`)."""

    name: str

    def open(self) -> MemoryFrontierStore:
        return memory_store(self.name)


def memory_store(name: str) -> MemoryFrontierStore:
    with _MEMORY_LOCK:
        store = _MEMORY_STORES.get(name)
        if store is None:
            store = _MEMORY_STORES[name] = MemoryFrontierStore()
        return store


class MemoryFrontierStore:
    """The three tables in memory, with Bigtable's semantics where the frontier relies on them:
    rows sorted by key, the newest cell by timestamp wins, writes in :class:`StoreBatch` order.

    Thread-safe: the fetch service reads it from its threads while a bundle writes.
    """

    def __init__(self) -> None:
        self.webtable: dict[str, dict[str, dict[str, tuple[float, str]]]] = {}
        self.index: dict[str, Cells] = {}
        self.hosts: dict[str, dict[str, dict[str, tuple[float, str]]]] = {}
        self.other: dict[str, dict[str, dict[str, dict[str, tuple[float, str]]]]] = {}
        self.writes = 0
        self._lock = threading.Lock()

    # -- writing ---------------------------------------------------------------------------------

    def write(self, batch: StoreBatch) -> None:
        with self._lock:
            self.writes += 1
            for entry in batch.index_puts:
                self.index[entry.row_key] = {INDEX_FAMILY: entry_cells(entry)}
            for row in batch.rows:
                _put(self.webtable, row)
            for row in batch.batch_rows:
                _put(self.other.setdefault(BATCHES_TABLE, {}), row)
            for row in batch.host_rows:
                _put(self.hosts, row)
            for key in batch.index_deletes:
                self.index.pop(key, None)

    def write_rows(self, table: str, rows: Iterable[Row]) -> None:
        """Rows written by the pipeline's sinks: the webtable, the hosts table, or another
        table by name (dead letters)."""
        with self._lock:
            target = (self.webtable if table == WEBTABLE else self.hosts if table == HOSTS_TABLE
                      else self.other.setdefault(table, {}))
            for row in rows:
                _put(target, row)

    def close(self) -> None:
        """Nothing to release; the store lives as long as the process (tests read it back)."""

    # -- reading ---------------------------------------------------------------------------------

    def _table(self, table: str) -> dict[str, dict[str, dict[str, tuple[float, str]]]]:
        return (self.webtable if table == WEBTABLE else self.hosts if table == HOSTS_TABLE
                else self.other.setdefault(table, {}))

    def read_row(self, table: str, key: str) -> Cells | None:
        with self._lock:
            return self.latest(self._table(table), key) or None

    def read_rows(self, table: str, keys: Sequence[str]) -> dict[str, Cells]:
        with self._lock:
            rows = self._table(table)
            return {key: cells for key in keys if (cells := self.latest(rows, key))}

    def scan_rows(self, table: str, family: str) -> list[tuple[str, Cells]]:
        with self._lock:
            rows = self._table(table)
            return [(key, {family: cells[family]}) for key in sorted(rows)
                    if (cells := self.latest(rows, key)).get(family)]

    def latest(self, table: dict[str, dict[str, dict[str, tuple[float, str]]]], key: str
               ) -> Cells:
        return {family: {column: value for column, (_, value) in columns.items()}
                for family, columns in table.get(key, {}).items()}

    def url_records(self, urls: Sequence[str]) -> dict[str, UrlRecord]:
        with self._lock:
            out = {}
            for url in urls:
                key = row_key(url)
                if key in self.webtable:
                    record = url_record(key, self.latest(self.webtable, key))
                    if record is not None:
                        out[url] = record
            return out

    def index_page(self, key: str, limit: int, skip: frozenset[bytes], now: float,
                   scan_limit: int, incarnation: str = "", after: str | None = None
                   ) -> IndexPage:
        prefix = index_prefix(key)
        with self._lock:
            rows = sorted((k, v) for k, v in self.index.items()
                          if k.startswith(prefix) and (after is None or k > after))
        return scan_index(rows, limit, skip, now, scan_limit, incarnation)

    def rebuild_page(self, key: str, after: str | None, limit: int, first: bool,
                     index_limit: int, now: float) -> RebuildPage:
        prefixes = host_row_prefixes(key.split("#", 1)[0])
        with self._lock:
            keys = sorted(k for k in self.webtable if k.startswith(prefixes)
                          and (after is None or k > after))
            page = keys[:limit]
            rows = [(k, self.latest(self.webtable, k)) for k in page]
            host_cells = self.latest(self.hosts, key).get(HOST_FAMILY, {})
            robots = robots_from_host_cells(host_cells) if first else None
            rules = url_rules_from_host_cells(host_cells) if first else ()
        index = self.index_page(key, index_limit, frozenset(), now, 4 * index_limit) if first \
            else None
        next_after = page[-1] if len(keys) > limit else None
        return RebuildPage(tuple(key_records(key, rows)), next_after, robots, index, rules)

    def pending_keys(self) -> list[str]:
        with self._lock:
            return sorted(k for k in self.hosts
                          if self.latest(self.hosts, k).get(HOST_FAMILY, {}).get(
                              PENDING_COLUMN) == "1")

    # -- for tests and the inspection commands ---------------------------------------------------

    def status(self, url: str) -> str | None:
        with self._lock:
            return self.latest(self.webtable, row_key(url)).get(FETCH_FAMILY, {}).get("outcome")

    def index_urls(self, key: str) -> list[str]:
        prefix = index_prefix(key)
        with self._lock:
            return [entry_from_cells(k, v[INDEX_FAMILY]).request.url
                    for k, v in sorted(self.index.items()) if k.startswith(prefix)]

    def schedule(self, url: str) -> Cells:
        with self._lock:
            return {SCHEDULE_FAMILY: self.latest(self.webtable, row_key(url)).get(
                SCHEDULE_FAMILY, {})}


def _put(table: dict[str, dict[str, dict[str, tuple[float, str]]]], row: Row) -> None:
    stored = table.setdefault(row.key, {})
    for family, columns in row.cells.items():
        target = stored.setdefault(family, {})
        for column, value in columns.items():
            old = target.get(column)
            if old is None or row.at >= old[0]:
                target[column] = (row.at, value)
