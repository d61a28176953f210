"""``crawler explain``: the pure replay of the pipeline's decisions (pipeline.ops.explain.explain),
its text and JSON forms, the command's exit codes, and the robots.txt fetch against a local
server."""

from __future__ import annotations

import calendar
import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.demo.exchange import Reply, RequestView
from pipeline.demo.server import LoggedServers
from pipeline.ops.explain import (
    BUDGET_NOTE,
    DEFAULT_USER_AGENT,
    explain,
    explanation_dict,
    fetch_robots_rules,
    format_explanation,
)
from transforms.core.filters import FILTER_NAMES
from transforms.core.policy import DEFAULT_POLICY
from transforms.core.policy_file import parse_policy
from transforms.core.robots import rules_from_response

NOW = float(calendar.timegm((2026, 6, 1, 12, 0, 0)))
ROBOTS_TXT = b"""\
User-agent: *
Disallow: /private/
Crawl-delay: 0.5

User-agent: special-bot
Disallow: /

Sitemap: https://example.org/sitemap.xml
"""
POLICY = {
    "defaults": {"deny_url_patterns": ["/cart/"], "max_depth": 3},
    "domains": {".org": {"min_delay": 0.25}},
    "hosts": {"example.org": {"priority_boost": 5, "remove_params": ["ref"],
                              "sort_query": True}},
}


def _explain(url: str, robots_txt: bytes | None = ROBOTS_TXT, policy: dict | None = None,
             depth: int = 0, priority: int = 0, user_agent: str = DEFAULT_USER_AGENT):
    rules = None if robots_txt is None else rules_from_response(200, robots_txt, NOW)
    return explain(url, parse_policy(POLICY if policy is None else policy), rules, user_agent,
                   depth, priority, NOW, robots_source="file robots.txt")


# --- explain -----------------------------------------------------------------------------------


def test_an_allowed_url_would_be_crawled_with_its_keys_priority_and_delay():
    e = _explain("HTTPS://Example.ORG/a/../page?b=2&ref=x&a=1#frag", priority=2)
    assert e.crawled and e.reason == "" and e.verdict == "would be crawled"
    # The host's remove_params and sort_query apply.
    assert e.canonical == "https://example.org/page?a=1&b=2"
    assert e.politeness_key == "example.org"
    assert e.row_key == "org.example:https/page?a=1&b=2"
    assert [f.name for f in e.filters] == list(FILTER_NAMES)
    assert all(f.passed for f in e.filters)
    assert e.budget == 10_000
    assert e.robots is not None
    assert (e.robots.mode, e.robots.allowed, e.robots.agent) == ("parsed", True, "beam-crawler")
    assert e.robots.url == "https://example.org/robots.txt"
    assert e.robots.sitemaps == ("https://example.org/sitemap.xml",)
    assert e.robots.crawl_delay == 0.5
    assert e.priority == 2 + 5
    assert e.delay == 0.5  # max(min_delay 0.25, Crawl-delay 0.5)


def test_a_robots_disallowed_url_is_not_crawled_and_says_why():
    e = _explain("https://example.org/private/x")
    assert all(f.passed for f in e.filters)
    assert e.robots is not None and not e.robots.allowed
    assert not e.crawled
    assert e.verdict == "would NOT be crawled: robots.txt: disallowed for beam-crawler"


def test_the_product_token_of_the_user_agent_selects_the_robots_group():
    e = _explain("https://example.org/page", user_agent="special-bot/2.0 (+https://x.example)")
    assert e.robots is not None and e.robots.agent == "special-bot"
    assert not e.crawled and e.robots.crawl_delay is None


def test_a_host_policy_user_agent_replaces_ours_as_in_the_pipeline():
    policy = {"hosts": {"example.org": {"user_agent": "special-bot/1.0"}}}
    e = _explain("https://example.org/page", policy=policy)
    assert e.user_agent == "special-bot/1.0"
    assert e.robots is not None and e.robots.agent == "special-bot" and not e.crawled


