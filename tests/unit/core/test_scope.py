"""The crawl's scope: links kept relative to the page they are on, registered domains from the
Public Suffix List, IP addresses and single-label hosts as their own domains."""

from __future__ import annotations

import pytest

from transforms.core.scope import (
    SCOPE_ANY,
    SCOPE_DOMAIN,
    SCOPE_HOST,
    check_scope,
    in_scope,
    registered_domain,
    split_scope,
)


@pytest.mark.parametrize(("host", "domain"), [
    ("www.example.co.uk", "example.co.uk"),
    ("docs.python.org", "python.org"),
    ("EXAMPLE.com", "example.com"),
    ("alice.github.io", "alice.github.io"),  # the list's private section: a site of its own
    ("a.b.alice.github.io", "alice.github.io"),
    ("127.0.0.1", "127.0.0.1"),
    ("[::1]", "[::1]"),
    ("localhost", "localhost"),
    ("co.uk", "co.uk"),  # a public suffix itself
])
def test_registered_domains(host, domain):
    assert registered_domain(host) == domain


def test_host_scope_compares_hosts_without_port_or_case():
    page = "https://docs.example.com:8443/a"
    assert in_scope(SCOPE_HOST, "http://DOCS.example.com/b", page)
    assert not in_scope(SCOPE_HOST, "https://www.example.com/", page)
    assert in_scope(SCOPE_DOMAIN, "https://www.example.com/", page)
    assert not in_scope(SCOPE_DOMAIN, "https://example.org/", page)
    assert in_scope(SCOPE_ANY, "https://example.org/", page)


def test_loopback_hosts_are_their_own_domains():
    # Two test hosts on loopback are two sites, whatever their last octets.
    assert not in_scope(SCOPE_DOMAIN, "http://127.0.0.2:8080/", "http://127.0.0.1:8080/")
    assert in_scope(SCOPE_DOMAIN, "http://127.0.0.1:9/", "http://127.0.0.1:8080/")


def test_split_scope_counts_what_it_drops():
    keep, dropped = split_scope(SCOPE_HOST, ["https://a.example/1", "https://b.example/2",
                                             "https://a.example/3"], "https://a.example/")
    assert keep == [True, False, True] and dropped == 1
    assert split_scope(SCOPE_ANY, ["x", "y"], "z") == ([True, True], 0)


def test_an_unknown_scope_is_refused_with_the_choices():
    assert check_scope("domain") == "domain"
    with pytest.raises(ValueError, match="host, domain"):
        check_scope("site")
