"""The status machine of a URL: the one place that says what ``f:outcome`` may hold and when.

The webtable is the crawl's source of truth. Every URL the frontier has decided about has a
row, and its ``f:outcome`` cell is its status (the cell timestamp is the time of the event, so
the newest status is on top whatever the order the writes land in). Per-host state in the
runner is only a bounded cache of these rows and of the frontier index (``transforms.
frontier_index``): a new job, a restarted one or a key moved to another worker rebuilds what
it needs from them.

::

     (no row) --accepted--> queued ----------------leased-------------> fetched | not_stored
        |                     |  ^                                      not_modified | redirect
        | refused at          |  | leased again                         error | robots_blocked
        | admission           v  |                                          |
        |          retry_scheduled                                          | revisit: s:next_fetch
        v          (transient failure, < 3 attempts)                        | due, the seed sent
     filtered | robots_blocked | budget_exceeded                            | again, a sitemap
     error (robots.txt unreachable)                                         | lastmod after it
                                                                            v
                           (an index entry; the row keeps its status until the lease decides)
                                    fetched | not_modified | not_stored | ... | fresh

Rules, enforced where the transitions are made:

* ``queued`` is written before anything depends on it: the frontier writes the row (and the
  index entry that makes it durable work, index first) before its state refers to the URL and
  before the Pub/Sub message that brought it is acknowledged;
* a URL leaves ``queued`` only for ``retry_scheduled`` or a terminal status; a lease that finds
  the URL's row terminal already (a replay after a restart) does not fetch it again;
* a terminal URL is visited again only through an index entry (a *revisit*): its
  ``s:next_fetch`` came (a recrawl, fetched conditionally), it was submitted again as a seed
  (``fresh`` if it is still fresh when leased), or a sitemap's ``lastmod`` is after its last
  fetch. Its row keeps the old status until that lease writes the new one, so the lease can
  decide from it;
* ``s:next_fetch`` is set on every URL that got a response, and ``s:first_seen`` only when the
  URL is first queued, so the rows say how many URLs a host accepted (its page budget).
"""

from __future__ import annotations

QUEUED = "queued"
RETRY_SCHEDULED = "retry_scheduled"
FETCHED = "fetched"  # 2xx HTML, stored in WARC
NOT_STORED = "not_stored"  # a response whose body is not stored (non-HTML, non-2xx)
NOT_MODIFIED = "not_modified"  # a conditional GET answered 304
REDIRECT = "redirect"  # 3xx whose target went back through the frontier
ERROR = "error"  # no usable response after the allowed attempts, or robots.txt unreachable
ROBOTS_BLOCKED = "robots_blocked"
FILTERED = "filtered"  # a policy filter or trap rule refused it (reason in f:detail)
BUDGET_EXCEEDED = "budget_exceeded"  # the host's page budget is spent
FRESH = "fresh"  # submitted again before its next-fetch time

PENDING = frozenset({QUEUED, RETRY_SCHEDULED})
TERMINAL = frozenset({FETCHED, NOT_STORED, NOT_MODIFIED, REDIRECT, ERROR, ROBOTS_BLOCKED,
                      FILTERED, BUDGET_EXCEEDED, FRESH})
REFUSED_AT_ADMISSION = frozenset({FILTERED, ROBOTS_BLOCKED, BUDGET_EXCEEDED})
# Statuses after which a URL has a response, and so a next fetch time.
RESPONDED = frozenset({FETCHED, NOT_STORED, NOT_MODIFIED, REDIRECT})
ALL = PENDING | TERMINAL


def is_terminal(status: str | None) -> bool:
    return status in TERMINAL


def is_pending(status: str | None) -> bool:
    return status in PENDING


def allowed(before: str | None, after: str, *, revisit: bool = False) -> bool:
    """Whether ``before -> after`` is a transition of the machine above.

    Args:
        before: the URL's status, None when it has no row.
        after: the new status.
        revisit: the write comes from a revisit's lease (a recrawl, a resubmission, a sitemap
            lastmod), which may move a terminal URL to another terminal status.
    """
    if after not in ALL:
        return False
    if before is None:
        return after == QUEUED or after in REFUSED_AT_ADMISSION or after == ERROR
    if before in PENDING:
        return after in TERMINAL or after == RETRY_SCHEDULED
    return revisit and (after in TERMINAL or after == RETRY_SCHEDULED)
