"""Politeness measured from the servers' side: checks over request logs (pure).

Used by the end-to-end tests and by ``crawler crawl`` on the demo site, so an operator sees the
same evidence the tests assert: concurrency per host, gaps between request starts, robots first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol
from urllib.parse import urldefrag, urljoin, urlsplit

from pipeline.demo.pages import ROBOTS_PATH, DemoResponse, not_found_response
from transforms.core.filters import first_rejection
from transforms.core.policy import HostPolicy


class Request(Protocol):
    """A logged request; read-only members, so frozen records such as
    ``pipeline.demo.server.Hit`` match."""

    @property
    def path(self) -> str: ...

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...


@dataclass(frozen=True)
class PolitenessReport:
    requests: int
    max_concurrent: int
    min_gap: float | None  # smallest gap between consecutive request starts (None: < 2 requests)
    robots_first: bool
    duplicates: int  # GETs of a path already requested (robots.txt excluded)


def max_concurrency(requests: Sequence[Request]) -> int:
    """The largest number of requests open at the same instant.

    At one instant, ends of earlier requests close before new starts open (touching requests do
    not overlap), and a zero-length request opens before it closes (it counts).
    """
    events = [(r.start, 1, 1) for r in requests]
    events += [(r.end, 0 if r.end > r.start else 2, -1) for r in requests]
    open_now = peak = 0
    for _, _, delta in sorted(events):
        open_now += delta
        peak = max(peak, open_now)
    return peak


def min_start_gap(requests: Sequence[Request]) -> float | None:
    starts = sorted(r.start for r in requests)
    if len(starts) < 2:
        return None
    return min(b - a for a, b in pairwise(starts))


def gaps(requests: Sequence[Request]) -> list[float]:
    """The time between each request's end and the next one's start, in start order: what a
    host waited between two requests of a crawler that keeps one request open at a time."""
    ordered = sorted(requests, key=lambda r: r.start)
    return [b.start - a.end for a, b in pairwise(ordered)]


def idle_share(requests: Sequence[Request], threshold: float = 0.2) -> float:
    """The share of a host's span (first start to last end) spent in gaps longer than
    ``threshold`` seconds: with no delay asked, time the crawler had nothing to send the host
    (0.0 for fewer than two requests)."""
    if len(requests) < 2:
        return 0.0
    span = max(r.end for r in requests) - min(r.start for r in requests)
    idle = sum(g for g in gaps(requests) if g > threshold)
    return idle / span if span > 0 else 0.0


def crawlable_paths(base_url: str, paths: Iterable[str], policy: HostPolicy, now: float
                    ) -> set[str]:
    """The paths a crawl with ``policy`` should fetch: the policy's filters (media extensions,
    traps, deny patterns) keep the others out of the frontier."""
    return {p for p in paths if first_rejection(base_url + p, 0, policy, now) is None}


def politeness_report(requests: Sequence[Request]) -> PolitenessReport:
    ordered = sorted(requests, key=lambda r: r.start)
    paths = [r.path for r in ordered if r.path != "/robots.txt"]
    return PolitenessReport(
        requests=len(ordered), max_concurrent=max_concurrency(ordered),
        min_gap=min_start_gap(ordered),
        robots_first=bool(ordered) and ordered[0].path == "/robots.txt",
        duplicates=len(paths) - len(set(paths)))


def crawl_closure(
    tables: Mapping[str, Mapping[str, DemoResponse]],
    disallow: Mapping[str, Sequence[str]],
    seeds: Iterable[str],
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """What a correct crawler following every link from ``seeds`` requests, per host.

    The crawler drops fragments, ignores non-http(s) schemes and hosts it has no table for, asks
    robots.txt once per host it meets, never requests a path under a disallowed prefix, follows
    every redirect's Location as a new URL and every link of each 200 HTML page.

    Args:
        tables: netloc (``127.0.0.2:PORT``) -> that host's responses.
        disallow: netloc -> disallowed path prefixes from its robots.txt.
        seeds: absolute start URLs.

    Returns:
        ``(fetched, blocked)``: netloc -> request-targets requested (robots.txt included), and
        netloc -> request-targets linked but disallowed.
    """
    fetched: dict[str, set[str]] = {netloc: set() for netloc in tables}
    blocked: dict[str, set[str]] = {netloc: set() for netloc in tables}
    queue = deque(seeds)
    seen: set[str] = set()
    while queue:
        url = urldefrag(queue.popleft()).url
        parts = urlsplit(url)
        if url in seen or parts.scheme not in ("http", "https") or parts.netloc not in tables:
            continue
        seen.add(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        fetched[parts.netloc].add(ROBOTS_PATH)
        if any(target.startswith(prefix) for prefix in disallow.get(parts.netloc, ())):
            blocked[parts.netloc].add(target)
            continue
        fetched[parts.netloc].add(target)
        response = tables[parts.netloc].get(target) or not_found_response(target)
        if response.location is not None:
            queue.append(urljoin(url, response.location))
        if response.status == 200:
            queue.extend(response.links)
    return fetched, blocked
