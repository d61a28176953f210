"""The URL filters: each rule passes and fails where documented, in a fixed order, and the trap
defences keep endless link spaces bounded."""

from __future__ import annotations

import calendar
import datetime
import itertools

import pytest

from transforms.core.filters import (
    FILTER_NAMES,
    REJECTION_REASONS,
    FilterResult,
    check_url,
    domain_matches,
    first_rejection,
)
from transforms.core.policy import HostPolicy, TrapLimits, is_removed_param

NOW = calendar.timegm((2026, 6, 15, 12, 0, 0))  # the calendar rule's "today": June 2026
DEFAULT = HostPolicy()


def rejection(url: str, policy: HostPolicy = DEFAULT, depth: int = 0) -> tuple[str, str] | None:
    result = first_rejection(url, depth, policy, NOW)
    return None if result is None else (result.name, result.reason)


def test_filter_names_and_reasons_are_stable():
    assert FILTER_NAMES == (
        "scheme", "domain_allow", "domain_deny", "url_length", "url_pattern", "depth",
        "extension", "trap_path_depth", "trap_repeated_segment", "trap_query_params",
        "trap_calendar")
    assert REJECTION_REASONS == (
        "scheme_not_allowed", "domain_not_allowed", "domain_denied", "url_too_long",
        "url_pattern_denied", "too_deep", "media_extension", "trap_path_depth",
        "trap_repeated_segment", "trap_query_params", "trap_calendar")


def test_check_url_reports_every_filter_in_order():
    results = check_url("https://example.com/a/b?x=1", 0, DEFAULT, NOW)
    assert [r.name for r in results] == list(FILTER_NAMES)
    assert all(r == FilterResult(r.name, True) for r in results)
    assert first_rejection("https://example.com/a/b?x=1", 0, DEFAULT, NOW) is None


# ---- one test per filter: a passing and a failing case ------------------------------------


@pytest.mark.parametrize(("url", "policy", "expected"), [
    ("http://a.com/", DEFAULT, None),
    ("ftp://a.com/file", DEFAULT, None),
    ("gopher://a.com/", DEFAULT, ("scheme", "scheme_not_allowed")),
    ("mailto:someone@a.com", DEFAULT, ("scheme", "scheme_not_allowed")),
    ("http://a.com/", HostPolicy(allowed_schemes=frozenset({"https"})),
     ("scheme", "scheme_not_allowed")),
])
def test_scheme(url, policy, expected):
    assert rejection(url, policy) == expected


def test_domain_allow_list():
    policy = HostPolicy(allow_domains=("example.com", ".example.org"))
    assert rejection("https://example.com/", policy) is None
    assert rejection("https://www.example.org:8080/", policy) is None
    assert rejection("https://user@a.example.com/", policy) is None
    assert rejection("https://other.com/", policy) == ("domain_allow", "domain_not_allowed")
    assert rejection("https://badexample.com/", policy) == ("domain_allow", "domain_not_allowed")
    assert first_rejection("https://other.com/", 0, policy, NOW) == FilterResult(
        "domain_allow", False, "domain_not_allowed", "other.com")


def test_domain_deny_list():
    policy = HostPolicy(deny_domains=(".ads.example.com", "tracker.net"))
    assert rejection("https://example.com/", policy) is None
    assert rejection("https://notads.example.com/", policy) is None
    assert rejection("https://x.ads.example.com/", policy) == ("domain_deny", "domain_denied")
    result = first_rejection("https://tracker.net:81/p", 0, policy, NOW)
    assert result == FilterResult("domain_deny", False, "domain_denied", "tracker.net")


@pytest.mark.parametrize(("host", "suffix", "matches"), [
    ("example.com", "example.com", True),
    ("a.example.com", "example.com", True),
    ("a.b.example.com", "example.com", True),
    ("badexample.com", "example.com", False),
    ("example.com.evil.net", "example.com", False),
    ("example.co", "example.com", False),
    ("com", "example.com", False),
    ("anything.gov", "gov", True),
    ("gov.uk", "gov", False),
])
def test_domain_suffixes_match_on_label_boundaries(host, suffix, matches):
    assert (domain_matches(host, (suffix,)) == suffix) is matches
    # The leading-dot spelling means the same once HostPolicy normalized it.
    deny = HostPolicy(deny_domains=("." + suffix,)).deny_domains
    assert (domain_matches(host, deny) is not None) is matches


