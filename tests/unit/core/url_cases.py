"""URL samples shared by the tests of ``transforms.core.urls`` and ``transforms.formats.rowkeys``: a
seeded fuzzer of URL-like strings and a list of canonical URLs of every shape."""

from __future__ import annotations

import random

from transforms.core.urls import InvalidUrl, canonicalize_url

RFC_BASE = "http://a/b/c/d;p?q"

_FUZZ_ALPHABET = [
    *"aZ09:/?#[]@%.-_~!$&'()*+,;= \t\r\n\\|<>\"{}`^",
    "\u00e9", "\u00df", "\u3002", "\uff45", "\x00", "\x7f", "\ud800", "\U0001f600",
    "%2e", "%2F", "%41", "%C3%A9", "..", "//", ":80", ":443", ":0", "[::1]", "xn--", "@",
    "http://", "https://", "HTTP://", "mailto:", "//",
]


def _random_string(rng: random.Random) -> str:
    text = "".join(rng.choice(_FUZZ_ALPHABET) for _ in range(rng.randint(0, 30)))
    if rng.random() < 0.5:
        text = rng.choice(["http://", "https://", "hTTp://", "//", "/", ""]) + text
    return text


def fuzz_cases(count: int, seed: int) -> list[tuple[str, str | None]]:
    """``count`` random (reference, base) pairs, the same for the same ``seed``."""
    rng = random.Random(seed)
    bases = [None, RFC_BASE, "https://example.com/dir/page?x", "mailto:x", "\ud800", "http://"]
    return [(_random_string(rng), rng.choice(bases)) for _ in range(count)]


# Pieces of query strings and path parameters, session ids and tracking parameters among them.
_PARAM_ALPHABET = [
    "&", "=", ";", "?", "/", "/..", "/.", "%", "%5F", "%3B", "%26", "a", "B", "1", "\u00e9", "#",
    "utm_source=x", "UTM_Medium", "sid=", "SID", "sidebar=1", "jsessionid=AB12", ";jsessionid=",
    "PhpSessId=9", "aspsessionidQXYZ=1", "gclid", "x=1", "y=", "a=2", "a=10",
]
# (remove_params, sort_query) pairs to run the fuzzers with.
OPTIONS: list[tuple[tuple[str, ...], bool]] = [
    (("jsessionid", "phpsessid", "sid", "utm_*", "gclid"), False),
    ((), True),
    (("*",), False),
    (("a", "x?", "[bs]*"), True),
]


def param_fuzz_cases(count: int, seed: int) -> list[tuple[str, str | None]]:
    """``count`` random (reference, base) pairs heavy in query and path parameters."""
    rng = random.Random(seed)
    bases = [None, RFC_BASE, "https://example.com/dir;sid=1/page?utm_source=a&b"]
    cases = []
    for _ in range(count):
        path = "".join(rng.choice(_PARAM_ALPHABET) for _ in range(rng.randint(0, 12)))
        query = "".join(rng.choice(_PARAM_ALPHABET) for _ in range(rng.randint(0, 12)))
        prefix = rng.choice(["http://Example.com/", "https://h.example:8080/", "/", ""])
        cases.append((f"{prefix}{path}?{query}", rng.choice(bases)))
    return cases


def valid_urls() -> list[str]:
    """Canonical URLs: the accepted fuzz cases plus a few of every shape."""
    urls = []
    for url, base in fuzz_cases(20_000, seed=11):
        try:
            urls.append(canonicalize_url(url, base))
        except InvalidUrl:
            pass
    urls += [canonicalize_url(url) for url in [
        "https://www.example.com/a/b?q=1",
        "http://example.com:8080/",
        "http://127.0.0.2:8081/x",
        "http://[2001:db8::1]:8080/p?q",
        "http://user:pw@example.com:81/p?q#f",
        "http://B\u00fccher.de/\u00e9?\u00e9",
        "https://a.b.c.d.example.co.uk/x:y/z?a=b:c",
        "http://1.2.3.999/",
    ]]
    return urls
