"""What a local run waits for before it stops: the frontier's results whose rows are not
written yet (process-wide counts; exact on a single-process runner such as the DirectRunner).

A local run that stops at ``--max_pages`` must leave the tables holding everything it fetched,
or the next job against them fetches those pages again. Leases out are visible to the fetch
service, but a finished lease is harvested only at its key's next timer firing, and its pages
then wait for their WARC file before their rows are written. So the frontier counts the final
results it emits that settle an index entry, the row sink counts the index entries it settled
once their rows were written, and the driver waits until both counts agree and no lease is out
(``transforms.fetchers.service.leases_outstanding``).

    lease done -> timer harvests it: emitted += n -> links published, WARC rolled
      -> rows written, entries deleted: settled += n -> emitted == settled: drained

The same count is the local runner's backpressure. The fetch service fetches on its own
thread, faster than the DirectRunner's one thread carries pages through extraction, dedup, the
WARC writer and the row sink; without a bound the pages waiting in the runner's queues grow with
the crawl (about 20 KB of memory per page fetched, and minutes of loop latency). With
``set_backlog_limit(n)`` (the local driver sets it), no key starts a lease while ``n`` or more
results are in the process, unsettled or fetched and not yet harvested (the fetch service's
``fetched_held``), so at most ``n`` pages plus what the leases out fetch meanwhile are.
Off (0) by default: on a distributed runner the frontier and the row sink may run in different
processes, where these counts mean nothing.
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_COUNTS = {"emitted": 0, "settled": 0}
_LIMIT = {"results": 0}


def note_emitted(n: int) -> None:
    """The frontier emitted ``n`` final results that carry an index entry to settle."""
    if n:
        with _LOCK:
            _COUNTS["emitted"] += n


def note_settled(n: int) -> None:
    """The row sink wrote the rows of ``n`` such results and deleted their index entries."""
    if n:
        with _LOCK:
            _COUNTS["settled"] += n


def unsettled() -> int:
    """Results emitted in this process whose rows are not written yet."""
    with _LOCK:
        return _COUNTS["emitted"] - _COUNTS["settled"]


def set_backlog_limit(results: int) -> None:
    """No new lease in this process while ``results`` or more are unsettled (0: no limit)."""
    if results < 0:
        raise ValueError(f"the backlog limit must be >= 0, got {results}")
    with _LOCK:
        _LIMIT["results"] = results


def backlogged(held: int = 0) -> bool:
    """True while the process holds as many results as its backlog limit: the unsettled ones,
    plus ``held`` (fetched by leases whose outcome no key has collected yet)."""
    with _LOCK:
        limit = _LIMIT["results"]
        return limit > 0 and _COUNTS["emitted"] - _COUNTS["settled"] + held >= limit


def reset() -> None:
    """Forgets the counts: a local run starts its own (a run stopped by a kill or an error
    leaves results that will never be settled in this process)."""
    with _LOCK:
        _COUNTS["emitted"] = _COUNTS["settled"] = 0