def test_url_length():
    policy = HostPolicy(max_url_length=40)
    url = "https://a.com/" + "x" * (40 - len("https://a.com/"))
    assert len(url) == 40 and rejection(url, policy) is None
    result = first_rejection(url + "y", 0, policy, NOW)
    assert result == FilterResult("url_length", False, "url_too_long", "41 > 40 characters")
    assert rejection("https://a.com/" + "x" * 3000) == ("url_length", "url_too_long")


def test_deny_patterns_are_searched_and_name_the_pattern():
    policy = HostPolicy(deny_url_patterns=(r"/cart/", r"[?&]sort=", r"(?i)\.php$"))
    assert rejection("https://a.com/products?page=2", policy) is None
    for url, pattern in [("https://a.com/shop/cart/1", r"/cart/"),
                         ("https://a.com/p?x=1&sort=asc", r"[?&]sort="),
                         ("https://a.com/INDEX.PHP", r"(?i)\.php$")]:
        assert first_rejection(url, 0, policy, NOW) == FilterResult(
            "url_pattern", False, "url_pattern_denied", pattern)


def test_max_depth():
    policy = HostPolicy(max_depth=2)
    assert rejection("https://a.com/", policy, depth=2) is None
    assert first_rejection("https://a.com/", 3, policy, NOW) == FilterResult(
        "depth", False, "too_deep", "depth 3 > 2")
    assert rejection("https://a.com/", DEFAULT, depth=10_000) is None  # None: unlimited


@pytest.mark.parametrize(("url", "rejected"), [
    ("https://a.com/photo.jpg", True),
    ("https://a.com/photo.JPEG", True),
    ("https://a.com/dl/archive.tar.gz", True),
    ("https://a.com/report.pdf", True),
    ("https://a.com/video.mp4?autoplay=1", True),
    ("https://a.com/img.png;jsessionid=ABC", True),
    ("https://a.com/page.html", False),
    ("https://a.com/index.php?img=a.jpg", False),  # only the path counts
    ("https://a.com/photos.jpg/", False),  # a directory
    ("https://a.com/jpg", False),
    ("https://a.com/.png", False),  # a dot file, not an extension
    ("https://a.com/sitemap.xml", False),
    ("https://a.com/", False),
])
def test_media_extension(url, rejected):
    assert (rejection(url) == ("extension", "media_extension")) is rejected


def test_skip_extensions_can_be_replaced():
    policy = HostPolicy(skip_extensions=frozenset({"pdf"}))
    assert rejection("https://a.com/photo.jpg", policy) is None
    assert first_rejection("https://a.com/r.PDF", 0, policy, NOW) == FilterResult(
        "extension", False, "media_extension", "pdf")


@pytest.mark.parametrize(("path", "segments"), [
    ("/", 0), ("/a", 1), ("/a/", 1), ("/a/b", 2), ("/a/b/", 2), ("/a//b", 3),
])
def test_path_depth_counts_segments(path, segments):
    policy = HostPolicy(traps=TrapLimits(max_path_depth=max(1, segments)))
    assert rejection("https://a.com" + path, policy) is None
    if segments > 1:
        tighter = HostPolicy(traps=TrapLimits(max_path_depth=segments - 1))
        assert first_rejection("https://a.com" + path, 0, tighter, NOW) == FilterResult(
            "trap_path_depth", False, "trap_path_depth",
            f"{segments} segments > {segments - 1}")


@pytest.mark.parametrize(("path", "rejected"), [
    ("/x/x/x", True),
    ("/a/b/a/b/a/b", True),
    ("/a/b/c/a/d/a/", True),
    ("/a/b/a/b", False),
    ("/x/x/", False),
    ("/2024/01/01/", False),
    ("/a//b//c//d", False),  # empty segments do not count
])
def test_repeated_segments(path, rejected):
    assert (rejection("https://a.com" + path)
            == ("trap_repeated_segment", "trap_repeated_segment")) is rejected


