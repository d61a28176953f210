"""Tests of URL canonicalization and the keys derived from canonical URLs (row keys are in
``test_rowkeys``)."""

from __future__ import annotations

import pickle

import pytest

from tests.unit.url_cases import RFC_BASE, fuzz_cases, valid_urls
from transforms.urls import (
    INVALID_REASONS,
    MAX_URL_LENGTH,
    InvalidUrl,
    canonicalize_url,
    politeness_key,
    robots_url,
    url_fingerprint,
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com", "http://example.com/"),
        ("HTTP://WWW.Example.COM/Path", "http://www.example.com/Path"),
        ("  \t http://example.com/a\n/b\r \x00", "http://example.com/a/b"),
        ("http://exa\tmple.com/", "http://example.com/"),
        ("http://example.com/#fragment", "http://example.com/"),
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com:/", "http://example.com/"),
        ("http://example.com:0080/", "http://example.com/"),
        ("http://example.com:08080/", "http://example.com:8080/"),
        ("http://example.com./", "http://example.com/"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a/b/..", "http://example.com/a/"),
        ("http://example.com/../../x", "http://example.com/x"),
        ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
        ("http://example.com/%7euser/%41%62", "http://example.com/~user/Ab"),
        ("http://example.com/a%2fb%3a", "http://example.com/a%2Fb%3A"),
        ("http://example.com/100%", "http://example.com/100%25"),
        ("http://example.com/%zz", "http://example.com/%25zz"),
        ("http://example.com/a b?c d", "http://example.com/a%20b?c%20d"),
        ("http://example.com/caf\u00e9?q=\u00fc", "http://example.com/caf%C3%A9?q=%C3%BC"),
        ("http://example.com/\u20ac", "http://example.com/%E2%82%AC"),
        ('http://example.com/<a>"|^`{}\\', "http://example.com/%3Ca%3E%22%7C%5E%60%7B%7D%5C"),
        ("http://example.com/a?b=1&a=2", "http://example.com/a?b=1&a=2"),
        ("http://example.com/a?", "http://example.com/a"),
        ("http://example.com/a?x/./y", "http://example.com/a?x/./y"),
        ("http://example.com/p;a=1/q:r@s!$&'()*+,=", "http://example.com/p;a=1/q:r@s!$&'()*+,="),
        ("http://example.com//double//slash", "http://example.com//double//slash"),
        ("http://B\u00fccher.DE/", "http://xn--bcher-kva.de/"),
        ("http://\u4f8b\u3002\u30c6\u30b9\u30c8/", "http://xn--fsq.xn--zckzah/"),
        ("http://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/", "http://example.com/"),
        ("http://ex%61mple.com/", "http://example.com/"),
        ("http://my_host.example.com/", "http://my_host.example.com/"),
        ("http://127.0.0.2:8081/x", "http://127.0.0.2:8081/x"),
        ("http://[2001:DB8:0::1]:8080/", "http://[2001:db8::1]:8080/"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://user:pw@example.com/", "http://user:pw@example.com/"),
        ("http://User@Example.com/", "http://User@example.com/"),
        ("http://a@b@example.com/", "http://a%40b@example.com/"),
        ("http://@example.com/", "http://example.com/"),
    ],
)
def test_canonicalize(url: str, expected: str) -> None:
    assert canonicalize_url(url) == expected


# RFC 3986 section 5.4, adjusted for canonical form: the fragment is dropped and an empty
# path is "/"; "http:g" is read strictly (an absolute URL without a host).
@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g/"),
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q"),
        ("g#s", "http://a/b/c/g"),
        ("g?y#s", "http://a/b/c/g?y"),
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
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
        ("g#s/./x", "http://a/b/c/g"),
        ("HTTPS://Other.example/x", "https://other.example/x"),
        ("1a:b", "http://a/b/c/1a:b"),
    ],
)
def test_resolve_rfc3986_examples(reference: str, expected: str) -> None:
    assert canonicalize_url(reference, base=RFC_BASE) == expected


def test_scheme_relative_reference_takes_base_scheme() -> None:
    assert canonicalize_url("//cdn.example.org/x", "https://example.com/a") == (
        "https://cdn.example.org/x"
    )


