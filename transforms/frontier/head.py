"""A key's head: the first pending URLs of its index, in fetch order (pure).

The head is bounded (``FrontierConfig.head_size``); what does not fit stays in the frontier
index, where a later refill reads it back, so nothing is lost by trimming it.
"""

from __future__ import annotations

from collections.abc import Iterable

from transforms.frontier.state import HeadEntry


def merge_head(head: Iterable[HeadEntry], new: Iterable[HeadEntry], size: int
               ) -> tuple[list[HeadEntry], int]:
    """The head after adding ``new`` entries: at most ``size`` entries in fetch order, one per
    URL (an entry already in the head wins over a new one for the same URL).

    Returns:
        (the new head, how many entries did not fit). Entries that do not fit stay in the
        frontier index, where a later refill finds them; nothing is lost.
    """
    by_url: dict[str, HeadEntry] = {}
    for entry in head:
        by_url.setdefault(entry.request.url, entry)
    for entry in new:
        by_url.setdefault(entry.request.url, entry)
    ordered = sorted(by_url.values(), key=HeadEntry.order)
    return ordered[:size], max(0, len(ordered) - size)


def push_front(head: list[HeadEntry], entries: Iterable[HeadEntry]) -> list[HeadEntry]:
    """The head with ``entries`` (given back by a lease, or retries) ahead of everything (in
    rank order among themselves); they may exceed the head's size briefly."""
    front = [e._replace(front=True) for e in entries]
    urls = {e.request.url for e in front}
    return sorted(front + [e for e in head if e.request.url not in urls], key=HeadEntry.order)