def test_repeated_segment_limit_is_configurable():
    policy = HostPolicy(traps=TrapLimits(max_repeated_segments=1))
    assert first_rejection("https://a.com/a/b/a", 0, policy, NOW) == FilterResult(
        "trap_repeated_segment", False, "trap_repeated_segment", "'a' more than 1 times")


def test_query_params():
    eight = "&".join(f"p{i}=1" for i in range(8))
    assert rejection("https://a.com/s?" + eight) is None
    assert rejection("https://a.com/s?" + eight + "&&") is None  # empty parts are no parameters
    assert first_rejection("https://a.com/s?" + eight + "&p8=1", 0, DEFAULT, NOW) == (
        FilterResult("trap_query_params", False, "trap_query_params", "9 parameters > 8"))
    no_query = HostPolicy(traps=TrapLimits(max_query_params=0))
    assert rejection("https://a.com/s", no_query) is None
    assert rejection("https://a.com/s?a", no_query) == ("trap_query_params", "trap_query_params")


# ---- the calendar rule (today is June 2026, the window 2 years: 2024..2028) ----------------


@pytest.mark.parametrize("url", [
    "https://a.com/calendar/2026/06/",
    "https://a.com/calendar/2028/12/31",
    "https://a.com/calendar/2024/1",
    "https://a.com/events?year=2027&month=3",
    "https://a.com/events/2024-01-01",
    "https://a.com/day/20281231.html",
    "https://a.com/2015/03/my-old-post",  # a permalink: a past date with more path after it
    "https://a.com/2015/03/07/my-old-post.html",
    "https://a.com/2015-03-01-my-old-post",
    "https://a.com/2015/",  # a year alone is no date
    "https://a.com/item/12345678",  # no valid month
    "https://a.com/item/20151340",  # no valid day
    "https://a.com/item/2015/13/",  # no valid month
    "https://a.com/item/120150301",  # nine digits: no date
    "https://a.com/?y=1999&x=2",  # not a year parameter (map tiles, coordinates)
    "https://a.com/v1/1999-api/docs",
])
def test_calendar_passes(url):
    assert rejection(url) is None


@pytest.mark.parametrize("url", [
    "https://a.com/calendar/2029/01/",
    "https://a.com/calendar/2099/05",
    "https://a.com/calendar/2099/05/my-future-post",  # future: rejected wherever it is
    "https://a.com/calendar/2023/12/",  # past, at the end of the path: a month view
    "https://a.com/calendar/2015/03/07",
    "https://a.com/calendar/2015/03/index.html",
    "https://a.com/events/2015-03-01",
    "https://a.com/events/20150301.html",
    "https://a.com/events?year=2015&month=3",
    "https://a.com/events?YR=2031",
    "https://a.com/events?date=2015-03-01&view=day",
    "https://a.com/events?from=2031/01/01",
    "https://a.com/events?d=20310101",
])
def test_calendar_rejects(url):
    result = first_rejection(url, 0, DEFAULT, NOW)
    assert result is not None and (result.name, result.reason) == ("trap_calendar", "trap_calendar")
    assert "outside 2024-2028" in result.detail


def test_calendar_window_zero_disables_the_rule():
    policy = HostPolicy(traps=TrapLimits(calendar_window_years=0))
    assert rejection("https://a.com/calendar/2099/05", policy) is None


def test_calendar_window_follows_now():
    later = calendar.timegm((2099, 1, 1, 0, 0, 0))
    assert first_rejection("https://a.com/calendar/2099/05", 0, DEFAULT, later) is None
    assert first_rejection("https://a.com/calendar/2026/05", 0, DEFAULT, later) is not None


def next_months(start: datetime.date, count: int, step: int = 1):
    index = start.year * 12 + start.month - 1
    for i in range(count):
        year, month = divmod(index + i * step, 12)
        if year > 9999 or year < 0:
            return
        yield year, month + 1


