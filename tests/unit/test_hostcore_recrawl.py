"""HostCore's recrawl decisions: next fetch times, conditional recrawls driven by the host's
timer, 304s, and URLs submitted again before they are due ("fresh")."""

from __future__ import annotations

import pickle

from transforms.fetch import FetchConfig, LeaseOutcome, RobotsResponse
from transforms.hostcore import FrontierConfig, HostCore, HostState
from transforms.policy import HostPolicy, Policy, RecrawlBounds
from transforms.records import CrawlRequest, FetchResult
from transforms.recrawl_book import RecrawlBook
from transforms.schedule import FrontierQueue

HOST = "site.example"
BOUNDS = RecrawlBounds(default_interval=100.0, min_interval=10.0, max_interval=1000.0)
CONFIG = FrontierConfig(policy=Policy(HostPolicy(min_delay=1.0, recrawl=BOUNDS)),
                        lease_seconds=5.0, robots_agent="beam-crawler",
                        fetch=FetchConfig(total_timeout=30.0))


class Host:
    """A HostCore whose state survives between calls, as the DoFn's keyed state does."""

    def __init__(self) -> None:
        self.state = HostState(HOST)
        self.queue = FrontierQueue(100)
        self.seen = CONFIG.new_seen()
        self.book: bytes | None = None

    def core(self) -> HostCore:
        book = self.book
        core = HostCore(CONFIG, self.state, self.queue, self.seen,
                        book_loader=lambda: pickle.loads(book) if book else None)
        return core

    def save(self, core: HostCore) -> None:
        if core.book_changed:
            self.book = pickle.dumps(core.book)

    def accept(self, requests, now: float):
        core = self.core()
        outcomes, wake = core.accept(requests, now)
        self.save(core)
        return outcomes, wake

    def timer(self, now: float, outcome: LeaseOutcome | None = None):
        core = self.core()
        decision = core.on_timer(lambda lease_id: ("done", outcome) if outcome else (
            "running", None), now)
        self.save(core)
        return decision

    def loaded_book(self) -> RecrawlBook:
        assert self.book is not None
        return pickle.loads(self.book)


def _seed(path: str) -> CrawlRequest:
    return CrawlRequest(f"https://{HOST}/{path}")


def _done(lease, now: float, results=()) -> LeaseOutcome:
    return LeaseOutcome(lease.lease_id, tuple(results), (), None, (now,), now, now)


def _ok(request: CrawlRequest, at: float, status: int = 200, headers=(),
        body: bytes | None = b"<html>v1</html>") -> FetchResult:
    return FetchResult(request, HOST, at, request.url, status=status, headers=tuple(headers),
                       body=body if status == 200 else None,
                       outcome="fetched" if status == 200 else "not_modified")


def _crawled_once(headers=(("ETag", '"v1"'),),
                  interval: float = BOUNDS.default_interval) -> tuple[Host, float]:
    """A host whose page /a was fetched at t=2 with ``headers``, due again after ``interval``;
    returns it and the harvest time."""
    host = Host()
    host.accept([_seed("a")], 0.0)
    robots = host.timer(0.0)
    host.timer(0.1, LeaseOutcome(robots.lease.lease_id, (), (), RobotsResponse(404, b"", 0.1),
                                 (0.0,), 0.1, 0.1))
    lease = host.timer(1.2).lease
    assert lease is not None and lease.requests[0].conditional == ()
    decision = host.timer(2.0, _done(lease, 2.0, [_ok(lease.requests[0], 1.5, headers=headers)]))
    (result,) = decision.results
    assert result.next_fetch_at == 2.0 + interval
    # Nothing queued: the host's timer waits for the recrawl.
    assert decision.wake_at == 2.0 + interval
    return host, 2.0


def test_an_idle_host_wakes_for_the_recrawl_with_a_conditional_get():
    host, t = _crawled_once()
    assert host.timer(t + 50).lease is None  # not due yet
    lease = host.timer(t + 100).lease
    assert lease is not None
    (request,) = lease.requests
    assert request.url == _seed("a").url and dict(request.conditional) == {
        "If-None-Match": '"v1"'}


def test_a_304_is_not_modified_and_stretches_the_interval():
    host, t = _crawled_once()
    lease = host.timer(t + 100).lease
    now = t + 101
    decision = host.timer(now, _done(lease, now, [_ok(lease.requests[0], now - 0.5, 304,
                                                      body=None)]))
    (result,) = decision.results
    assert result.outcome == "not_modified"
    assert result.next_fetch_at == now + 150.0  # unchanged content: 1.5 x the interval
    lease = host.timer(now + 150).lease  # the validators are kept for the next recrawl
    assert lease is not None and dict(lease.requests[0].conditional) == {"If-None-Match": '"v1"'}
    assert host.state.counters["not_modified"] == 1


