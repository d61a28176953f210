"""Tests of robots.txt decisions (RFC 9309)."""

from __future__ import annotations

import gzip
import pickle
import random
import zlib

import pytest

from transforms.core.robots import (
    MODE_ALLOW_ALL,
    MODE_DISALLOW_ALL,
    MODE_PARSED,
    ROBOTS_MAX_BYTES,
    RobotsRules,
    decode_robots,
    has_content,
    is_allowed,
    rule_count,
    rules_from_response,
)

# The example of RFC 9309 section 5.1, with its rules spread over several groups.
RFC_EXAMPLE = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot
"""

SITE = "https://www.example.com"


def parsed(text: str) -> RobotsRules:
    return rules_from_response(200, text.encode("utf-8"), fetched_at=1.0)


@pytest.mark.parametrize(
    ("agent", "path", "allowed"),
    [
        # The "*" group, for agents without a group of their own.
        ("otherbot", "/", True),
        ("otherbot", "/example/", False),
        ("otherbot", "/example/page.html", False),
        ("otherbot", "/publications/", True),
        ("otherbot", "/image.gif", False),
        ("otherbot", "/image.gif?x=1", True),  # "$" anchors the end
        ("otherbot", "/a/b/image.gif", False),  # "*" matches any sequence
        # foobot: its own group only, never merged with "*".
        ("foobot", "/", False),
        ("foobot", "/publications/", False),
        ("foobot", "/example/page.html", True),
        ("foobot", "/example/allowed.gif", True),
        ("FooBot", "/example/page.html", True),  # agent names match case-insensitively
        ("FooBot/2.1", "/example/page.html", True),  # the product token is matched
        # Two agents sharing one group.
        ("barbot", "/example/page.html", False),
        ("bazbot", "/example/page.html", False),
        ("barbot", "/example/", True),
        ("bazbot", "/image.gif", True),
        # An empty group allows everything.
        ("quxbot", "/example/", True),
        ("quxbot", "/image.gif", True),
    ],
)
def test_rfc_example_group_selection(agent: str, path: str, allowed: bool) -> None:
    assert parsed(RFC_EXAMPLE).allows(SITE + path, agent) is allowed
    assert is_allowed(RFC_EXAMPLE, agent, SITE + path) is allowed


@pytest.mark.parametrize(
    ("rules", "path", "allowed"),
    [
        # The longest (most specific) match wins, whichever comes first (RFC 9309 2.2.2).
        ("Allow: /example/page/\nDisallow: /example/page/disallowed.gif",
         "/example/page/disallowed.gif", False),
        ("Allow: /example/page/\nDisallow: /example/page/disallowed.gif", "/example/page/x", True),
        ("Disallow: /example/page/disallowed.gif\nAllow: /example/page/",
         "/example/page/disallowed.gif", False),
        ("Disallow: /\nAllow: /public", "/public/a", True),
        ("Disallow: /\nAllow: /public", "/private", False),
        # An allow rule wins a tie with an equivalent disallow rule.
        ("Disallow: /page\nAllow: /page", "/page", True),
        ("Allow: /page\nDisallow: /page", "/page", True),
        ("Disallow: /*.php\nAllow: /*.php", "/x.php", True),
        # Wildcards.
        ("Disallow: /*/private/", "/a/b/private/x", False),
        ("Disallow: /*/private/", "/private/x", True),
        ("Disallow: /foo$", "/foo", False),
        ("Disallow: /foo$", "/foo/", True),
        ("Disallow: /foo$", "/foo?bar", True),
        ("Disallow: /*?", "/search?q=x", False),
        ("Disallow: /*?", "/search", True),
        ("Disallow: /", "/robots.txt", True),  # robots.txt itself is always allowed
        # Empty rules mean nothing.
        ("Disallow:", "/anything", True),
        # Paths are compared after percent-decoding of unreserved characters.
        ("Disallow: /~user", "/%7Euser/page", False),
    ],
)
def test_rule_matching(rules: str, path: str, allowed: bool) -> None:
    text = "User-agent: *\n" + rules + "\n"
    assert parsed(text).allows(SITE + path, "beamcrawler") is allowed


def test_groups_for_the_same_agent_are_merged() -> None:
    text = "User-agent: a\nDisallow: /x\n\nUser-agent: b\nDisallow: /y\n\nUser-agent: a\n" \
           "Disallow: /z\n"
    rules = parsed(text)
    assert not rules.allows(SITE + "/x", "a")
    assert not rules.allows(SITE + "/z", "a")
    assert rules.allows(SITE + "/y", "a")


def test_without_a_star_group_unknown_agents_may_fetch() -> None:
    rules = parsed("User-agent: foobot\nDisallow: /\n")
    assert rules.allows(SITE + "/a", "beamcrawler")
    assert not rules.allows(SITE + "/a", "foobot")


def test_crawl_delay() -> None:
    text = ("User-agent: *\nCrawl-delay: 0.5\n\nUser-agent: slowbot\nCrawl-delay: 10\n\n"
            "User-agent: badbot\nCrawl-delay: soon\n")
    rules = parsed(text)
    assert rules.crawl_delay("beamcrawler") == 0.5
    assert rules.crawl_delay("slowbot") == 10.0
    assert rules.crawl_delay("badbot") is None
    assert parsed("User-agent: *\nDisallow: /x\n").crawl_delay("beamcrawler") is None


def test_sitemaps() -> None:
    text = ("Sitemap: https://www.example.com/sitemap.xml\nUser-agent: *\nDisallow: /x\n"
            "Sitemap: https://www.example.com/news.xml\n")
    assert parsed(text).sitemaps() == (
        "https://www.example.com/sitemap.xml",
        "https://www.example.com/news.xml",
    )
    assert parsed("User-agent: *\n").sitemaps() == ()


@pytest.mark.parametrize(
    ("status", "mode"),
    [
        (200, MODE_PARSED),
        (204, MODE_PARSED),
        (301, MODE_ALLOW_ALL),  # the fetcher gave up following redirects
        (400, MODE_ALLOW_ALL),
        (401, MODE_ALLOW_ALL),
        (403, MODE_ALLOW_ALL),
        (404, MODE_ALLOW_ALL),
        (410, MODE_ALLOW_ALL),
        (429, MODE_DISALLOW_ALL),
        (500, MODE_DISALLOW_ALL),
        (503, MODE_DISALLOW_ALL),
        (100, MODE_DISALLOW_ALL),
        (None, MODE_DISALLOW_ALL),
    ],
)
def test_status_decides_mode(status: int | None, mode: str) -> None:
    rules = rules_from_response(status, b"User-agent: *\nDisallow: /\n", 5.0, error="e")
    assert (rules.mode, rules.status, rules.fetched_at, rules.error) == (mode, status, 5.0, "e")
    url = SITE + "/page"
    assert rules.allows(url, "beamcrawler") is (mode == MODE_ALLOW_ALL)
    assert rules.allows(SITE + "/robots.txt", "beamcrawler")
    assert rules.crawl_delay("beamcrawler") is None
    assert rules.sitemaps() == ()


def test_unreachable_when_there_is_no_response() -> None:
    rules = rules_from_response(None, None, 3.0, error="connection refused")
    assert rules.mode == MODE_DISALLOW_ALL
    assert rules.error == "connection refused"
    assert not rules.allows("http://127.0.0.2:8081/", "beamcrawler")


def test_empty_2xx_body_allows_everything() -> None:
    rules = rules_from_response(200, None, 1.0)
    assert rules.mode == MODE_PARSED and rules.text == ""
    assert rules.allows(SITE + "/x", "beamcrawler")


def test_body_is_truncated_at_500_kib() -> None:
    filler = b"# " + b"x" * 98 + b"\n"
    head = b"User-agent: *\nDisallow: /early\n"
    body = head + filler * (ROBOTS_MAX_BYTES // len(filler)) + b"Disallow: /late\n"
    assert len(body) > ROBOTS_MAX_BYTES
    rules = rules_from_response(200, body, 1.0)
    assert len(rules.text.encode("utf-8")) <= ROBOTS_MAX_BYTES
    assert not rules.allows(SITE + "/early", "beamcrawler")
    assert rules.allows(SITE + "/late", "beamcrawler")


def test_a_line_cut_by_truncation_is_dropped() -> None:
    prefix = b"User-agent: *\n" + b"#" * (ROBOTS_MAX_BYTES - 30) + b"\n"
    body = prefix + b"Allow: /private-but-cut-here\nDisallow: /\n"
    text = decode_robots(body)
    assert text.endswith("\n") and "Allow" not in text


def test_decoding_replaces_invalid_utf8_and_drops_bom() -> None:
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /caf\xe9\xff\nDisallow: /x\n"
    text = decode_robots(body)
    assert text == "User-agent: *\nDisallow: /caf\ufffd\ufffd\nDisallow: /x\n"
    # Had the BOM stayed, the first line would not read as User-agent and no rule would apply.
    assert not rules_from_response(200, body, 1.0).allows(SITE + "/x", "beamcrawler")


def test_rules_are_small_and_picklable() -> None:
    rules = parsed(RFC_EXAMPLE)
    assert rules.allows(SITE + "/example/", "otherbot") is False  # parse happens here
    data = pickle.dumps(rules)
    assert len(data) < len(RFC_EXAMPLE) + 300
    copy = pickle.loads(data)
    assert copy == rules
    assert copy.allows(SITE + "/example/", "otherbot") is False


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError):
        RobotsRules("maybe", "", 200, 0.0)


_GARBAGE_TOKENS = [
    "User-agent:", "user-agent", "Disallow:", "Allow:", "Crawl-delay:", "Request-rate:",
    "Visit-time:", "Sitemap:", "Host:", "*", "$", "/", "#", ":", "\n", "\r\n", "\r", " ", "\t",
    "1/0", "0-0", "9" * 30, "nan", "inf", "-1", "1e400", "%", "%zz", "%C3", "\u00e9", "\x00",
    "\ufeff", "/a*b$", "**", "25:99-", "<html>", "\ud800",
]


def test_garbage_never_raises() -> None:
    rng = random.Random(3)
    urls = [SITE + "/", SITE + "/a*b$?q", "/robots.txt", "", "http://[bad/", "%", "\ud800"]
    for _ in range(2000):
        if rng.random() < 0.5:
            body = "".join(rng.choice(_GARBAGE_TOKENS) for _ in range(rng.randint(0, 60)))
            data = body.encode("utf-8", "surrogatepass")
        else:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        rules = rules_from_response(200, data, 0.0)
        for url in urls:
            for agent in ("beamcrawler", "", "*"):
                assert isinstance(rules.allows(url, agent), bool)
                assert isinstance(is_allowed(rules.text, agent, url), bool)
            delay = rules.crawl_delay("beamcrawler")
            assert delay is None or delay >= 0
            assert all(isinstance(s, str) for s in rules.sitemaps())


# -- robots.txt as a server sends it: Content-Encoding ------------------------------------------

POLITE = b"User-agent: *\nDisallow: /genindex-\nCrawl-delay: 0.5\nSitemap: http://h/s.xml\n"


def _raw_deflate(data: bytes) -> bytes:
    deflater = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return deflater.compress(data) + deflater.flush()


@pytest.mark.parametrize(("encoding", "body"), [
    (None, POLITE),
    ("identity", POLITE),
    ("gzip", gzip.compress(POLITE)),
    ("deflate", zlib.compress(POLITE)),
    ("deflate", _raw_deflate(POLITE)),
])
def test_an_encoded_robots_txt_is_read_like_a_plain_one(encoding, body) -> None:
    rules = rules_from_response(200, body, 1.0, content_encoding=encoding)
    assert rules.mode == MODE_PARSED and rules.text == POLITE.decode()
    assert not rules.allows(SITE + "/genindex-A.html", "beamcrawler")
    assert rules.allows(SITE + "/index.html", "beamcrawler")
    assert rules.crawl_delay("beamcrawler") == 0.5
    assert rules.sitemaps() == ("http://h/s.xml",)
    assert rule_count(rules.text) == 1


def test_a_gzip_bomb_robots_txt_is_cut_at_500_kib_decoded() -> None:
    # 100 MB of rules compress to about 100 KB: within the fetch's raw limit, far beyond the
    # parser's. The decoded text stops at the cap, and the cut line is dropped.
    rule = b"Disallow: /private-area-of-the-site/\n"
    body = gzip.compress(b"User-agent: *\n" + rule * (100_000_000 // len(rule)), 9)
    assert len(body) < ROBOTS_MAX_BYTES
    rules = rules_from_response(200, body, 1.0, content_encoding="gzip")
    assert rules.mode == MODE_PARSED
    assert len(rules.text.encode()) <= ROBOTS_MAX_BYTES and rules.text.endswith("\n")
    assert not rules.allows(SITE + "/private-area-of-the-site/x", "beamcrawler")
    assert rule_count(rules.text) == ROBOTS_MAX_BYTES // len(rule)


@pytest.mark.parametrize(("encoding", "body", "why"), [
    ("gzip", gzip.compress(POLITE)[:12] + b"\xde\xad" * 30, "corrupt gzip"),
    ("gzip", POLITE, "corrupt gzip: no gzip header"),  # says gzip, sends plain text
    ("br", b"\x1b\x3a\x00\xf8", "unknown content-encoding 'br'"),
])
def test_an_undecodable_robots_txt_disallows_all_and_says_why(encoding, body, why) -> None:
    # RFC 9309 2.3.1.4: rules we cannot read are "unreachable", never "no rules, allow all".
    rules = rules_from_response(200, body, 1.0, content_encoding=encoding)
    assert rules.mode == MODE_DISALLOW_ALL and rules.status == 200
    assert rules.error.startswith(f"not decodable: {why}"), rules.error
    assert not rules.allows(SITE + "/index.html", "beamcrawler")
    assert rules.allows(SITE + "/robots.txt", "beamcrawler")


def test_rule_count_and_content() -> None:
    assert rule_count(RFC_EXAMPLE) == 7
    assert rule_count("User-agent: *\n  disallow :\n# Allow: /x\nAllowed: no\n") == 1
    assert has_content("User-agent: *\n") and not has_content("# only a comment\n\n  \n")
    # What the bug looked like: gzip bytes read as text have content and no rule.
    garbled = gzip.compress(POLITE).decode("utf-8", "replace")
    assert has_content(garbled) and rule_count(garbled) == 0


def test_a_plain_robots_txt_cut_at_the_fetch_limit_drops_its_cut_line() -> None:
    # The fetcher reads at most ROBOTS_MAX_BYTES and says it stopped there.
    body = (b"User-agent: *\n" + b"#" * (ROBOTS_MAX_BYTES - 40) + b"\n"
            + b"Disallow: /private-but-cut")[:ROBOTS_MAX_BYTES]
    assert len(body) == ROBOTS_MAX_BYTES
    rules = rules_from_response(200, body, 1.0, cut=True)
    assert rules.text.endswith("\n") and "Disallow" not in rules.text


# --- RFC 9309 groups: an unknown line does not end a group's user-agent lines -----------------

SHARED_GROUP = ("User-agent: alpha\n"
                "Noindex: /drafts\n"
                "Unknown-field: anything\n"
                "User-agent: beta\n"
                "Disallow: /private\n"
                "Crawl-delay: 5\n"
                "\n"
                "User-agent: gamma\n"
                "Crawl-delay: 2\n"
                "User-agent: delta\n"
                "Allow: /\n")


@pytest.mark.parametrize("agent", ["alpha", "beta"])
def test_an_unknown_line_between_two_user_agents_does_not_end_the_group(agent):
    """RFC 9309 2.1 and 2.2.4: both agents of the first group get its rule and its
    Crawl-delay (protego alone gives alpha nothing: it ends the group at the Noindex line)."""
    assert not is_allowed(SHARED_GROUP, agent, "https://h.example/private/x")
    rules = RobotsRules("parsed", SHARED_GROUP, 200, 0.0)
    assert rules.crawl_delay(agent) == 5.0
    assert rules.allows("https://h.example/public", agent)


def test_rules_and_crawl_delay_still_end_the_user_agent_lines():
    rules = RobotsRules("parsed", SHARED_GROUP, 200, 0.0)
    assert rules.crawl_delay("gamma") == 2.0 and rules.crawl_delay("delta") is None
    assert rules.allows("https://h.example/private", "delta")


def test_the_group_fix_moves_unknown_lines_and_keeps_everything_else_in_place():
    from transforms.core.robots import rfc9309_groups

    fixed = rfc9309_groups(SHARED_GROUP)
    assert sorted(fixed.splitlines()) == sorted(SHARED_GROUP.splitlines())
    assert fixed.splitlines()[:4] == ["User-agent: alpha", "User-agent: beta",
                                      "Noindex: /drafts", "Unknown-field: anything"]
    for plain in ("User-agent: *\nDisallow: /a\nSitemap: https://h.example/s.xml\n",
                  "User-agent: a\nSitemap: https://h.example/s.xml\nUser-agent: b\n"
                  "Disallow: /x\n"):
        assert rfc9309_groups(plain) == plain
