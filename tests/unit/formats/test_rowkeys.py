"""Tests of the webtable row key: encoding, its exact inverse and the per-host prefixes."""

from __future__ import annotations

import pytest

from tests.unit.core.url_cases import fuzz_cases, valid_urls
from transforms.core.url_keys import politeness_key
from transforms.core.urls import InvalidUrl, canonicalize_url
from transforms.formats.rowkeys import (
    host_row_prefix,
    host_row_prefixes,
    row_key,
    row_key_matches_host,
    url_from_row_key,
)


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://www.example.com/a/b?q=1", "com.example.www:https/a/b?q=1"),
        ("http://example.com:8080/", "com.example:http:8080/"),
        ("http://127.0.0.2:8081/x", "127.0.0.2:http:8081/x"),
        ("http://[2001:db8::1]/x", "[2001:db8::1]:http/x"),
        ("http://user:pw@example.com/x?y", "com.example:http/x?y#user:pw"),
        ("HTTP://Example.COM:80", "com.example:http/"),
        ("http://localhost/", "localhost:http/"),
    ],
)
def test_row_key(url: str, key: str) -> None:
    assert row_key(url) == key
    assert url_from_row_key(key) == canonicalize_url(url)


def test_row_key_round_trip() -> None:
    for url in valid_urls():
        key = row_key(url)
        assert url_from_row_key(key) == url
        assert row_key(url_from_row_key(key)) == key


@pytest.mark.parametrize("key", ["", "nocolon", "com.example:http", "com.example:ht tp/", ":http/",
                                 "com.example:http:80x/", "[::1:http/",
                                 "com.example:http:" + "9" * 5000 + "/"])
def test_url_from_bad_row_key(key: str) -> None:
    with pytest.raises(InvalidUrl) as info:
        url_from_row_key(key)
    assert info.value.reason == "bad_row_key"


def test_host_row_prefix() -> None:
    assert host_row_prefix("example.com") == "com.example:"
    assert host_row_prefix("www.example.com") == "com.example.www:"
    assert host_row_prefix("127.0.0.2:8081") == "127.0.0.2:"
    assert host_row_prefix("[::1]:8080") == "[::1]:"
    assert host_row_prefixes("example.com") == ("com.example:http/", "com.example:https/")
    assert host_row_prefixes("127.0.0.2:8081") == ("127.0.0.2:http:8081/", "127.0.0.2:https:8081/")


def test_row_prefixes_select_exactly_one_politeness_key() -> None:
    hosts = ["example.com", "www.example.com", "example.co", "example.com.au", "127.0.0.2",
             "127.0.0.20", "[::1]", "a-example.com"]
    urls = [
        f"{scheme}://{userinfo}{host}{port}{path}"
        for scheme in ("http", "https")
        for userinfo in ("", "u:p@")
        for host in hosts
        for port in ("", ":8081", ":80", ":443", ":808")
        for path in ("/", "/a?b", "/:x")
    ]
    key_of = {url: row_key(url) for url in urls}
    keys = list(key_of.values())
    for politeness in {politeness_key(url) for url in urls}:
        expected = {key for url, key in key_of.items() if politeness_key(url) == politeness}
        by_host_prefix = {k for k in keys if k.startswith(host_row_prefix(politeness))}
        assert expected <= by_host_prefix
        assert {k for k in by_host_prefix if row_key_matches_host(k, politeness)} == expected
        by_prefixes = {k for k in keys if k.startswith(host_row_prefixes(politeness))}
        assert by_prefixes == expected


def test_row_key_matches_host_rejects_malformed_keys() -> None:
    assert not row_key_matches_host("garbage", "example.com")


def test_row_key_parsing_never_raises_anything_but_invalid_url() -> None:
    for text, _ in fuzz_cases(5000, seed=5):
        for key in (text, "com.example:" + text, "[::1]:" + text):
            try:
                url_from_row_key(key)
            except InvalidUrl:
                pass
            assert isinstance(row_key_matches_host(key, "example.com"), bool)


def test_rows_of_a_host_sort_together() -> None:
    urls = ["http://example.com/z", "https://example.com/a", "http://www.example.com/",
            "http://example.com:8080/", "http://example.org/", "http://aexample.com/"]
    keys = sorted(row_key(url) for url in urls)
    host_rows = [i for i, k in enumerate(keys) if k.startswith("com.example:")]
    assert host_rows == list(range(host_rows[0], host_rows[0] + 3))


def test_row_key_rejects_invalid_urls() -> None:
    with pytest.raises(InvalidUrl):
        row_key("not a url")
