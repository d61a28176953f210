"""The loop's latency as a small histogram that keys keep and the hosts table carries (pure).

A link to another key travels the crawl loop (extract -> publish -> Pub/Sub -> pull -> decode
-> its key's frontier). The time from its discovery (its page's fetch) to its arrival at its
key is counted per key in fixed buckets (milliseconds, upper edges, the last open), in the
key's counters as ``loop_ms_<edge>``. The key writes them to its hosts row as one text cell,
``loop_latency`` (``"20:3,50:12,..."``), so ``crawler run`` sums them over the hosts table for
its summary: percentiles on every runner, where a running streaming job's Beam metrics may not
be readable. The Beam distribution ``loop_latency_ms`` gives count, mean, min and max too.

A percentile is the upper edge of the bucket it falls in: an over-estimate of at most one
bucket (the edges go 1-2-5 per decade).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BUCKETS_MS = (5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 60_000,
              300_000)
OPEN = "inf"  # the last bucket: above the last edge
PREFIX = "loop_ms_"


def bucket_of(ms: float) -> str:
    """The bucket ``ms`` falls in: the first edge at or above it, or ``OPEN``."""
    for edge in BUCKETS_MS:
        if ms <= edge:
            return str(edge)
    return OPEN


def counter_name(ms: float) -> str:
    return PREFIX + bucket_of(ms)


def histogram_text(counters: Mapping[str, int]) -> str:
    """The ``loop_ms_*`` counters as the hosts-table cell (``""`` when there are none)."""
    parts = [(name[len(PREFIX):], n) for name, n in counters.items()
             if name.startswith(PREFIX) and n > 0]
    parts.sort(key=lambda p: _edge_order(p[0]))
    return ",".join(f"{edge}:{n}" for edge, n in parts)


def parse_histogram(text: str) -> dict[str, int]:
    """A ``loop_latency`` cell back to bucket -> count (unreadable parts are skipped)."""
    out: dict[str, int] = {}
    for part in text.split(","):
        edge, _, n = part.partition(":")
        if edge and n.isdigit():
            out[edge] = out.get(edge, 0) + int(n)
    return out


def merge(histograms: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for histogram in histograms:
        for edge, n in histogram.items():
            out[edge] = out.get(edge, 0) + n
    return out


def percentile(histogram: Mapping[str, int], q: float) -> float | None:
    """The ``q`` quantile (0 < q <= 1) in milliseconds, as the upper edge of its bucket (inf
    for the open one); None for an empty histogram."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for edge in sorted(histogram, key=_edge_order):
        seen += histogram[edge]
        if seen >= rank:
            return float("inf") if edge == OPEN else float(edge)
    return float("inf")


def _edge_order(edge: str) -> float:
    return float("inf") if edge == OPEN else float(edge)
