"""The examples of RFC 3986 through ``canonicalize_url``: section 6 (normalization and
comparison) and section 5.4 (reference resolution).

Where the crawler's canonical form differs from the RFC's result, the expected value says how,
in a comment: the fragment is dropped, an empty path is ``/``, an empty query is dropped.
"""

from __future__ import annotations

import pytest

from tests.unit.core.url_cases import RFC_BASE
from transforms.core.urls import InvalidUrl, canonicalize_url

UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"


# 6.2.2: the RFC's example of two equivalent URIs under syntax-based normalization.
def test_syntax_based_normalization_example() -> None:
    scheme = frozenset({"example"})
    expected = "example://a/b/c/%7Bfoo%7D"
    assert canonicalize_url("example://a/b/c/%7Bfoo%7D", allowed_schemes=scheme) == expected
    assert canonicalize_url("eXAMPLE://a/./b/../b/%63/%7bfoo%7d", allowed_schemes=scheme) == (
        expected
    )


# 6.2.2.1 Case normalization: scheme and host lowercased, percent-encoding hex uppercased, the
# rest of the URI (path, query, userinfo) left as it is.
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://www.Example.com/", "http://www.example.com/"),
        ("http://www.example.com/a%3ab%2fc", "http://www.example.com/a%3Ab%2Fc"),
        ("http://example.com/?q=%e2%82%ac", "http://example.com/?q=%E2%82%AC"),
        ("http://Us%c3%a9r@example.com/", "http://Us%C3%A9r@example.com/"),
        ("http://example.com/Path/CASE?Query=CASE", "http://example.com/Path/CASE?Query=CASE"),
    ],
)
def test_case_normalization(url: str, expected: str) -> None:
    assert canonicalize_url(url) == expected


# 6.2.2.2 Percent-encoding normalization: escapes of unreserved characters are decoded.
def test_percent_encoding_normalization_example() -> None:
    assert canonicalize_url("http://example.com/%7Esmith/") == "http://example.com/~smith/"


@pytest.mark.parametrize("char", UNRESERVED)
def test_every_unreserved_escape_is_decoded(char: str) -> None:
    escape = f"%{ord(char):02x}"
    url = f"http://example.com/a{escape}b?{escape.upper()}"
    assert canonicalize_url(url) == f"http://example.com/a{char}b?{char}"


@pytest.mark.parametrize("char", ":/?#[]@!$&'()*+,;= %")
def test_reserved_and_other_escapes_are_kept(char: str) -> None:
    escape = f"%{ord(char):02X}"
    assert canonicalize_url(f"http://example.com/a{escape.lower()}b") == (
        f"http://example.com/a{escape}b"
    )


# 6.2.2.3 Path segment normalization: dot segments removed, as in 5.2.4.
@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        ("http://example.com/a/b/c/./../../g", None, "http://example.com/a/g"),
        ("mid/content=5/../6", "http://example.com/", "http://example.com/mid/6"),
        ("http://example.com/a/%2E%2e/b/%2e/c", None, "http://example.com/b/c"),
    ],
)
def test_path_segment_normalization(url: str, base: str | None, expected: str) -> None:
    assert canonicalize_url(url, base) == expected


# 6.2.3 Scheme-based normalization: these four are equivalent for http.
@pytest.mark.parametrize(
    "url",
    ["http://example.com", "http://example.com/", "http://example.com:/", "http://example.com:80/"],
)
def test_scheme_based_normalization(url: str) -> None:
    assert canonicalize_url(url) == "http://example.com/"


def test_empty_query_is_dropped() -> None:
    # The RFC declines to equate "http://example.com/?" with the four above; for http(s), as
    # for every crawler, "?" with nothing after it selects the same resource.
    assert canonicalize_url("http://example.com/?") == "http://example.com/"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com:443", "https://example.com/"),
        ("https://example.com:/", "https://example.com/"),
        ("ftp://example.com:21", "ftp://example.com/"),
        ("ftp://example.com:/pub/./a/../b", "ftp://example.com/pub/b"),
    ],
)
def test_scheme_based_normalization_of_other_schemes(url: str, expected: str) -> None:
    schemes = frozenset({"http", "https", "ftp"})
    assert canonicalize_url(url, allowed_schemes=schemes) == expected


# 6.2.1 and 6.2.4: equivalences only the server could establish are not assumed.
def test_protocol_based_equivalences_are_not_assumed() -> None:
    assert canonicalize_url("http://example.com/data") != canonicalize_url(
        "http://example.com/data/"
    )
    assert canonicalize_url("http://example.com/a/") != canonicalize_url("http://example.com/a//")


# 6.2.3 also compares "mailto:Joe@Example.COM": not a URL the crawler fetches.
def test_mailto_example_is_rejected() -> None:
    with pytest.raises(InvalidUrl) as info:
        canonicalize_url("mailto:Joe@Example.COM")
    assert info.value.reason == "unsupported_scheme"


# 5.4.1 Normal examples, base "http://a/b/c/d;p?q". ";p" is a path parameter that the default
# list leaves alone (only session ids and tracking parameters are removed).
@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g/"),  # RFC: "http://g" (empty path)
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q"),  # RFC: "...?q#s" (fragment)
        ("g#s", "http://a/b/c/g"),  # RFC: "...g#s"
        ("g?y#s", "http://a/b/c/g?y"),  # RFC: "...?y#s"
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y"),  # RFC: "...?y#s"
        ("", "http://a/b/c/d;p?q"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
    ],
)
def test_resolution_normal_examples(reference: str, expected: str) -> None:
    assert canonicalize_url(reference, base=RFC_BASE) == expected


# 5.4.2 Abnormal examples.
@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"),
        ("/./g", "http://a/g"),
        ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"),
        ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"),
        ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"),
        ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g"),  # RFC: "...g#s/./x"
        ("g#s/../x", "http://a/b/c/g"),  # RFC: "...g#s/../x"
    ],
)
def test_resolution_abnormal_examples(reference: str, expected: str) -> None:
    assert canonicalize_url(reference, base=RFC_BASE) == expected


@pytest.mark.parametrize(
    ("reference", "schemes", "reason"),
    [
        # "g:h" resolves to itself: a scheme the crawler does not fetch, and even when
        # allowed, a URI without a host.
        ("g:h", frozenset({"http"}), "unsupported_scheme"),
        ("g:h", frozenset({"http", "g"}), "no_host"),
        # A strict parser (as the RFC recommends) reads "http:g" as "http:g", not as "g".
        ("http:g", frozenset({"http"}), "no_host"),
    ],
)
def test_resolution_examples_that_are_not_crawlable(
    reference: str, schemes: frozenset[str], reason: str
) -> None:
    with pytest.raises(InvalidUrl) as info:
        canonicalize_url(reference, base=RFC_BASE, allowed_schemes=schemes)
    assert info.value.reason == reason


def test_a_listed_path_parameter_of_the_base_is_removed() -> None:
    assert canonicalize_url("?y", base=RFC_BASE, remove_params=["P"]) == "http://a/b/c/d?y"
    assert canonicalize_url("", base=RFC_BASE, remove_params=["p"]) == "http://a/b/c/d?q"
    assert canonicalize_url("", base=RFC_BASE, remove_params=["p", "q"]) == "http://a/b/c/d"
