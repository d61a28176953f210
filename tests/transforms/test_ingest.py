"""``ReadCrawlRequests`` on Beam's TestPipeline: decoding, canonical keys, dead letters, acks."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from transforms.core.records import AckToken, CrawlRequest
from transforms.formats.messages import ACK_ID_ATTRIBUTE, encode_requests
from transforms.ingest import ReadCrawlRequests


def test_read_crawl_requests_canonicalizes_keys_by_host_and_dead_letters_bad_input():
    good = PubsubMessage(encode_requests([
        CrawlRequest("HTTP://A.example:80/x/../y#f"), CrawlRequest("https://b.example/"),
        CrawlRequest("http://a.example/z", depth=2)]), {"kind": "crawl"})
    text = PubsubMessage(b"https://c.example/p\nnot a url\n", {"priority": "3"})
    broken = PubsubMessage(b"{broken", {})
    with TestPipeline() as p:
        out = p | beam.Create([good, text, broken]) | ReadCrawlRequests()
        keyed = out.requests | beam.MapTuple(lambda host, work: (host, sorted(
            (r.url, r.depth, r.priority) for r in work.requests)))
        assert_that(keyed, equal_to([
            ("a.example", [("http://a.example/y", 0, 0), ("http://a.example/z", 2, 0)]),
            ("b.example", [("https://b.example/", 0, 0)]),
            ("c.example", [("https://c.example/p", 0, 3)]),
        ]), label="keyed")
        stages = out.dead_letters | beam.Map(lambda d: (d.stage, d.payload))
        assert_that(stages, equal_to([("canonicalize", b"not a url"), ("decode", b"{broken")]),
                    label="dead")
        assert_that(out.acks, equal_to([]), label="acks")  # no ack ids: the source acks


def test_each_part_of_a_message_carries_its_acknowledgement():
    """A message read by a source that leaves acknowledgement to the pipeline: its parts (one
    per key, one for its dead letters) each carry a token; a heartbeat is acknowledged at once."""
    split = PubsubMessage(b"https://a.example/1\nhttps://b.example/2\nnot a url\n",
                          {ACK_ID_ATTRIBUTE: "m1"})
    heartbeat = PubsubMessage(b"", {ACK_ID_ATTRIBUTE: "m2", "kind": "heartbeat"})
    with TestPipeline() as p:
        out = p | beam.Create([split, heartbeat]) | ReadCrawlRequests()
        tokens = out.requests | beam.MapTuple(lambda host, work: (host, work.tokens))
        assert_that(tokens, equal_to([("a.example", (AckToken("m1", 0, 3),)),
                                      ("b.example", (AckToken("m1", 1, 3),))]), label="keys")
        assert_that(out.dead_letters | beam.Map(lambda d: d.tokens),
                    equal_to([(AckToken("m1", 2, 3),)]), label="dead")
        assert_that(out.acks, equal_to([AckToken("m2", 0, 1)]), label="acks")


def test_dust_evidence_goes_to_the_key_of_the_url_that_showed_it_with_the_acknowledgement():
    from transforms.core.records import RULE_SORT, UrlRule
    from transforms.formats.messages import evidence_messages

    rule = UrlRule("/f/", RULE_SORT)
    (data, attrs), = evidence_messages([("https://a.example/f/?y=1&x=2", rule, "t:sha1:A")])
    with TestPipeline() as p:
        out = (p | beam.Create([PubsubMessage(data, {**attrs, ACK_ID_ATTRIBUTE: "m1"})])
               | ReadCrawlRequests())
        assert_that(out.requests | beam.MapTuple(
            lambda key, work: (key, work.requests, work.rules, work.tokens)),
            equal_to([("a.example", (), ((rule, "t:sha1:A"),), (AckToken("m1", 0, 1),))]))


def test_a_loop_messages_discovery_time_rides_with_its_requests():
    message = PubsubMessage(encode_requests([CrawlRequest("https://a.example/1", 1)]),
                            {"kind": "crawl", "discovered_at": "1700000000.5"})
    seed = PubsubMessage(b"https://b.example/\n", {})
    with TestPipeline() as p:
        out = p | beam.Create([message, seed]) | ReadCrawlRequests()
        assert_that(out.requests | beam.MapTuple(lambda key, work: (key, work.discovered_at)),
                    equal_to([("a.example", 1_700_000_000.5), ("b.example", None)]))