@pytest.mark.parametrize(("url", "depth", "name", "reason"), [
    ("https://example.org/cart/1", 0, "url_pattern", "url_pattern_denied"),
    ("https://example.org/page", 4, "depth", "too_deep"),
    ("https://example.org/img/photo.JPG", 0, "extension", "media_extension"),
    ("https://example.org/events/2031/01", 0, "trap_calendar", "trap_calendar"),
    ("https://example.org/a/x/a/x/a/x/a", 0, "trap_repeated_segment", "trap_repeated_segment"),
    ("ftp://example.org/file.txt", 0, "scheme", "scheme_not_allowed"),
])
def test_a_filtered_url_names_the_first_failing_filter(url, depth, name, reason):
    policy = {**POLICY, "defaults": {**POLICY["defaults"], "allowed_schemes": ["http", "https"]}}
    e = _explain(url, policy=policy, depth=depth)
    failed = [f for f in e.filters if not f.passed]
    assert failed[0].name == name and failed[0].reason == reason and failed[0].detail
    assert not e.crawled
    assert e.reason == f"filter {name}: {reason} ({failed[0].detail})"
    # Every filter is still reported, so the operator sees all that would stop the URL.
    assert len(e.filters) == len(FILTER_NAMES)


def test_a_filter_rejection_comes_before_robots_as_in_the_frontier():
    e = _explain("https://example.org/private/cart/1")
    assert e.robots is not None and not e.robots.allowed
    assert e.reason.startswith("filter url_pattern:")


@pytest.mark.parametrize(("url", "reason"), [
    ("example.org/page", "relative"),
    ("mailto:someone@example.org", "unsupported_scheme"),
    ("http://exa mple.org/", "bad_host"),
    ("http://example.org:99999/", "bad_port"),
])
def test_an_invalid_url_gets_its_reason_and_no_keys(url, reason):
    e = _explain(url)
    assert not e.crawled and e.canonical is None and e.politeness_key is None
    assert e.invalid is not None and e.invalid.startswith(reason)
    assert e.reason.startswith(f"invalid URL: {reason}")
    text = format_explanation(e)
    assert f"canonical        invalid URL: {reason}" in text
    assert text.endswith(f"verdict: would NOT be crawled: invalid URL: {e.invalid}")


def test_host_overrides_are_listed_in_order_and_marked():
    e = _explain("https://example.org/page")
    assert e.overrides == ('domains."org"', 'hosts."example.org"')
    assert set(e.overridden) == {"min_delay", "priority_boost", "remove_params", "sort_query"}
    assert e.policy["min_delay"] == 0.25 and e.policy["priority_boost"] == 5
    text = format_explanation(e)
    assert 'host policy      defaults + domains."org" + hosts."example.org"' in text
    assert "  priority_boost                     5  (override)" in text
    assert "  max_pages_per_host                 10000\n" in text
    other = _explain("https://example.com/page")
    assert other.overrides == () and other.overridden == ()
    assert "host policy      defaults\n" in format_explanation(other)


def test_unreachable_robots_disallows_all_per_rfc_9309():
    rules = rules_from_response(None, None, NOW, "ClientConnectorError: refused")
    e = explain("https://example.org/page", DEFAULT_POLICY, rules, DEFAULT_USER_AGENT, 0, 0, NOW)
    assert e.robots is not None and e.robots.mode == "disallow_all"
    assert e.reason == ("robots.txt: unreachable (ClientConnectorError: refused) -> disallow all "
                        "(RFC 9309)")
    # robots.txt itself stays allowed.
    e = explain("https://example.org/robots.txt", DEFAULT_POLICY, rules, DEFAULT_USER_AGENT, 0, 0,
                NOW)
    assert e.crawled


def test_an_unavailable_robots_txt_allows_all():
    rules = rules_from_response(404, b"not found", NOW)
    e = explain("https://example.org/private/x", DEFAULT_POLICY, rules, DEFAULT_USER_AGENT, 0, 0,
                NOW)
    assert e.crawled and e.robots is not None
    assert e.robots.summary == "status 404 -> allow all (RFC 9309: unavailable)"
    assert e.delay == 1.0


def test_without_robots_rules_robots_is_not_checked():
    e = _explain("ftp://example.org/pub/", robots_txt=None)
    assert e.robots is None and e.crawled
    assert "robots.txt       not checked" in format_explanation(e)


def test_the_text_form_has_every_section():
    text = format_explanation(_explain("https://example.org/cart/1", priority=1))
    lines = text.splitlines()
    assert lines[0] == "input            https://example.org/cart/1"
    assert "canonical        https://example.org/cart/1" in lines
    assert "politeness key   example.org" in lines
    assert "row key          org.example:https/cart/1" in lines
    assert "  scheme                  pass    -                      -" in lines
    assert "  url_pattern             FAIL    url_pattern_denied     /cart/" in lines
    assert "  budget                  ?       -                      max_pages_per_host 10000" in (
        lines)
    assert any(BUDGET_NOTE in line for line in lines)
    assert "robots.txt       https://example.org/robots.txt (file robots.txt)" in lines
    assert "  allowed        yes: allowed for beam-crawler" in lines
    assert "  crawl-delay    0.5 s" in lines
    assert "  sitemaps       https://example.org/sitemap.xml" in lines
    assert lines[-4].startswith("priority         6 (seed 1 + host boost 5)")
    assert lines[-3].startswith("delay            0.5 s between requests")
    assert lines[-1] == ("verdict: would NOT be crawled: filter url_pattern: url_pattern_denied "
                         "(/cart/)")


