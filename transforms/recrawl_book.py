"""``RecrawlBook``: what a host's frontier remembers about the URLs it fetched, and when each is
due again.

Pure Python, no Beam import; time is injected. The frontier (``transforms.hostcore``) keeps one
book per host in its keyed state and

* records every response (:meth:`RecrawlBook.record`) with the :class:`~transforms.recrawl.
  FetchHistory` that ``transforms.recrawl.update_history`` computed: validators for the next
  conditional GET, the checksum, the interval and the next fetch time;
* asks it, when a URL is submitted again, whether the URL is still fresh (then it is not
  fetched, and its outcome is ``fresh``) or due;
* takes the due URLs out (:meth:`RecrawlBook.pop_due`) from its own timer, so recrawls are
  driven by the host's timer and need no re-publishing: the host's timer wakes at
  :meth:`RecrawlBook.next_due` when nothing else is queued.

Bounds: at most ``capacity`` URLs (the host's page budget is the natural cap; a URL past the
capacity is fetched once and not scheduled again, counted as ``recrawl_book_full``). An entry is
a flat tuple of primitives (about 150 bytes pickled) rather than nested dataclasses, because the
whole book is pickled in and out of state once per lease.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from transforms.records import CrawlRequest
from transforms.recrawl import FetchHistory, Validators, conditional_headers

# One entry: url, depth, priority, discovered_from, fetched_at, checksum, etag, last_modified,
# interval, next_fetch_at, kind, via.
_Entry = tuple[str, int, int, "str | None", float, "str | None", "str | None", "str | None",
               float, float, str, "str | None"]


@dataclass(frozen=True)
class BookEntry:
    """A fetched URL's request (as first accepted) and its fetch history."""

    request: CrawlRequest
    history: FetchHistory

    def recrawl_request(self) -> CrawlRequest:
        """The request that fetches the URL again: conditional on the stored validators, with
        a fresh attempt count."""
        return CrawlRequest(self.request.url, self.request.depth, self.request.priority,
                            self.request.discovered_from, attempt=0,
                            conditional=tuple(conditional_headers(
                                self.history.validators).items()),
                            kind=self.request.kind, via=self.request.via)


class RecrawlBook:
    """The fetch histories of one host's URLs, keyed by URL fingerprint, with a due-time heap.

    A URL taken out by :meth:`pop_due` (or :meth:`mark_scheduled`) is *scheduled*: it is in the
    host's queue, and neither :meth:`pop_due` nor a resubmission schedules it again until its
    next :meth:`record` or :meth:`reschedule`.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._entries: dict[bytes, _Entry] = {}
        self._heap: list[tuple[float, bytes]] = []  # (next_fetch_at, fingerprint), lazily valid
        self._scheduled: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, fingerprint: bytes) -> BookEntry | None:
        """The entry of a URL, or None if it was never recorded."""
        raw = self._entries.get(fingerprint)
        if raw is None:
            return None
        (url, depth, priority, source, fetched_at, checksum, etag, modified, interval, due, kind,
         via) = raw
        return BookEntry(CrawlRequest(url, depth, priority, source, kind=kind, via=via),
                         FetchHistory(fetched_at, checksum, Validators(etag, modified),
                                      interval, due))

    def is_scheduled(self, fingerprint: bytes) -> bool:
        return fingerprint in self._scheduled

    def record(self, fingerprint: bytes, request: CrawlRequest, history: FetchHistory) -> bool:
        """Stores a URL's history after a response and schedules its next fetch.

        Returns:
            False (and stores nothing) when the book is full and the URL is new.
        """
        if fingerprint not in self._entries and len(self._entries) >= self.capacity:
            self._scheduled.discard(fingerprint)
            return False
        v = history.validators
        self._entries[fingerprint] = (
            request.url, request.depth, request.priority, request.discovered_from,
            history.fetched_at, history.checksum, v.etag, v.last_modified, history.interval,
            history.next_fetch_at, request.kind, request.via)
        self._scheduled.discard(fingerprint)
        heapq.heappush(self._heap, (history.next_fetch_at, fingerprint))
        return True

    def reschedule(self, fingerprint: bytes, now: float) -> bool:
        """After a recrawl that got no response: due again one interval from ``now``, history
        otherwise unchanged. Returns False for a URL not in the book."""
        raw = self._entries.get(fingerprint)
        if raw is None:
            return False
        due = now + raw[8]
        self._entries[fingerprint] = (*raw[:9], due, *raw[10:])
        self._scheduled.discard(fingerprint)
        heapq.heappush(self._heap, (due, fingerprint))
        return True

    def mark_scheduled(self, fingerprint: bytes) -> None:
        """Marks a URL as queued for its recrawl (a resubmission that found it due)."""
        if fingerprint in self._entries:
            self._scheduled.add(fingerprint)

    def pop_due(self, now: float, limit: int) -> list[BookEntry]:
        """Takes out up to ``limit`` URLs whose next fetch time has come, earliest first, and
        marks them scheduled."""
        due: list[BookEntry] = []
        while self._heap and len(due) < limit and self._heap[0][0] <= now:
            at, fingerprint = heapq.heappop(self._heap)
            raw = self._entries.get(fingerprint)
            if raw is None or raw[9] != at or fingerprint in self._scheduled:
                continue  # superseded by a later record, or already queued
            entry = self.get(fingerprint)
            assert entry is not None
            self._scheduled.add(fingerprint)
            due.append(entry)
        return due

    def next_due(self) -> float | None:
        """The earliest next fetch time of a URL that is not scheduled, or None."""
        while self._heap:
            at, fingerprint = self._heap[0]
            raw = self._entries.get(fingerprint)
            if raw is not None and raw[9] == at and fingerprint not in self._scheduled:
                return at
            heapq.heappop(self._heap)  # stale: drop it for good
        return None
