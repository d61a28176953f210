"""``BoundedLru``: a thread-safe mapping that forgets its least recently used entries.

The per-process caches of long-running stages (the duplicate stages' recently written rows, the
contents the leases saw) are built on it, so that none of them grows with the crawl: each
holds at most ``capacity`` entries, whatever the number of pages, hosts or contents seen.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLru(Generic[K, V]):
    """At most ``capacity`` entries; ``get`` and ``put`` make an entry the most recent.
    Thread-safe (a DoFn's instances may share one per process)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            self._evict()

    def setdefault(self, key: K, value: V) -> V:
        """The entry of ``key``, made ``value`` when there is none; either way the most
        recent."""
        with self._lock:
            known = self._items.get(key)
            if known is not None:
                self._items.move_to_end(key)
                return known
            self._items[key] = value
            self._evict()
            return value

    def _evict(self) -> None:
        """Called with the lock held: forgets the least recent entries beyond ``capacity``."""
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)


_SHARED: dict[tuple[str, ...], BoundedLru] = {}
_SHARED_LOCK = threading.Lock()


def shared_lru(name: tuple[str, ...], capacity: int) -> BoundedLru:
    """The process's one ``BoundedLru`` called ``name`` (e.g. a stage and its table), made with
    ``capacity`` on first use: DoFn instances of one step in one process see the same entries."""
    with _SHARED_LOCK:
        lru = _SHARED.get(name)
        if lru is None:
            lru = _SHARED[name] = BoundedLru(capacity)
        return lru
