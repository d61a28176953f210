"""Tests of URL canonicalization and the keys derived from canonical URLs (row keys are in
``test_rowkeys``)."""

from __future__ import annotations

import hashlib
import pickle

import pytest

from tests.unit.core.url_cases import OPTIONS, RFC_BASE, fuzz_cases, param_fuzz_cases, valid_urls
from transforms.core.url_keys import politeness_key, robots_url, url_fingerprint
from transforms.core.url_params import ParamFilter
from transforms.core.urls import (
    DEFAULT_REMOVED_PARAMS,
    INVALID_REASONS,
    MAX_URL_LENGTH,
    InvalidUrl,
    canonicalize_url,
)

WITH_FTP = frozenset({"http", "https", "ftp"})


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com", "http://example.com/"),
        ("HTTP://WWW.Example.COM/Path", "http://www.example.com/Path"),
        ("  \t http://example.com/a\n/b\r \x00", "http://example.com/a/b"),
        ("http://exa\tmple.com/", "http://example.com/"),
        ("http://example.com/#fragment", "http://example.com/"),
        ("http://example.com/a?b=1#c d\u00e9#e\n", "http://example.com/a?b=1"),
        ("http://example.com:8080/a#", "http://example.com:8080/a"),
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


def test_scheme_relative_reference_takes_base_scheme() -> None:
    assert canonicalize_url("//cdn.example.org/x", "https://example.com/a") == (
        "https://cdn.example.org/x"
    )


@pytest.mark.parametrize(
    ("url", "base", "reason"),
    [
        ("", None, "empty"),
        (" \t\n", None, "empty"),
        ("", "also/relative", "relative"),
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
        ("http://example.com/#\ud800", None, "invalid"),
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


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("FTP://Example.COM:21/pub/../file.txt", "ftp://example.com/file.txt"),
        ("ftp://example.com:21", "ftp://example.com/"),
        ("ftp://u:p%61ss@f.example:2121/a%7e/%zz", "ftp://u:pass@f.example:2121/a~/%25zz"),
        ("ftp://example.com/pub/file.bin;type=i", "ftp://example.com/pub/file.bin;type=i"),
        ("ftp://example.com:80/", "ftp://example.com:80/"),
        ("ftp://b\u00fccher.example/\u00e9 vu/#x", "ftp://xn--bcher-kva.example/%C3%A9%20vu/"),
    ],
)
def test_ftp_when_allowed(url: str, expected: str) -> None:
    assert canonicalize_url(url, allowed_schemes=WITH_FTP) == expected
    assert canonicalize_url(expected, allowed_schemes=WITH_FTP) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # Control characters: surrounding ones stripped, tab, CR and LF dropped anywhere, others
        # percent-encoded where they are allowed at all (a browser does the same).
        ("\x00\x1f http://example.com/ \x0b\x7f", "http://example.com/%20%0B%7F"),
        ("http://example.com/a\x00b\x7fc\x85d", "http://example.com/a%00b%7Fc%C2%85d"),
        ("http://example.com/?q=\tline\r\nbreak", "http://example.com/?q=linebreak"),
        ("http://exa\nmple.com/", "http://example.com/"),
        ("http://example.com/\u00a0", "http://example.com/%C2%A0"),
    ],
)
def test_whitespace_and_controls(url: str, expected: str) -> None:
    assert canonicalize_url(url) == expected


@pytest.mark.parametrize("url", ["http://exa\x00mple.com/", "http://exa\x7fmple.com/"])
def test_controls_in_host_are_rejected(url: str) -> None:
    with pytest.raises(InvalidUrl) as info:
        canonicalize_url(url)
    assert info.value.reason == "bad_host"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://e.com/p?id=1&utm_source=a&utm_medium=b&page=2", "http://e.com/p?id=1&page=2"),
        ("http://e.com/p?utm_source=a", "http://e.com/p"),
        ("http://e.com/p?utm_source=a&gclid=1&fbclid=2&msclkid=3", "http://e.com/p"),
        ("http://e.com/p?PHPSESSID=abc&x=1", "http://e.com/p?x=1"),
        ("http://e.com/p?x=1&Utm_Campaign=spring&SID=9", "http://e.com/p?x=1"),
        ("http://e.com/p?ASPSESSIONIDQSCTRABC=K&b=2", "http://e.com/p?b=2"),
        ("http://e.com/p?cfid=1&cftoken=2&sessionid=3&mc_cid=4&mc_eid=5&k", "http://e.com/p?k"),
        ("http://e.com/p?z=1&jsessionid=2&a=3", "http://e.com/p?z=1&a=3"),
        ("http://e.com/p?gclid&x=1", "http://e.com/p?x=1"),
        ("http://e.com/p?utm_source=a=b&x", "http://e.com/p?x"),
        ("http://e.com/p?utm%5Fsource=a&%75tm_term=b&x=1", "http://e.com/p?x=1"),
        ("http://e.com/p?x=utm_source&sidebar=1&utm=2&sid_x=3",
         "http://e.com/p?x=utm_source&sidebar=1&utm=2&sid_x=3"),
        ("http://e.com/p?x=1&&utm_source=a&", "http://e.com/p?x=1&&"),
        ("http://e.com/a;jsessionid=ABC/b;jsessionid=1?x=1", "http://e.com/a/b?x=1"),
        ("http://e.com/shop;JSESSIONID=0A1B", "http://e.com/shop"),
        ("http://e.com/a;x=1;jsessionid=2;y/b", "http://e.com/a;x=1;y/b"),
        ("http://e.com/a;jsessionid=1;phpsessid=2;sid=3", "http://e.com/a"),
        ("http://e.com/;jsessionid=1", "http://e.com/"),
        ("http://e.com/a/..;jsessionid=1/b", "http://e.com/b"),
        ("http://e.com/a%3Bjsessionid=1", "http://e.com/a%3Bjsessionid=1"),
        ("http://e.com/d;p?q", "http://e.com/d;p?q"),
        ("http://e.com/x?utm_source=a#frag", "http://e.com/x"),
    ],
)
def test_session_and_tracking_parameters_are_removed(url: str, expected: str) -> None:
    assert canonicalize_url(url) == expected
    assert canonicalize_url(expected) == expected