def test_the_json_form_holds_the_same():
    e = _explain("https://example.org/private/x", depth=1)
    data = json.loads(json.dumps(explanation_dict(e)))
    assert data["canonical"] == "https://example.org/private/x"
    assert data["politeness_key"] == "example.org"
    assert data["row_key"] == "org.example:https/private/x"
    assert data["overrides"] == ['domains."org"', 'hosts."example.org"']
    assert data["policy"]["traps.max_path_depth"] == 16
    assert [f["name"] for f in data["filters"]] == list(FILTER_NAMES)
    assert data["filters"][0] == {"name": "scheme", "passed": True, "reason": "", "detail": ""}
    assert data["budget"] == {"max_pages_per_host": 10_000, "checked": False,
                              "note": BUDGET_NOTE}
    assert data["robots"]["allowed"] is False and data["robots"]["crawl_delay"] == 0.5
    assert data["priority"] == 5 and data["delay"] == 0.5 and data["depth"] == 1
    assert data["crawled"] is False
    assert data["verdict"] == "would NOT be crawled: robots.txt: disallowed for beam-crawler"


# --- the command -------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    robots = tmp_path / "robots.txt"
    robots.write_bytes(ROBOTS_TXT)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(POLICY))
    return str(robots), str(policy)


def test_exit_code_0_when_it_would_be_crawled(files, capsys):
    robots, policy = files
    assert main(["explain", "https://example.org/page", "--robots-file", robots,
                 "--policy", policy, "--priority", "3"]) == 0
    out = capsys.readouterr().out
    assert "priority         8 (seed 3 + host boost 5)" in out
    assert out.rstrip().endswith("verdict: would be crawled")


@pytest.mark.parametrize("args", [
    ["https://example.org/private/x"],
    ["https://example.org/page", "--depth", "4"],
    ["https://example.org/page", "--user-agent", "special-bot/1.0"],
    ["not a url"],
])
def test_exit_code_1_when_it_would_not_be_crawled(files, capsys, args):
    robots, policy = files
    assert main(["explain", *args, "--robots-file", robots, "--policy", policy]) == 1
    assert "verdict: would NOT be crawled: " in capsys.readouterr().out


def test_json_output_is_one_object(files, capsys):
    robots, policy = files
    assert main(["explain", "https://example.org/img/a.png", "--robots-file", robots,
                 "--policy", policy, "--json"]) == 1
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1
    data = json.loads(out)
    assert data["reason"] == "filter extension: media_extension (png)"
    assert data["robots"]["source"] == f"file {robots}"