def test_a_cache_lifetime_is_the_first_estimate_and_changed_content_halves_the_interval():
    host, t = _crawled_once(headers=(("Cache-Control", "max-age=40"),), interval=40.0)
    lease = host.timer(t + 40).lease
    assert lease is not None and lease.requests[0].conditional == ()  # no validators known
    now = t + 41
    max_age = (("Cache-Control", "max-age=40"),)
    decision = host.timer(now, _done(lease, now, [_ok(lease.requests[0], now - 0.5, 200,
                                                      max_age, b"<html>v2</html>")]))
    # Changed: 40 / 2 = 20, but the lifetime the server declared (40 s) is a floor.
    assert decision.results[0].next_fetch_at == now + 40.0
    lease = host.timer(now + 40).lease
    later = now + 41
    decision = host.timer(later, _done(lease, later, [_ok(lease.requests[0], later - 0.5,
                                                          body=b"<html>v3</html>")]))
    assert decision.results[0].next_fetch_at == later + 20.0  # no lifetime declared any more


def test_without_cache_headers_changed_content_halves_the_interval():
    host, t = _crawled_once(headers=())
    lease = host.timer(t + 100).lease
    now = t + 101
    decision = host.timer(now, _done(lease, now, [_ok(lease.requests[0], now - 0.5,
                                                      body=b"<html>v2</html>")]))
    assert decision.results[0].next_fetch_at == now + 50.0


def test_a_seed_submitted_again_before_its_next_fetch_is_fresh_and_after_it_is_queued():
    host, t = _crawled_once()
    outcomes, wake = host.accept([_seed("a")], t + 10)
    assert [o.outcome for o in outcomes] == ["fresh"]
    assert "next fetch" in outcomes[0].detail and wake is None
    # A rediscovered link is a plain duplicate: no row, no refetch.
    link = CrawlRequest(_seed("a").url, 1, 0, f"https://{HOST}/other")
    assert host.accept([link], t + 10) == ([], None)
    outcomes, wake = host.accept([_seed("a")], t + 150)
    assert [(o.outcome, o.detail) for o in outcomes] == [("queued", "recrawl")]
    assert wake == t + 150
    lease = host.timer(t + 150).lease
    assert lease is not None and lease.requests[0].conditional
    # The timer does not schedule the same URL a second time.
    assert len(host.queue) == 0 and host.loaded_book().pop_due(t + 1000, 10) == []


def test_new_urls_are_not_held_back_by_a_far_recrawl_timer():
    host, t = _crawled_once()
    assert host.state.timer_at == t + 100
    _, wake = host.accept([_seed("b")], t + 5)
    assert wake == t + 5  # the timer moves from the recrawl time to now


def _robots_lease(host: Host, body: bytes, status: int = 200, policy: HostPolicy | None = None):
    """Accepts /a, runs the robots lease with ``body``; returns the harvest decision."""
    host.accept([_seed("a")], 0.0)
    robots = host.timer(0.0)
    assert robots.lease is not None
    return host.timer(0.1, LeaseOutcome(robots.lease.lease_id, (), (),
                                        RobotsResponse(status, body, 0.1), (0.0,), 0.1, 0.1))


def test_robots_sitemaps_of_the_host_are_queued_and_others_sent_to_their_hosts():
    host = Host()
    decision = _robots_lease(host, b"Sitemap: https://site.example/sm.xml\n"
                                   b"Sitemap: https://cdn.example.net/sm.xml\n"
                                   b"User-agent: *\nDisallow: /private\n")
    assert [(r.url, r.kind, r.via) for r in decision.discovered] == [
        ("https://cdn.example.net/sm.xml", "sitemap", f"https://{HOST}/robots.txt")]
    lease = host.timer(1.2).lease
    assert lease is not None
    kinds = {r.url: r.kind for r in lease.requests}
    assert kinds == {f"https://{HOST}/a": "page", f"https://{HOST}/sm.xml": "sitemap"}
    assert host.state.counters.get("accepted") == 1  # sitemaps do not spend the page budget


def test_sitemaps_can_be_turned_off_by_policy():
    config = FrontierConfig(policy=Policy(HostPolicy(min_delay=1.0, sitemaps=False)),
                            robots_agent="beam-crawler")
    host = Host()
    core = HostCore(config, host.state, host.queue, host.seen)
    core.accept([_seed("a")], 0.0)
    robots = core.on_timer(lambda _: ("running", None), 0.0).lease
    decision = core.on_timer(lambda _: ("done", LeaseOutcome(
        robots.lease_id, (), (), RobotsResponse(200, b"Sitemap: https://site.example/s.xml\n",
                                                0.1), (0.0,), 0.1, 0.1)), 0.1)
    assert decision.discovered == [] and len(core.queue) == 1


def test_a_sitemap_lastmod_after_the_last_fetch_brings_a_fresh_url_back_at_once():
    host, t = _crawled_once()
    sitemap = f"https://{HOST}/sm.xml"
    unchanged = CrawlRequest(_seed("a").url, 1, 0, sitemap, lastmod=t - 100)
    assert host.accept([unchanged], t + 5) == ([], None)  # listed again, not changed: nothing
    changed = CrawlRequest(_seed("a").url, 1, 0, sitemap, lastmod=t + 3)
    outcomes, wake = host.accept([changed], t + 5)
    assert [(o.outcome, o.detail) for o in outcomes] == [
        ("queued", "recrawl: sitemap lastmod after the last fetch")]
    lease = host.timer(wake).lease
    assert lease is not None and dict(lease.requests[0].conditional) == {"If-None-Match": '"v1"'}
