"""A key's state cells as the frontier reads and writes them, without Beam.

``FrontierCells`` wraps the seven state cells of a key (anything with Beam's
``read``/``write``/``add``/``clear`` methods: Beam's state objects in ``transforms.host_frontier``,
plain objects in tests), decodes them lazily for ``HostCore`` and writes back, after a step,
exactly the cells the step changed (``write``): the ``host`` cell always, the head when it
changed, arrivals and inbox as bag appends, robots.txt when it changed, and of the seen filter
only its newest stage plus the stages frozen since the last write.

The parsed seen filters live in a process-wide cache (:class:`SeenCache`), tagged with the
``seen_version`` of the state they match, so an element does not read and parse the filter
from state; any mismatch (another worker wrote the key, a checkpoint was restored, a step
failed) reloads it from the cells.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Protocol

from transforms.core.bloom import ScalableBloomFilter
from transforms.core.robots import RobotsRules
from transforms.frontier.context import Effects, FrontierConfig
from transforms.frontier.hostcore import HostCore
from transforms.frontier.state import (
    HeadEntry,
    InboxBatch,
    decode_head,
    decode_host_state,
    decode_inbox,
    decode_robots,
    encode_head,
    encode_host_state,
    encode_inbox,
    encode_robots,
)


class ValueCell(Protocol):
    def read(self) -> Any: ...

    def write(self, value: Any) -> None: ...

    def clear(self) -> None: ...


class BagCell(Protocol):
    def read(self) -> Any: ...

    def add(self, value: Any) -> None: ...

    def clear(self) -> None: ...


class MemoryCell:
    """A value cell kept in memory (benchmarks, tools and tests drive ``FrontierCells`` with
    these; the pipeline uses Beam's state)."""

    def __init__(self) -> None:
        self.value: Any = None

    def read(self) -> Any:
        return self.value

    def write(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class MemoryBag:
    """A bag cell kept in memory."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def read(self) -> list[Any]:
        return list(self.items)

    def add(self, value: Any) -> None:
        self.items.append(value)

    def clear(self) -> None:
        self.items = []


def memory_cells(cache: SeenCache | None = None) -> FrontierCells:
    """A key's seven cells, empty, in memory."""
    return FrontierCells(MemoryCell(), MemoryCell(), MemoryCell(), MemoryBag(), MemoryBag(),
                         MemoryCell(), MemoryBag(), cache=cache if cache is not None else
                         SeenCache())


class SeenCache:
    """Parsed seen filters by key, each tagged with the ``seen_version`` it matches, bounded to
    ``max_bytes`` in all (least recently used first out). A filter handed out is removed until
    it is put back after its step succeeded, so a failed step can never leave a filter that is
    ahead of the state behind."""

    def __init__(self, max_bytes: int = 256 * 1024 * 1024) -> None:
        self._max = max_bytes
        self._items: collections.OrderedDict[str, tuple[str, ScalableBloomFilter]] = (
            collections.OrderedDict())
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def take(self, key: str, version: str) -> ScalableBloomFilter | None:
        with self._lock:
            item = self._items.pop(key, None)
            if item is None:
                return None
            self._bytes -= item[1].size_bytes
            return item[1] if item[0] == version else None

    def put(self, key: str, version: str, seen: ScalableBloomFilter) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1].size_bytes
            self._items[key] = (version, seen)
            self._bytes += seen.size_bytes
            while self._bytes > self._max and len(self._items) > 1:
                _, (_, evicted) = self._items.popitem(last=False)
                self._bytes -= evicted.size_bytes


SEEN_CACHE = SeenCache()


class FrontierCells:
    """The state cells of one key for one step."""

    def __init__(self, host: ValueCell, robots: ValueCell, head: ValueCell, arrivals: BagCell,
                 inbox: BagCell, seen: ValueCell, seen_frozen: BagCell,
                 cache: SeenCache = SEEN_CACHE) -> None:
        self.host, self.robots, self.head = host, robots, head
        self.arrivals, self.inbox = arrivals, inbox
        self.seen, self.seen_frozen = seen, seen_frozen
        self.cache = cache

    def core(self, config: FrontierConfig, key: str) -> HostCore:
        """A ``HostCore`` over these cells (decoded on first use)."""
        raw = self.host.read()
        state = decode_host_state(raw) if raw else None
        version = state.seen_version if state is not None else ""

        def load_seen() -> ScalableBloomFilter | None:
            cached = self.cache.take(key, version)
            if cached is not None:
                return cached
            head = self.seen.read()
            if not head:
                return None
            return ScalableBloomFilter.from_parts(head, list(self.seen_frozen.read()))

        return HostCore(config, state, key, head=self.load_head, robots=self.load_robots,
                        seen=load_seen, arrivals=self.load_arrivals, inbox=self.load_inbox)

    def load_head(self) -> list[HeadEntry]:
        raw = self.head.read()
        return decode_head(raw) if raw else []

    def load_robots(self) -> RobotsRules | None:
        raw = self.robots.read()
        return decode_robots(raw) if raw else None

    def load_arrivals(self) -> list[HeadEntry]:
        return [entry for blob in self.arrivals.read() for entry in decode_head(blob)]

    def load_inbox(self) -> list[InboxBatch]:
        return [decode_inbox(blob) for blob in self.inbox.read()]

    def write(self, key: str, core: HostCore, fx: Effects) -> int:
        """Writes the cells the step changed, the ``host`` cell last; returns bytes written."""
        ctx, hs = core.ctx, core.state
        written = 0
        if ctx.arrivals_merged:
            self.arrivals.clear()
        if fx.arrivals:
            blob = encode_head(fx.arrivals)
            self.arrivals.add(blob)
            written += len(blob)
        if fx.clear_inbox:
            self.inbox.clear()
        for batch in fx.inbox:
            blob = encode_inbox(batch)
            self.inbox.add(blob)
            written += len(blob)
        if ctx.head_changed:
            blob = encode_head(ctx.head)
            self.head.write(blob)
            written += len(blob)
        if ctx.robots_changed:
            rules = ctx.robots
            if rules is None:
                self.robots.clear()
            else:
                blob = encode_robots(rules)
                self.robots.write(blob)
                written += len(blob)
        if ctx.seen_loaded:
            seen = ctx.seen
            if ctx.seen_changed:
                head, frozen = seen.to_parts()
                if ctx.seen_reset:
                    self.seen_frozen.clear()  # a new filter (a rebuild): start the bag again
                    hs.seen_frozen = 0
                for blob in frozen[hs.seen_frozen:]:
                    self.seen_frozen.add(blob)
                    written += len(blob)
                hs.seen_frozen = len(frozen)
                self.seen.write(head)
                written += len(head)
            self.cache.put(key, hs.seen_version, seen)
        hs.count("state_bytes", written)
        host = encode_host_state(hs)
        self.host.write(host)
        return written + len(host)
