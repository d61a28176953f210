"""The frame every frontier decision works in: settings, one key's state, and the effects the
decisions ask for (pure; no Beam).

``transforms.frontier.hostcore`` builds a :class:`HostContext` per element or timer firing from the
key's state cells (loaded lazily: most steps need few of them), the decision modules
(``admission``, ``leasing``, ``harvest``, ``rebuild``) read and change it, and the DoFn
(``transforms.host_frontier``) carries out the :class:`Effects`: state writes, table writes at the
end of the bundle, leases and reads submitted to the fetch service, outputs, the next timer.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from transforms.core import schedule
from transforms.core.batches import fair_ranks, flow_of
from transforms.core.bloom import ScalableBloomFilter
from transforms.core.policy import DEFAULT_POLICY, HostPolicy, Policy
from transforms.core.records import (
    TERMINAL_OUTCOMES,
    AckToken,
    BatchEvent,
    CrawlRequest,
    Discovered,
    FetchResult,
    ParsedPage,
    UrlOutcome,
)
from transforms.core.robots import RobotsRules, product_token
from transforms.core.scope import SCOPE_ANY
from transforms.core.sharding import host_of_key, shard_budget
from transforms.core.url_keys import url_fingerprint
from transforms.formats.batch_rows import events_for, outcome_rows, with_batch_cells
from transforms.formats.index import IndexEntry, index_row_key
from transforms.formats.rows import outcome_row
from transforms.formats.schema import DEDUP_TABLE
from transforms.frontier.leases import FetchConfig, Lease
from transforms.frontier.state import HeadEntry, HostState, InboxBatch
from transforms.frontier.store import StoreBatch


@dataclass(frozen=True)
class FrontierConfig:
    """Settings of the host frontier (``pipeline.options.CrawlerOptions`` has the flags).

    Per-host settings (delay, budget, depth, filters, priority boost, user agent) come from
    ``policy``; ``robots_agent`` is the product token of the pipeline's user agent.

    Bounds of the state per key: ``head_size`` URLs in the head (the rest of the host's pending
    URLs stay in the index and are read back ``refill_size`` at a time when the head falls below
    a quarter), ``max_seen`` URLs in the seen filter, whose stages stop growing at
    ``seen_stage_capacity`` URLs so a change rewrites at most one such stage.

    Extraction next to the fetch: ``scope`` (``transforms.core.scope``), and whether a page
    whose content was seen under another URL has its own links admitted at harvest anyway
    (``follow_duplicate_links``); ``dedup_table`` is where that content is looked up.
    """

    policy: Policy = DEFAULT_POLICY
    lease_seconds: float = 10.0
    max_lease_urls: int = 256
    head_size: int = 2000
    refill_size: int = 1000
    rebuild_page: int = 2000
    io_timeout: float = 60.0
    hold_seconds: float = 600.0  # a fetched URL's index entry is held this long for its row
    seen_initial: int = 1024
    seen_error_rate: float = 1e-6
    seen_stage_capacity: int = 32_768
    max_seen: int = 1_000_000
    robots_ttl: float = 24 * 3600.0
    robots_error_ttl: float = 600.0
    robots_max_attempts: int = 3
    retry_delay: float = 5.0
    robots_agent: str = "beam-crawler"
    fetch: FetchConfig = field(default_factory=FetchConfig)
    scope: str = SCOPE_ANY
    follow_duplicate_links: bool = False
    dedup_table: str = DEDUP_TABLE

    def new_seen(self) -> ScalableBloomFilter:
        return ScalableBloomFilter(initial_capacity=self.seen_initial,
                                   error_rate=self.seen_error_rate, tightening=0.85,
                                   max_capacity=self.max_seen,
                                   max_stage_capacity=max(self.seen_initial,
                                                          self.seen_stage_capacity))

    @property
    def refill_below(self) -> int:
        """A refill is read once the head holds fewer URLs than this."""
        return max(1, self.head_size // 4)


@dataclass(frozen=True)
class IoRequest:
    """A read the fetch service runs for a key: a page of its rows to rebuild it, or a page of
    its index to refill its head."""

    job_id: str
    kind: str  # frontier_state.JOB_REBUILD or JOB_REFILL
    after: str | None = None  # the row key to continue after (webtable: rebuild; index: refill)
    first: bool = False  # rebuild: also the robots verdict and the first index page
    skip: frozenset[bytes] = frozenset()  # refill: fingerprints in the head already
    incarnation: str = ""  # refill: entries this incarnation holds are passed


@dataclass
class Effects:
    """What one element or timer firing asks the DoFn to do."""

    writes: StoreBatch = field(default_factory=StoreBatch)
    # Harvested fetches: each with its extraction (the links for other keys and the parsed
    # page or unstored result), or a bare FetchResult when it could not be extracted here.
    results: list[Discovered | FetchResult] = field(default_factory=list)
    outcomes: list[UrlOutcome] = field(default_factory=list)
    discovered: list[CrawlRequest] = field(default_factory=list)  # for other keys
    leases: list[Lease] = field(default_factory=list)  # a first one, and/or one chained
    io: IoRequest | None = None
    wakes: list[float] = field(default_factory=list)
    tokens: list[AckToken] = field(default_factory=list)
    batch_events: list[BatchEvent] = field(default_factory=list)  # out once written
    arrivals: list[HeadEntry] = field(default_factory=list)
    inbox: list[InboxBatch] = field(default_factory=list)
    clear_inbox: bool = False
    changed: bool = False

    def wake(self, at: float | None) -> None:
        if at is not None:
            self.wakes.append(at)

    @property
    def wake_at(self) -> float | None:
        return min(self.wakes) if self.wakes else None

    @property
    def lease(self) -> Lease | None:
        """The last lease this step started (None: none)."""
        return self.leases[-1] if self.leases else None

    @property
    def fetches(self) -> list[FetchResult]:
        """The harvested fetch results themselves, in order."""
        return [fetch_of(r) for r in self.results]


def fetch_of(result: Discovered | FetchResult) -> FetchResult:
    """The fetch result of a harvested result, extracted or not."""
    if isinstance(result, FetchResult):
        return result
    item = result.item
    if isinstance(item, ParsedPage):
        return item.fetch
    assert isinstance(item, FetchResult)
    return item


class HostContext:
    """One key's state and settings for one step; the parts kept in their own state cells are
    loaded on first use through the loaders the DoFn passes."""

    def __init__(self, config: FrontierConfig, state: HostState, *,
                 head: Callable[[], list[HeadEntry]] | None = None,
                 robots: Callable[[], RobotsRules | None] | None = None,
                 seen: Callable[[], ScalableBloomFilter | None] | None = None,
                 arrivals: Callable[[], list[HeadEntry]] | None = None,
                 inbox: Callable[[], list[InboxBatch]] | None = None,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self.state = state
        host_policy = config.policy.for_host(host_of_key(state.host))
        # A shard of a sharded host gets its share of the budget (and N times the delay).
        self.shards = host_policy.shards
        self.policy: HostPolicy = dataclasses.replace(
            host_policy, max_pages_per_host=shard_budget(host_policy.max_pages_per_host,
                                                         host_policy.shards))
        self.agent = (product_token(self.policy.user_agent) if self.policy.user_agent
                      else config.robots_agent)
        self.rng = rng or random.Random()
        self.counters: Counter[str] = Counter()
        self.effects = Effects()
        self._load_head = head
        self._load_robots = robots
        self._load_seen = seen
        self._load_arrivals = arrivals
        self._load_inbox = inbox
        self._head: list[HeadEntry] | None = None
        self._robots: RobotsRules | None = None
        self._robots_loaded = False
        self._seen: ScalableBloomFilter | None = None
        self.head_changed = False
        self.robots_changed = False
        self.seen_changed = False
        self.seen_reset = False
        self.arrivals_merged = False

    # -- lazily loaded parts ---------------------------------------------------------------

    @property
    def head(self) -> list[HeadEntry]:
        """The head, in fetch order (``HeadEntry.order``)."""
        if self._head is None:
            self._head = list(self._load_head()) if self._load_head is not None else []
        return self._head

    def set_head(self, entries: list[HeadEntry]) -> None:
        self._head = entries
        self.state.head_size = len(entries)
        self.head_changed = True

    @property
    def robots(self) -> RobotsRules | None:
        if not self._robots_loaded:
            self._robots = self._load_robots() if self._load_robots is not None else None
            self._robots_loaded = True
        return self._robots

    def set_robots(self, rules: RobotsRules | None) -> None:
        self._robots, self._robots_loaded, self.robots_changed = rules, True, True
        self.state.robots_mode = rules.mode if rules is not None else None
        self.state.robots_fetched_at = rules.fetched_at if rules is not None else 0.0

    @property
    def seen(self) -> ScalableBloomFilter:
        if self._seen is None:
            loaded = self._load_seen() if self._load_seen is not None else None
            self._seen = loaded if loaded is not None else self.config.new_seen()
        return self._seen

    def set_seen(self, seen: ScalableBloomFilter) -> None:
        self._seen, self.seen_changed, self.seen_reset = seen, True, True
        self.state.seen_version = uuid.uuid4().hex
        self.state.seen_frozen = 0

    @property
    def seen_loaded(self) -> bool:
        return self._seen is not None

    def remember(self, fingerprint: bytes) -> None:
        if not self.seen.full and self.seen.add(fingerprint):
            self.seen_changed = True
            self.state.seen_version = uuid.uuid4().hex

    def load_arrivals(self) -> list[HeadEntry]:
        return list(self._load_arrivals()) if self._load_arrivals is not None else []

    def load_inbox(self) -> list[InboxBatch]:
        return list(self._load_inbox()) if self._load_inbox is not None else []

    # -- shared small decisions ------------------------------------------------------------

    def delay(self, now: float | None = None) -> float:
        """Seconds between requests: ours or the site's Crawl-delay, stretched while the host
        is backing off after failures (``transforms.core.retry.HostBackoff``)."""
        from transforms.core import retry
        from transforms.core.sharding import shard_delay

        robots = self.robots if self.state.robots_mode == "parsed" else None
        crawl_delay = robots.crawl_delay(self.agent) if robots is not None else None
        base = shard_delay(schedule.politeness_delay(self.policy.min_delay, crawl_delay),
                           self.shards)
        return base if now is None else retry.effective_delay(self.state.backoff, base, now)

    def fresh_robots(self, now: float) -> RobotsRules | None:
        """The key's robots rules if they may be applied now, else None (fetch them first)."""
        hs = self.state
        if (hs.robots_mode is not None and hs.robots_mode != "disallow_all"
                and now < hs.robots_fetched_at + self.config.robots_ttl):
            return self.robots
        return None

    def rank(self, request: CrawlRequest, eligible_at: float) -> float:
        """A request's place in the key's queue: a client batch's URL by its batch's fair
        share (``transforms.core.batches.fair_ranks``: batches alternate, a client's batches
        share one client's turn), any other by ``schedule.queue_rank``."""
        if request.client and request.batches:
            return self._fair_rank(request, eligible_at)
        return schedule.queue_rank(request.priority + self.policy.priority_boost, request.depth,
                                   eligible_at, schedule.AGING_SECONDS)

    def _fair_rank(self, request: CrawlRequest, eligible_at: float) -> float:
        hs = self.state
        present = (hs.vclock if hs.vclock is not None
                   else schedule.queue_rank(0, 0, eligible_at, schedule.AGING_SECONDS))
        for flow in [f for f, tag in hs.flow_tags.items() if tag <= present]:
            del hs.flow_tags[flow]  # served to its end: the batch starts afresh if it returns
        flow = flow_of(request.client, request.batches[0])
        prefix = request.client + "/"
        share = 1 + sum(1 for f in hs.flow_tags if f.startswith(prefix) and f != flow)
        ranks, hs.flow_tags[flow] = fair_ranks(1, flow, hs.flow_tags, present, share)
        return ranks[0]

    def entry_key(self, entry: HeadEntry) -> str:
        return index_row_key(self.state.host, entry.rank, entry.request.url, entry.seq)

    def index_entry(self, request: CrawlRequest, eligible_at: float,
                    same_as: HeadEntry | None = None) -> IndexEntry:
        """A new index entry for ``request`` (or, with ``same_as``, that entry's row again)."""
        if same_as is not None:
            return IndexEntry(self.state.host, same_as.rank, request, eligible_at, same_as.seq)
        self.state.seq += 1
        return IndexEntry(self.state.host, self.rank(request, eligible_at), request,
                          eligible_at, self.state.seq)

    def count(self, name: str, n: int = 1, counter: str | None = None) -> None:
        """Counts in the key's cumulative state and in this step's metrics."""
        self.state.count(name, n)
        self.counters[counter or name] += n

    def outcome(self, request: CrawlRequest, outcome: str, now: float, detail: str = "", *,
                http_status: int | None = None, fetched_at: float | None = None) -> UrlOutcome:
        """Records a frontier decision: its row goes with this step's writes, and for a client
        batch's URL with a terminal status, the batch's outcome cells and events (the response
        a ``fresh`` answer stands on: ``http_status``, ``fetched_at``)."""
        decided = UrlOutcome(request, self.state.host, outcome, now, detail)
        self.effects.outcomes.append(decided)
        row = outcome_row(decided)
        if request.batches and outcome in TERMINAL_OUTCOMES:
            events = events_for(request, outcome, now, detail=detail, http_status=http_status,
                                fetched_at=fetched_at)
            row = with_batch_cells(row, events)
            self.effects.writes.batch_rows.extend(outcome_rows(events))
            self.effects.batch_events.extend(events)
        self.effects.writes.rows.append(row)
        return decided

    def fingerprints_in_flight(self) -> frozenset[bytes]:
        """The URLs in the head and the leases out: a refill skips their index entries."""
        entries = list(self.head)
        for lease in (self.state.lease, self.state.next_lease):
            if lease is not None:
                entries += lease.entries
        return frozenset(url_fingerprint(e.request.url) for e in entries)
