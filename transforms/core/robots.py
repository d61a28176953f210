"""robots.txt decisions (RFC 9309, the Robots Exclusion Protocol) for the crawler.

What a fetch of ``/robots.txt`` returned becomes a small picklable :class:`RobotsRules`, kept
per host in Beam state; decisions about URLs are made from it. The RFC 9309 rules followed:

* a 2xx response is parsed, at most its first ``ROBOTS_MAX_BYTES`` (500 KiB, the limit crawlers
  must at least parse, section 2.5), as UTF-8 with invalid bytes replaced (section 2.2). Its
  ``Content-Encoding`` (gzip, deflate, as a stock nginx sends a text file) is undone first and
  the 500 KiB apply to the decoded text; a body that cannot be decoded makes the site
  "unreachable" (below), never "no rules";
* a 4xx response ("unavailable", section 2.3.1.3) allows everything, and so does a redirect
  chain longer than the five hops the fetcher follows (2.3.1.2), which ends in a 3xx here;
* a 5xx response or no response at all (connection refused, DNS failure, timeout: status
  None; or a stray 1xx) makes the site "unreachable" (2.3.1.4): nothing may be crawled until
  robots.txt is fetched again. 429 Too Many Requests is treated as unreachable as well,
  although it is a 4xx: the server is asking us to slow down, not saying that there are no
  rules. The caller refetches on a schedule (the RFC allows treating a site unreachable for 30
  days as unavailable; that policy is the caller's);
* ``/robots.txt`` itself is always allowed (2.2.2).

The matching itself is done by ``protego``: user-agent groups are selected by product token,
case-insensitively, falling back to the ``*`` group, and groups naming the same agent are merged
(2.2.1); the longest matching rule wins and ``Allow`` wins a tie (2.2.2); ``*`` matches any
sequence of characters and ``$`` anchors the end of the path (2.2.3). It also reads
``Crawl-delay`` and ``Sitemap``, which RFC 9309 leaves to crawlers (2.2.4).

One correction before protego parses: in RFC 9309 a group is its user-agent lines followed by
its rules, and a line the parser does not know does not end the user-agent lines (2.2.4: other
records are ignored). protego ends them at any such line, so in::

    User-agent: a
    Noindex: /drafts
    User-agent: b
    Disallow: /private

``a`` would get no rule at all. :func:`rfc9309_groups` moves unknown lines after the group's
last user-agent line, so both agents share the rules that follow. The records protego knows
keep their meaning: ``Allow``, ``Disallow`` and ``Crawl-delay`` (which, as the crawlers that
honour it read it, belongs to the agents above it) end the user-agent lines; ``Sitemap`` and
``Host`` are not group members and end nothing.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from protego import Protego

from transforms.core.content import decode_body

ROBOTS_MAX_BYTES = 500 * 1024
ROBOTS_MAX_REDIRECTS = 5  # redirects the robots.txt fetch should follow (RFC 9309 2.3.1.2)

MODE_PARSED = "parsed"
MODE_ALLOW_ALL = "allow_all"
MODE_DISALLOW_ALL = "disallow_all"
MODES = frozenset({MODE_PARSED, MODE_ALLOW_ALL, MODE_DISALLOW_ALL})

# 4xx statuses that mean "come back later" rather than "there is no robots.txt".
UNREACHABLE_CLIENT_ERRORS = frozenset({429})

# A rule line as RFC 9309 section 2.2 writes it (case-insensitive key, optional blanks).
_RULE_LINE = re.compile(r"^[ \t]*(?:dis)?allow[ \t]*:", re.IGNORECASE | re.MULTILINE)

# Parsed robots.txt files kept per process. Most are a few KB; the worst case (every one at
# ROBOTS_MAX_BYTES) would hold ~250 MB, which no real crawl approaches.
_PARSED_CACHE_SIZE = 512


@dataclass(frozen=True)
class RobotsRules:
    """What robots.txt says about one host, as of one fetch.

    Attributes:
        mode: ``parsed`` (decide from ``text``), ``allow_all`` or ``disallow_all``.
        text: the robots.txt body (at most ``ROBOTS_MAX_BYTES`` of UTF-8) when ``parsed``.
        status: the HTTP status of the fetch, None when there was no response.
        fetched_at: when it was fetched, in seconds since the epoch.
        error: why the fetch failed, or ``""``.

    The parsed form is not stored: it is rebuilt from ``text`` on first use in a process and
    cached by text, so the rules stay small in state and cheap to decide with.
    """

    mode: str
    text: str
    status: int | None
    fetched_at: float
    error: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, got {self.mode!r}")

    def allows(self, url: str, user_agent: str) -> bool:
        """Return True if ``user_agent`` (its product token, e.g. ``BeamCrawler``) may fetch
        ``url``."""
        if self.mode == MODE_ALLOW_ALL:
            return True
        if self.mode == MODE_DISALLOW_ALL:
            return _is_robots_txt(url)
        return _decide(_parsed(self.text), url, user_agent)

    def crawl_delay(self, user_agent: str) -> float | None:
        """Return the ``Crawl-delay`` in seconds of the group ``user_agent`` obeys, or None."""
        if self.mode != MODE_PARSED:
            return None
        return _parsed(self.text).crawl_delay(user_agent)

    def sitemaps(self) -> tuple[str, ...]:
        """Return the ``Sitemap`` URLs, in file order."""
        if self.mode != MODE_PARSED:
            return ()
        return tuple(_parsed(self.text).sitemaps)


def rules_from_response(
    status: int | None, body: bytes | None, fetched_at: float, error: str = "",
    content_encoding: str | None = None, cut: bool = False,
) -> RobotsRules:
    """Return the rules implied by the response to a robots.txt fetch.

    A 2xx body is decoded per its ``Content-Encoding`` first (``transforms.core.content``), capped
    at ``ROBOTS_MAX_BYTES`` *decoded*, so a compressed robots.txt is read like a plain one and
    a gzip bomb stays bounded. A body that cannot be decoded (an unknown coding, a corrupt
    stream) is not read as "no rules": that would allow everything. It is treated like an
    unreachable robots.txt (disallow all, fetched again later), with the reason in ``error``.

    Args:
        status: the final HTTP status after the fetcher followed up to
            ``ROBOTS_MAX_REDIRECTS`` redirects, or None when no response was received.
        body: the response body as sent (only read for 2xx).
        fetched_at: when the fetch ended, in seconds since the epoch.
        error: the fetch error, if any (kept for the hosts table).
        content_encoding: the response's ``Content-Encoding``, None for none.
        cut: the fetch stopped reading the body at its limit (a compressed stream then ends
            early without being corrupt).
    """
    if status is None or status >= 500 or status < 200 or status in UNREACHABLE_CLIENT_ERRORS:
        return RobotsRules(MODE_DISALLOW_ALL, "", status, fetched_at, error)
    if status >= 300:
        return RobotsRules(MODE_ALLOW_ALL, "", status, fetched_at, error)
    decoded = decode_body(body or b"", content_encoding, ROBOTS_MAX_BYTES, cut)
    if not decoded.ok:
        return RobotsRules(MODE_DISALLOW_ALL, "", status, fetched_at,
                           f"not decodable: {decoded.error}")
    return RobotsRules(MODE_PARSED, decode_robots(decoded.data, cut=decoded.truncated), status,
                       fetched_at, error)


def decode_robots(body: bytes, cut: bool | None = None) -> str:
    """Return the part of a robots.txt body that is parsed, as text.

    At most ``ROBOTS_MAX_BYTES`` are kept; when the body is longer (or ``cut`` says it was
    cut already) the last, cut line is dropped too, so that e.g. ``Disallow: /private`` cut to
    ``Disallow: /p`` is not enforced (nor ``Allow: /private`` cut to ``Allow: /``). Invalid
    UTF-8 is replaced and a byte order mark dropped.
    """
    if cut or len(body) > ROBOTS_MAX_BYTES:
        body = body[:ROBOTS_MAX_BYTES]
        last_newline = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[: last_newline + 1]
    return body.decode("utf-8-sig", errors="replace")


def rule_count(text: str) -> int:
    """How many rule lines (``Allow``/``Disallow``, any group) a robots.txt text holds.

    Shown per host in the run summary: a non-empty robots.txt with zero rules is how a body
    that was never decoded (or is not a robots.txt at all) becomes visible.
    """
    return _rule_count(text)


@functools.lru_cache(maxsize=_PARSED_CACHE_SIZE)
def _rule_count(text: str) -> int:
    return len(_RULE_LINE.findall(text))


def has_content(text: str) -> bool:
    """True when a robots.txt text holds anything besides blank lines and comments."""
    return any(line.split("#", 1)[0].strip() for line in text.splitlines())


def product_token(user_agent: str) -> str:
    """The product token that robots.txt groups are matched against: ``beam-crawler/0.1 (+url)``
    -> ``beam-crawler``; ``*`` when there is none."""
    token = user_agent.split("/", 1)[0].strip()
    return token.split()[0] if token else "*"


def is_allowed(robots_txt: str, user_agent: str, url: str) -> bool:
    """Return True if the robots.txt body ``robots_txt`` lets ``user_agent`` fetch ``url``.

    A one-shot decision for callers holding the text (repeated calls with the same text reuse
    one parse).
    """
    return _decide(_parsed(robots_txt), url, user_agent)


@functools.lru_cache(maxsize=_PARSED_CACHE_SIZE)
def _parsed(text: str) -> Protego:
    # Keyed by the text itself: hosts sharing a robots.txt share a parse, and a str caches its
    # hash, so a hit costs one identity comparison for rules that live in one process.
    return Protego.parse(rfc9309_groups(text))


_FIELD = re.compile(r"^\s*([A-Za-z-]+)\s*:")
# Records that end a group's user-agent lines; the other records protego knows are global.
_GROUP_FIELDS = frozenset({"allow", "disallow", "crawl-delay", "request-rate", "visit-time"})
_GLOBAL_FIELDS = frozenset({"sitemap", "host"})


def rfc9309_groups(text: str) -> str:
    """``text`` with every unknown line that sits between two user-agent lines of a group
    moved after the group's last user-agent line, so that protego, which ends the group at
    such a line, reads it as RFC 9309 does (see the module docstring). Everything else stays
    where it is."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    held: list[str] = []  # lines waiting for the end of the current user-agent run
    in_agents = False
    for line in lines:
        match = _FIELD.match(line.split("#", 1)[0])
        field = match.group(1).lower() if match else None
        if field == "user-agent":
            in_agents = True
            out.append(line)
        elif field is None or not in_agents or field in _GLOBAL_FIELDS:
            out.append(line)
        elif field in _GROUP_FIELDS:
            out.extend(held)
            held, in_agents = [], False
            out.append(line)
        else:
            held.append(line if line.endswith(("\n", "\r")) else line + "\n")
    out.extend(held)
    return "".join(out)


def _decide(parser: Protego, url: str, user_agent: str) -> bool:
    try:
        return parser.can_fetch(url, user_agent)
    except ValueError:
        # urlsplit rejects some malformed URLs (e.g. an unclosed IPv6 bracket); such a URL is
        # not one the crawler could fetch, so it is not allowed.
        return False


def _is_robots_txt(url: str) -> bool:
    try:
        return urlsplit(url).path == "/robots.txt"
    except ValueError:
        return False
