"""The frontier index: every URL a host still has to fetch, durable, in the order it is fetched
(pure encoding; no Bigtable client).

The webtable says what each URL *is*; the index says what each frontier key still has to *do*.
It is a Bigtable table (``frontier``) with one row per pending piece of work:

    <frontier key>|<rank>|<seq>|<fingerprint>    q:v = the entry (JSON: request, eligible at, ...)

* a URL accepted by the frontier gets its entry when it is queued (written before its
  ``queued`` row, and both before the frontier's state refers to it), a fetched URL's entry is
  deleted only once its terminal row is durable, and a URL that got a response gets a new entry
  for its next fetch time (a *recrawl*), so the index holds every non-terminal URL and every
  scheduled revisit; nothing a user asked for lives only in runner memory;
* between a fetch and its durable row (the page waits for its WARC file) the entry is *held*:
  rewritten with the holding state's incarnation and a time (``q:h``, ``q:u``), and a refill of
  that same incarnation passes it. An entry held by another incarnation (a key rebuilt after a
  crash, whose sink died with it) or held past its time is work again, and the lease's check
  of the URL's row decides whether it is fetched;
* rows of one key sort by *rank*: ``transforms.core.schedule.queue_rank`` of the request, computed
  with the time the entry becomes eligible (now for new URLs, ``s:next_fetch`` for recrawls),
  so a prefix scan returns work in the order it should be done: breadth-first, priorities
  first, aged, and recrawls in due order after the work of today;
* the frontier's state holds only a bounded *head* of it (``transforms.frontier.state``),
  refilled by reading the first rows of the key's range, so a host can have millions of pending
  URLs at a constant cost per page.

The row key's ``|`` cannot occur in a frontier key (a host, ``host:port`` or ``host#shard``).
Ranks are written fixed-width with an offset, so the byte order of keys is the rank order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from transforms.core.records import CrawlRequest
from transforms.core.url_keys import url_fingerprint
from transforms.formats.messages import request_from_item, request_to_item

SEPARATOR = "|"
_RANK_OFFSET = 1_000_000_000.0  # ranks are above -1e9: priorities are bounded by the policy
_RANK_MAX = 9_999_999_999.0


@dataclass(frozen=True)
class IndexEntry:
    """One pending piece of work of a frontier key.

    Attributes:
        key: the frontier key.
        rank: its place in the key's order (lower first).
        request: what to fetch.
        eligible_at: when it may be fetched (seconds since the epoch); later than now for a
            scheduled recrawl.
    """

    key: str
    rank: float
    request: CrawlRequest
    eligible_at: float
    seq: int = 0
    held_by: str = ""  # the incarnation of the key's state that holds it (see above)
    held_until: float = 0.0

    def held(self, incarnation: str, now: float) -> bool:
        """Whether a refill by ``incarnation`` at ``now`` passes this entry."""
        return bool(self.held_by) and self.held_by == incarnation and now < self.held_until

    @property
    def row_key(self) -> str:
        return index_row_key(self.key, self.rank, self.request.url, self.seq)


def _rank_text(rank: float) -> str:
    value = min(max(rank + _RANK_OFFSET, 0.0), _RANK_MAX)
    return f"{value:017.6f}"


def key_prefix(key: str) -> str:
    """The prefix of every index row of ``key``."""
    if SEPARATOR in key:
        raise ValueError(f"a frontier key cannot hold {SEPARATOR!r}: {key!r}")
    return key + SEPARATOR


def index_row_key(key: str, rank: float, url: str, seq: int = 0) -> str:
    """``<key>|<rank>|<seq>|<fingerprint>``: one URL of a key at one rank; ``seq`` (the key's
    count of entries made) keeps entries of equal rank in the order they were made."""
    return (f"{key_prefix(key)}{_rank_text(rank)}{SEPARATOR}{seq % 10**12:012d}{SEPARATOR}"
            f"{url_fingerprint(url).hex()}")


ENTRY_COLUMN = "v"  # the entry in one cell: a write per admitted URL is one mutation, not six


def entry_cells(entry: IndexEntry) -> dict[str, str]:
    """The cells of an index row (family ``q``): one, ``v``, a JSON object with the request
    (``r``), when it is eligible (``e``), its rank (``k``), its sequence number (``s``) and who
    holds it until when (``h``, ``u``)."""
    doc = {"r": request_to_item(entry.request), "e": entry.eligible_at, "k": entry.rank,
           "s": entry.seq}
    if entry.held_by:
        doc["h"], doc["u"] = entry.held_by, entry.held_until
    return {ENTRY_COLUMN: json.dumps(doc, separators=(",", ":"))}


def entry_from_cells(row_key: str, cells: dict[str, str]) -> IndexEntry:
    """Reads an index row back.

    Raises:
        ValueError: the row is not an index entry.
    """
    key, sep, _ = row_key.partition(SEPARATOR)
    if not sep or ENTRY_COLUMN not in cells:
        raise ValueError(f"not a frontier index row: {row_key!r}")
    doc = json.loads(cells[ENTRY_COLUMN])
    return IndexEntry(key, float(doc.get("k", 0.0)), request_from_item(doc["r"]),
                      float(doc.get("e", 0.0)), int(doc.get("s", 0)), str(doc.get("h", "")),
                      float(doc.get("u", 0.0)))