def test_exit_code_2_on_an_invalid_or_unreadable_policy(tmp_path, files, capsys):
    robots, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text("defaults:\n  min_delay: -1\n")
    assert main(["explain", "https://example.org/", "--robots-file", robots,
                 "--policy", str(bad)]) == 2
    assert f"{bad}: defaults.min_delay: must be >= 0, got -1" in capsys.readouterr().err
    assert main(["explain", "https://example.org/", "--robots-file", robots,
                 "--policy", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot load" in capsys.readouterr().err


def test_exit_code_2_on_an_unreadable_robots_file_or_negative_depth(tmp_path, files, capsys):
    _, policy = files
    assert main(["explain", "https://example.org/", "--robots-file", str(tmp_path / "none"),
                 "--policy", policy]) == 2
    assert "cannot read --robots-file" in capsys.readouterr().err
    assert main(["explain", "https://example.org/", "--depth", "-1"]) == 2


# --- fetching robots.txt -----------------------------------------------------------------------


@contextlib.contextmanager
def _serve(routes: dict[str, tuple[int, dict[str, str], bytes]]
           ) -> Iterator[tuple[str, LoggedServers]]:
    """A loopback site answering ``routes`` (path -> status, headers, body), 404 else; it gzips
    text as nginx does. Yields its base URL and its servers, which log every request."""
    def respond(request: RequestView) -> Reply:
        status, headers, body = routes.get(request.target, (404, {}, b"not found"))
        extra = tuple((k, v) for k, v in headers.items() if k.lower() != "content-type")
        return Reply(status, body, headers.get("Content-Type", "text/plain"), extra)

    with LoggedServers() as servers:
        yield servers.serve("127.0.0.1", respond), servers


def _seen(servers: LoggedServers) -> list[tuple[str, str | None]]:
    """The (path, User-Agent) of every request the servers got."""
    return [(h.path, h.headers.get("user-agent")) for h in servers.hits()]


def test_robots_txt_is_fetched_from_a_local_server_following_a_same_host_redirect():
    routes = {"/robots.txt": (301, {"Location": "/real/robots.txt"}, b""),
              "/real/robots.txt": (200, {"Content-Type": "text/plain"}, ROBOTS_TXT)}
    with _serve(routes) as (base, servers):
        rules = fetch_robots_rules(base + "/any/page", timeout=5, user_agent="test-bot/1.0")
        assert _seen(servers) == [("/robots.txt", "test-bot/1.0"),
                                  ("/real/robots.txt", "test-bot/1.0")]
        assert servers.hits(path="/real/robots.txt")[0].content_encoding == "gzip"
    assert rules.mode == "parsed" and rules.status == 200
    assert not rules.allows(base + "/private/x", "test-bot")
    assert rules.crawl_delay("test-bot") == 0.5


@pytest.mark.parametrize(("routes", "mode", "status", "error"), [
    ({"/robots.txt": (503, {}, b"busy")}, "disallow_all", 503, ""),
    ({}, "allow_all", 404, ""),
    ({"/robots.txt": (302, {"Location": "/robots.txt"}, b"")}, "allow_all", 404,
     "too many redirects"),
    ({"/robots.txt": (302, {"Location": "http://other.example/robots.txt"}, b"")}, "allow_all",
     404, "cross-host redirect"),
])
def test_robots_fetch_outcomes_follow_rfc_9309(routes, mode, status, error):
    with _serve(routes) as (base, servers):
        rules = fetch_robots_rules(base + "/", timeout=5)
    assert (rules.mode, rules.status, rules.error) == (mode, status, error)
    assert len(servers.hits()) == (6 if error == "too many redirects" else 1)


def test_an_unreachable_host_disallows_all():
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rules = fetch_robots_rules(f"http://127.0.0.1:{port}/page", timeout=5)
    assert rules.mode == "disallow_all" and rules.status is None and rules.error
    e = explain(f"http://127.0.0.1:{port}/page", DEFAULT_POLICY, rules, DEFAULT_USER_AGENT, 0, 0,
                NOW)
    assert e.reason.startswith("robots.txt: unreachable (")
    assert e.reason.endswith(") -> disallow all (RFC 9309)")


def test_the_command_fetches_robots_txt_without_robots_file(capsys):
    routes = {"/robots.txt": (200, {}, b"User-agent: *\nDisallow: /no/\n")}
    with _serve(routes) as (base, servers):
        assert main(["explain", base + "/yes/page"]) == 0
        assert main(["explain", base + "/no/page", "--json"]) == 1
        assert [ua for _, ua in _seen(servers)] == [DEFAULT_USER_AGENT] * 2
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["robots"]["source"] == "fetched" and data["robots"]["status"] == 200
    assert data["verdict"] == "would NOT be crawled: robots.txt: disallowed for beam-crawler"


def test_explain_shows_the_rules_the_host_learned_and_what_a_link_becomes(capsys):
    from pipeline.ops.explain import run_explain

    url = "http://127.0.0.1:9/facet/?size=m&color=red"
    asked: list[str] = []

    def rules_of(key: str) -> tuple[str, ...]:
        asked.append(key)
        return ("sort /facet/", "drop /item ref")

    robots = _robots_file_for_explain()
    code = run_explain(url, robots_file=robots, rules_of=rules_of)
    out = capsys.readouterr().out
    assert code == 0 and asked == ["127.0.0.1:9"]
    assert "learned rules    sort /facet/, drop /item ref" in out
    assert "fetched as http://127.0.0.1:9/facet/?color=red&size=m" in out
    run_explain(url, robots_file=robots, rules_of=lambda key: (), as_json=True)
    import json
    doc = json.loads(capsys.readouterr().out)
    assert doc["learned_rules"] == [] and doc["rewritten_by_rules"] is None


def _robots_file_for_explain() -> str:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("User-agent: *\nAllow: /\n")
    return f.name