@pytest.mark.parametrize(
    ("url", "base", "reason"),
    [
        ("", None, "empty"),
        (" \t\n", None, "empty"),
        ("", RFC_BASE, "empty"),
        ("mailto:someone@example.com", None, "unsupported_scheme"),
        ("javascript:void(0)", RFC_BASE, "unsupported_scheme"),
        ("data:text/html;base64,PGI+", None, "unsupported_scheme"),
        ("ftp://example.com/file", None, "unsupported_scheme"),
        ("tel:+123", RFC_BASE, "unsupported_scheme"),
        ("g:h", RFC_BASE, "unsupported_scheme"),
        ("http:g", RFC_BASE, "no_host"),
        ("http:///path", None, "no_host"),
        ("http://:80/", None, "no_host"),
        ("http://user@/", None, "no_host"),
        ("example.com/page", None, "relative"),
        ("/page", None, "relative"),
        ("page", "also/relative", "relative"),
        ("http://exa mple.com/", None, "bad_host"),
        ("http://a..b/", None, "bad_host"),
        ("http://example.com\\evil/", None, "bad_host"),
        ("http://" + "x" * 64 + ".com/", None, "bad_host"),
        ("http://[::1/", None, "bad_host"),
        ("http://[::g]/", None, "bad_host"),
        ("http://[fe80::1%25eth0]/", None, "bad_host"),
        ("http://[::1]x/", None, "bad_host"),
        ("http://b%FF.de/", None, "bad_host"),
        ("http://example.com:0/", None, "bad_port"),
        ("http://example.com:65536/", None, "bad_port"),
        ("http://example.com:8o/", None, "bad_port"),
        ("http://example.com:-1/", None, "bad_port"),
        ("http://example.com:1:2/", None, "bad_port"),
        ("http://example.com:" + "9" * 5000 + "/", None, "bad_port"),
        ("http://example.com/" + "a" * MAX_URL_LENGTH, None, "too_long"),
        ("http://example.com/" + "\u00e9" * 700, None, "too_long"),
        ("http://example.com/" + "a" * 100_000, None, "too_long"),
        ("data:image/png;base64," + "A" * 100_000, None, "unsupported_scheme"),
        ("http://example.com/\ud800", None, "invalid"),
    ],
)
def test_rejects(url: str, base: str | None, reason: str) -> None:
    with pytest.raises(InvalidUrl) as info:
        canonicalize_url(url, base)
    assert info.value.reason == reason
    assert reason in INVALID_REASONS


def test_allowed_schemes() -> None:
    ftp = frozenset({"ftp"})
    assert canonicalize_url("FTP://example.com:21/pub", allowed_schemes=ftp) == (
        "ftp://example.com/pub"
    )
    with pytest.raises(InvalidUrl):
        canonicalize_url("http://example.com/", allowed_schemes=ftp)


def test_length_limit_is_inclusive() -> None:
    prefix = "http://example.com/"
    url = prefix + "a" * (MAX_URL_LENGTH - len(prefix))
    assert canonicalize_url(url) == url


def test_a_long_input_that_shrinks_is_accepted() -> None:
    assert canonicalize_url("http://example.com/" + "x/../" * 1000 + "y") == (
        "http://example.com/y"
    )


def test_invalid_url_is_a_value_error_and_pickles() -> None:
    with pytest.raises(ValueError, match="unsupported_scheme"):
        canonicalize_url("mailto:a@b.c")
    error = InvalidUrl("bad_port", "http://x:0/")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.reason, copy.detail) == ("bad_port", "http://x:0/")


def test_fuzz_never_raises_anything_but_invalid_url() -> None:
    accepted = 0
    for url, base in fuzz_cases(20_000, seed=7):
        try:
            canonical = canonicalize_url(url, base)
        except InvalidUrl as e:
            assert e.reason in INVALID_REASONS
            continue
        accepted += 1
        assert canonical.isascii() and len(canonical) <= MAX_URL_LENGTH
        assert "#" not in canonical
    assert accepted > 1000  # the fuzzer reaches the interesting paths


def test_idempotent() -> None:
    for url in valid_urls():
        canonical = canonicalize_url(url)
        assert canonicalize_url(canonical) == canonical


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://Example.com/a", "example.com"),
        ("https://example.com/b", "example.com"),
        ("http://example.com:80/", "example.com"),
        ("http://127.0.0.2:8081/x", "127.0.0.2:8081"),
        ("https://127.0.0.2:8081/x", "127.0.0.2:8081"),
        ("http://user@example.com:8443/", "example.com:8443"),
        ("http://[::1]:8080/", "[::1]:8080"),
    ],
)
def test_politeness_key(url: str, key: str) -> None:
    assert politeness_key(url) == key


def test_url_fingerprint() -> None:
    fingerprint = url_fingerprint("http://example.com/a")
    assert isinstance(fingerprint, bytes) and len(fingerprint) == 16
    assert url_fingerprint("HTTP://EXAMPLE.com:80/a#x") == fingerprint
    assert url_fingerprint("https://example.com/a") != fingerprint
    assert url_fingerprint("http://example.com/A") != fingerprint


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.example.com/a/b?q=1#f", "https://www.example.com/robots.txt"),
        ("http://127.0.0.2:8081/x", "http://127.0.0.2:8081/robots.txt"),
        ("http://user:pw@Example.com:80/x", "http://example.com/robots.txt"),
        ("http://[::1]:8080/", "http://[::1]:8080/robots.txt"),
    ],
)
def test_robots_url(url: str, expected: str) -> None:
    assert robots_url(url) == expected


def test_derived_keys_reject_invalid_urls() -> None:
    for function in (politeness_key, url_fingerprint, robots_url):
        with pytest.raises(InvalidUrl):
            function("not a url")
