"""Canonicalization with the host's policy, as ingest applies it (pure part)."""

import pytest

from transforms.core.policy_file import parse_policy
from transforms.core.url_keys import canonical_for_host
from transforms.core.urls import InvalidUrl

POLICY = parse_policy({"hosts": {"keep.example": {"remove_params": [], "sort_query": True}}})


def test_default_hosts_lose_session_and_tracking_parameters():
    url, key = canonical_for_host("https://a.example/p;jsessionid=X?utm_source=n&x=1&sid=9",
                                  POLICY)
    assert (url, key) == ("https://a.example/p?x=1", "a.example")


def test_a_host_policy_can_keep_parameters_and_sort_the_query():
    url, key = canonical_for_host("https://keep.example/p?sid=9&b=2&a=1", POLICY)
    assert (url, key) == ("https://keep.example/p?a=1&b=2&sid=9", "keep.example")


def test_ftp_is_accepted_for_the_frontier_to_judge_and_other_schemes_are_not():
    url, _ = canonical_for_host("FTP://Files.Example:21/pub/a.html", POLICY)
    assert url == "ftp://files.example/pub/a.html"
    with pytest.raises(InvalidUrl):
        canonical_for_host("mailto:someone@example.com", POLICY)