@pytest.mark.parametrize("template", [
    "https://cal.example/calendar/{y:04d}/{m:02d}/",
    "https://cal.example/calendar/{y:04d}/{m}",
    "https://cal.example/calendar?year={y:04d}&month={m}",
    "https://cal.example/calendar?date={y:04d}-{m:02d}-01",
    "https://cal.example/day/{y:04d}{m:02d}01",
])
@pytest.mark.parametrize("step", [1, -1])
def test_an_endless_calendar_yields_a_bounded_number_of_urls(template, step):
    today = datetime.datetime.fromtimestamp(NOW, datetime.UTC).date()
    urls = [template.format(y=y, m=m) for y, m in next_months(today, 5000, step)]
    passed = [u for u in urls if first_rejection(u, 0, DEFAULT, NOW) is None]
    window = DEFAULT.traps.calendar_window_years
    assert len(passed) <= 12 * (window + 1)
    assert len(passed) >= 12 * window  # the months near today are crawled
    assert passed == urls[:len(passed)]  # and they are the first ones


def test_session_ids_are_removed_by_canonicalization_so_the_policy_exposes_them():
    # A site that appends a new session id to every link: canonicalization drops the parameter
    # (transforms.core.urls), so the links collapse into one URL each. The filters see clean URLs.
    for name in ("jsessionid", "PHPSESSID", "sid", "ASPSESSIONIDSQTCBCTA", "utm_source"):
        assert is_removed_param(name, DEFAULT.remove_params)
    assert not is_removed_param("page", DEFAULT.remove_params)


def test_ever_deeper_paths_stop_at_the_path_depth_limit():
    # A relative link "sub/" on a page that answers every path, with fresh names each level.
    paths = ["/" + "/".join(f"d{i}" for i in range(n)) + "/" for n in range(1, 200)]
    passed = [p for p in paths if rejection("https://trap.example" + p) is None]
    assert len(passed) == DEFAULT.traps.max_path_depth
    # The same link with a repeated name is caught long before that.
    loop = ["/" + "/".join(itertools.islice(itertools.cycle("ab"), n)) + "/" for n in range(1, 50)]
    assert sum(rejection("https://trap.example" + p) is None for p in loop) == 4  # to /a/b/a/b/


# ---- ordering and equivalence ---------------------------------------------------------------


def test_the_first_failing_filter_wins_and_check_url_shows_all_of_them():
    policy = HostPolicy(max_depth=0, max_url_length=30)
    url = "https://a.com/x/x/x/photo.jpg?" + "&".join("p=1" for _ in range(9))
    results = check_url(url, 5, policy, NOW)
    failed = [r.name for r in results if not r.passed]
    assert failed == ["url_length", "depth", "extension", "trap_repeated_segment",
                      "trap_query_params"]
    assert first_rejection(url, 5, policy, NOW) == results[3]


POLICIES = [
    DEFAULT,
    HostPolicy(allow_domains=("a.com",), deny_domains=("ads.a.com",), max_depth=2,
               deny_url_patterns=("/private/",), max_url_length=60,
               allowed_schemes=frozenset({"https"}),
               traps=TrapLimits(max_path_depth=3, max_query_params=1)),
]
URLS = [
    "https://a.com/", "http://a.com/", "ftp://a.com/f", "https://ads.a.com/", "https://b.com/",
    "https://a.com/private/x", "https://a.com/a/b/c/d", "https://a.com/x/x/x", "https://a.com/i.png",
    "https://a.com/?a=1&b=2", "https://a.com/cal/2099/01/", "https://a.com/" + "z" * 80, "",
    "not a url", "https://[::1]:8080/a", "https://user:pw@a.com:8443/p?q#frag",
]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("depth", [0, 3])
def test_first_rejection_is_the_first_failure_of_check_url(policy, depth):
    for url in URLS:
        results = check_url(url, depth, policy, NOW)
        expected = next((r for r in results if not r.passed), None)
        assert first_rejection(url, depth, policy, NOW) == expected, url
        assert all(r.reason in REJECTION_REASONS for r in results if not r.passed)
        assert all(r.reason == "" for r in results if r.passed)


def test_many_urls_go_through_without_trouble():
    # A sanity run of the hot path (no timing assertion: benchmarks live elsewhere).
    policy = HostPolicy(deny_url_patterns=(r"/cart/", r"sessionid"), deny_domains=("ads.com",))
    urls = [f"https://shop{i % 50}.example.com/cat/{i % 97}/item-{i}?page={i % 7}"
            for i in range(20_000)]
    assert all(first_rejection(u, i % 5, policy, NOW) is None for i, u in enumerate(urls))