def test_parameter_removal_is_configurable() -> None:
    url = "http://e.com/a;jsessionid=1/b?utm_source=x&ref=home&s1=2&t=3"
    assert canonicalize_url(url, remove_params=()) == url
    assert canonicalize_url(url, remove_params=["REF", "s?"]) == (
        "http://e.com/a;jsessionid=1/b?utm_source=x&t=3"
    )
    assert canonicalize_url(url, remove_params=frozenset({"[rt]*", "jsession*"})) == (
        "http://e.com/a/b?utm_source=x&s1=2"
    )
    assert canonicalize_url(url, remove_params=("*",)) == "http://e.com/a/b"
    assert "utm_*" in DEFAULT_REMOVED_PARAMS


def test_remove_params_must_be_a_collection_of_strings() -> None:
    with pytest.raises(TypeError):
        canonicalize_url("http://e.com/", remove_params="utm_*")
    with pytest.raises(TypeError):
        canonicalize_url("http://e.com/", remove_params=[1])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://e.com/?b=2&a=1&c=3", "http://e.com/?a=1&b=2&c=3"),
        ("http://e.com/?a=2&a=1&a=10", "http://e.com/?a=1&a=10&a=2"),
        ("http://e.com/?a-b=1&a=9&a=10", "http://e.com/?a=10&a=9&a-b=1"),  # name, then value
        ("http://e.com/?a=&a&b", "http://e.com/?a=&a&b"),  # ties keep their order
        ("http://e.com/?a&a=&b", "http://e.com/?a&a=&b"),
        ("http://e.com/?z=1&%C3%A9=2&B=3&a=4", "http://e.com/?%C3%A9=2&B=3&a=4&z=1"),  # encoded
        ("http://e.com/?z=%c3%a9&%7a=%61", "http://e.com/?z=%C3%A9&z=a"),
        ("http://e.com/?b=1&&a=2&", "http://e.com/?a=2&b=1"),  # empty parameters dropped
        ("http://e.com/?&&", "http://e.com/"),
        ("http://e.com/?utm_source=x&b=1&a=2", "http://e.com/?a=2&b=1"),
        ("http://e.com/?single", "http://e.com/?single"),
    ],
)
def test_sort_query(url: str, expected: str) -> None:
    assert canonicalize_url(url, sort_query=True) == expected
    assert canonicalize_url(expected, sort_query=True) == expected


def test_query_is_not_sorted_by_default() -> None:
    assert canonicalize_url("http://e.com/?b=2&a=1") == "http://e.com/?b=2&a=1"


def test_derived_keys_keep_parameters() -> None:
    # The keys take canonical URLs made with any options and must not change them.
    url = canonicalize_url("http://e.com/a;jsessionid=1?utm_source=x&b&a", remove_params=())
    assert url_fingerprint(url) == hashlib.blake2b(url.encode(), digest_size=16).digest()
    assert url_fingerprint(url) != url_fingerprint(canonicalize_url(url))


def test_empty_reference_is_the_base() -> None:
    assert canonicalize_url("", "https://Example.com/a?utm_source=x&b#f") == (
        "https://example.com/a?b"
    )
    assert canonicalize_url(" \n", "https://example.com/") == "https://example.com/"


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


@pytest.mark.parametrize(("remove_params", "sort"), OPTIONS)
def test_fuzz_with_options(remove_params: tuple[str, ...], sort: bool) -> None:
    """Nothing but InvalidUrl escapes, the result is canonical for the same options (idempotent)
    and has none of the removed parameters left, and its query is sorted when asked."""
    names = ParamFilter(remove_params) if remove_params else None
    accepted = 0
    cases = param_fuzz_cases(3000, seed=5) + fuzz_cases(3000, seed=13)
    for url, base in cases:
        try:
            canonical = canonicalize_url(url, base, WITH_FTP, remove_params, sort)
        except InvalidUrl as e:
            assert e.reason in INVALID_REASONS
            continue
        accepted += 1
        assert canonical.isascii() and len(canonical) <= MAX_URL_LENGTH and "#" not in canonical
        assert canonicalize_url(canonical, None, WITH_FTP, remove_params, sort) == canonical
        path, _, query = canonical.split("/", 3)[3].partition("?")
        if names is not None:
            params = [p for segment in path.split("/") for p in segment.split(";")[1:]]
            params += query.split("&") if query else []
            assert not any(names.matches(p.partition("=")[0]) for p in params), canonical
        if sort and query:
            pairs = [p.partition("=")[::2] for p in query.split("&")]
            assert pairs == sorted(pairs) and "" not in query.split("&"), canonical
    assert accepted > 2000


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
