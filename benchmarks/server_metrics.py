"""What a crawl looked like from the servers' side, from the test bed's access log (pure).

Per host: pages fetched, duplicate fetches, fetches robots.txt disallows (judged by Protego, the
parser Scrapy uses, not by our own), max concurrent requests, smallest gap between request
starts, whether robots.txt came first, and the share of its span spent idle (gaps between one
request's end and the next one's start longer than ``IDLE_GAP``: with no delay asked, time the
crawler had nothing to send it). Over all hosts: the crawling window (first request start
to last request end), pages/s in it, and the cumulative pages-over-time curve for the plot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from protego import Protego

from benchmarks.testbed import LoggedRequest
from pipeline.demo.log import idle_share, max_concurrency, politeness_report

NON_PAGES = frozenset({"/robots.txt"})
IDLE_GAP = 0.2  # seconds: a longer gap between two requests to a host counts as idle
LOG_RESOLUTION = 0.002  # $msec and $request_time are rounded to ms: a start computed from them
# may fall up to ~1 ms before the end of the previous back-to-back request on the connection


@dataclass(frozen=True)
class HostMetrics:
    authority: str
    requests: int
    pages: int  # 2xx responses other than robots.txt
    duplicates: int
    disallowed: int
    max_concurrent: int
    min_gap: float | None
    robots_first: bool
    idle_share: float = 0.0  # of the host's span, in gaps longer than IDLE_GAP


@dataclass(frozen=True)
class CrawlMetrics:
    pages: int
    requests: int
    crawl_seconds: float  # first request start to last request end
    pages_per_s: float
    duplicates: int
    disallowed: int
    max_concurrent: int  # the largest over hosts
    min_gap: float | None  # the smallest over hosts
    robots_first: bool  # on every host
    hosts: tuple[HostMetrics, ...]
    max_idle_share: float = 0.0  # the largest over hosts with more than 10 pages

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def is_page(r: LoggedRequest) -> bool:
    return r.path not in NON_PAGES and 200 <= r.status < 300


def host_metrics(authority: str, requests: Sequence[LoggedRequest], robots_txt: str,
                 user_agent: str) -> HostMetrics:
    rules = Protego.parse(robots_txt)
    report = politeness_report(requests)
    # Concurrency at the log's resolution: a request is open from its start to its end less the
    # resolution; one shorter than that cannot be shown to overlap anything and is left out.
    resolvable = [replace(r, end=r.end - LOG_RESOLUTION) for r in requests
                  if r.end - r.start > LOG_RESOLUTION]
    disallowed = sum(1 for r in requests if r.path not in NON_PAGES
                     and not rules.can_fetch(f"http://{authority}{r.path}", user_agent))
    concurrent = max(1 if requests else 0, max_concurrency(resolvable))
    return HostMetrics(authority, len(requests), sum(1 for r in requests if is_page(r)),
                       report.duplicates, disallowed, concurrent, report.min_gap,
                       report.robots_first, round(idle_share(requests, IDLE_GAP), 4))


def crawl_metrics(requests: Sequence[LoggedRequest], robots: Mapping[str, str],
                  user_agent: str) -> CrawlMetrics:
    """``robots``: authority -> the robots.txt served there; ``user_agent``: the crawler's
    product token, as robots.txt groups are matched against it."""
    by_host: dict[str, list[LoggedRequest]] = defaultdict(list)
    for r in requests:
        by_host[r.authority].append(r)
    hosts = tuple(host_metrics(a, by_host[a], robots.get(a, ""), user_agent)
                  for a in sorted(by_host))
    pages = sum(h.pages for h in hosts)
    window = (max(r.end for r in requests) - min(r.start for r in requests)) if requests else 0.0
    gaps = [h.min_gap for h in hosts if h.min_gap is not None]
    return CrawlMetrics(
        pages=pages, requests=len(requests), crawl_seconds=window,
        pages_per_s=pages / window if window > 0 else 0.0,
        duplicates=sum(h.duplicates for h in hosts), disallowed=sum(h.disallowed for h in hosts),
        max_concurrent=max((h.max_concurrent for h in hosts), default=0),
        min_gap=min(gaps) if gaps else None,
        robots_first=bool(hosts) and all(h.robots_first for h in hosts), hosts=hosts,
        max_idle_share=max((h.idle_share for h in hosts if h.pages > 10), default=0.0))


def pages_over_time(requests: Sequence[LoggedRequest], origin: float, step: float = 0.5
                    ) -> list[tuple[float, int]]:
    """Cumulative pages fetched at ``origin + k * step`` (the launch of the crawler), by the
    end time of each response, up to the last one."""
    ends = sorted(r.end - origin for r in requests if is_page(r))
    if not ends:
        return [(0.0, 0)]
    points, i, t = [], 0, 0.0
    while True:
        while i < len(ends) and ends[i] <= t:
            i += 1
        points.append((round(t, 3), i))
        if i == len(ends):
            return points
        t += step
