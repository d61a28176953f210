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
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_COUNTS = {"emitted": 0, "settled": 0}


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


def reset() -> None:
    """Forgets the counts: a local run starts its own (a run stopped by a kill or an error
    leaves results that will never be settled in this process)."""
    with _LOCK:
        _COUNTS["emitted"] = _COUNTS["settled"] = 0
