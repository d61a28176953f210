"""Which of a lease's pages the crawl has seen under another URL already (pure, over the store).

A page's links to its own key join that key's queue when the lease is harvested, before the
duplicate judgement (``transforms.duplicates``, keyed by content, downstream) has seen the
page. The judgement drops a duplicate's links (unless ``--follow_duplicate_links``): a mirror's
links are its original's, and a DUST permutation's links are more permutations. So before the
harvest, each page's content is looked up, and the links of a page whose content is known
under another URL go the judged way instead of straight to the queue.

Where the content is looked up:

* this process's recent contents (:class:`RecentContent`: content key -> the first URL seen
  with it), which covers the seconds between a page's fetch and its ``dedup`` row, when two
  copies are fetched close together (a lease of permutations, a mirror crawled alongside);
* the ``dedup`` table (``d#<content key>``, one read per lease), which covers earlier jobs,
  other workers and pages this process has forgotten.

A copy missed by both (two workers fetching copies in the same second) only has its links
admitted early; the judgement still records it as a duplicate. A page found a copy wrongly
(its content's row names another URL that turns out to be itself after a redirect) only has
its links take the loop, as before this check existed. An unreadable table counts every page
as a copy (of an unknown URL, ""): the links take the loop, where nothing is decided without
the judgement.

A copy whose first URL is of the same key and differs only in the order of its query
parameters, or in one parameter, is also DUST evidence for the key
(``transforms.core.dust.rule_between``), which the harvest takes at once: the key learns to
stop fetching permutations a lease after they show, not a trip through the loop later.
"""

from __future__ import annotations

from collections.abc import Sequence

from transforms.core.bounded import BoundedLru
from transforms.formats.digest_rows import digest_row_key, record_from_cells
from transforms.frontier.store import FrontierStore

RECENT_CONTENTS = 20_000  # content keys remembered per process (about 5 MB)


class RecentContent(BoundedLru[str, str]):
    """Content key -> the first URL this process saw with it, for the last ``capacity``
    contents (least recently seen forgotten first). Thread-safe: leases run on several
    threads.

    Bound: ``capacity`` entries of a content key (~45 characters) and a URL.
    """

    def __init__(self, capacity: int = RECENT_CONTENTS) -> None:
        super().__init__(capacity)

    def first(self, key: str, url: str) -> str:
        """The first URL seen with ``key``: ``url`` itself when the key is new (it is then
        remembered)."""
        return self.setdefault(key, url)


class CopyCheck:
    """``check(pages)``: of ``pages`` (URL, content key) in fetch order, the URLs whose
    content was first seen under another URL, with that URL (see the module docstring)."""

    def __init__(self, store: FrontierStore, table: str, recent: RecentContent) -> None:
        self._store, self._table, self._recent = store, table, recent

    def __call__(self, pages: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        if not pages:
            return ()
        unknown = list(dict.fromkeys(key for _, key in pages if self._recent.get(key) is None))
        try:
            rows = self._store.read_rows(self._table, [digest_row_key(k) for k in unknown]) \
                if unknown else {}
        except Exception:  # unreadable: every page takes the judged way
            return tuple((url, "") for url, _ in pages)
        copies = []
        for url, key in pages:
            record = record_from_cells(rows.get(digest_row_key(key))) if key in unknown \
                else None
            first = self._recent.first(key, record.original if record is not None else url)
            if first != url:
                copies.append((url, first))
        return tuple(copies)
