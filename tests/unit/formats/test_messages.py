"""The frontier message format."""

import pytest

from transforms.core.records import CrawlRequest
from transforms.formats.messages import (
    BadMessage,
    chunk,
    decode_requests,
    discovered_at_of,
    encode_requests,
    host_messages,
)


def test_round_trip_keeps_every_field():
    reqs = [CrawlRequest("https://a.example/", 0, 3),
            CrawlRequest("https://a.example/x", 2, 0, "https://a.example/", attempt=1)]
    assert decode_requests(encode_requests(reqs)) == reqs


def test_plain_text_bodies_are_urls_one_per_line_with_attributes():
    reqs = decode_requests(b"https://a.example/\n\n  https://b.example/p  \n",
                           {"depth": "1", "priority": "7"})
    assert [r.url for r in reqs] == ["https://a.example/", "https://b.example/p"]
    assert {(r.depth, r.priority) for r in reqs} == {(1, 7)}


@pytest.mark.parametrize("body", [b"", b"\xff\xfe", b"{not json", b'{"requests": 3}',
                                  b'{"requests": [{"nourl": 1}]}',
                                  b'{"requests": [{"url": "u", "depth": "x"}]}'])
def test_bad_bodies_raise_bad_message(body):
    with pytest.raises(BadMessage):
        decode_requests(body)


def test_bad_attribute_is_reported():
    with pytest.raises(BadMessage, match="depth"):
        decode_requests(b"https://a/", {"depth": "deep"})


def test_chunk_splits_into_message_sized_lists():
    reqs = [CrawlRequest(f"https://a/{i}") for i in range(2500)]
    assert [len(c) for c in chunk(reqs)] == [1000, 1000, 500]


def test_dust_evidence_round_trips_through_a_frontier_message():
    from transforms.core.records import RULE_DROP, RULE_SORT, UrlRule
    from transforms.formats.messages import decode_message, evidence_messages

    evidence = [("https://a.example/f/?y=1&x=2", UrlRule("/f/", RULE_SORT), "t:sha1:A"),
                ("https://a.example/i?ref=2", UrlRule("/i", RULE_DROP, "ref"), "t:sha1:B"),
                ("https://b.example/f/?y=1&x=2", UrlRule("/f/", RULE_SORT), "t:sha1:C")]
    messages = evidence_messages(evidence)
    assert sorted(attrs["host"] for _, attrs in messages) == ["a.example", "b.example"]
    decoded = [e for data, attrs in messages for e in decode_message(data, attrs)[1]]
    assert sorted(decoded) == sorted(evidence)
    assert all(decode_message(data, attrs)[0] == [] for data, attrs in messages)


def test_malformed_dust_evidence_is_a_bad_message():
    import pytest

    from transforms.formats.messages import BadMessage, decode_message

    for rules in ('{"url": "x"}', '[{"url": "u", "action": "shuffle", "path": "/", '
                  '"param": "", "digest": "d"}]', '[3]'):
        with pytest.raises(BadMessage):
            decode_message(('{"v": 1, "requests": [], "rules": ' + rules + '}').encode())


def test_loop_messages_carry_when_their_links_were_discovered():
    requests = [CrawlRequest("https://a.example/1"), CrawlRequest("https://b.example/2")]
    messages = host_messages(requests, discovered_at=1_700_000_000.25)
    assert {attrs["host"] for _, attrs in messages} == {"a.example", "b.example"}
    assert all(discovered_at_of(attrs) == 1_700_000_000.25 for _, attrs in messages)
    assert all("discovered_at" not in attrs for _, attrs in host_messages(requests))
    assert discovered_at_of({"discovered_at": "soon"}) is None
    assert discovered_at_of(None) is None
