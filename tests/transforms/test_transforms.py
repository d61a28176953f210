"""The composites on Beam's TestPipeline (bounded inputs; no emulator needed)."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to, is_not_empty

from transforms.core.records import (
    OUTCOME_ERROR,
    OUTCOME_FETCHED,
    OUTCOME_REDIRECT,
    AckToken,
    CrawlRequest,
    Discovered,
    FetchResult,
    ParsedPage,
)
from transforms.extract import ExtractLinks
from transforms.formats.messages import ACK_ID_ATTRIBUTE, decode_requests, encode_requests
from transforms.formats.warc import read_record
from transforms.ingest import ReadCrawlRequests
from transforms.loop import PublishLinks
from transforms.warc_io import WriteWarc

HTML = b"""<!doctype html><html><head><title> Home  page </title>
<base href="/docs/"></head><body>
<a href="a.html#frag">A</a> <a href="a.html">A again</a> <a href="/b">B</a>
<a href="http://Other.Example:80/x">other</a> <a href="mailto:x@y">mail</a>
</body></html>"""


def _fetch(url="http://site.example/index.html", body=HTML, **kw) -> FetchResult:
    defaults = dict(request=CrawlRequest(url, depth=1, priority=2), host="site.example",
                    fetched_at=1_700_000_000.0, final_url=url, status=200,
                    content_type="text/html; charset=utf-8",
                    headers=(("Content-Type", "text/html; charset=utf-8"),), body=body,
                    content_length=len(body or b""), outcome=OUTCOME_FETCHED)
    defaults.update(kw)
    return FetchResult(**defaults)


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


def test_extract_links_parses_pages_and_routes_everything_else():
    page = _fetch()
    not_html = _fetch("http://site.example/f.pdf", body=None, content_type="application/pdf",
                      outcome="not_stored")
    redirect = _fetch("http://site.example/moved", body=None, status=301,
                      redirect_to="http://elsewhere.example/new", outcome=OUTCOME_REDIRECT)
    error = _fetch("http://site.example/err", body=None, status=None, error="timeout",
                   outcome=OUTCOME_ERROR)
    with TestPipeline() as p:
        out = p | beam.Create([page, not_html, redirect, error]) | ExtractLinks()
        pages = out.discovered | beam.Filter(lambda d: isinstance(d.item, ParsedPage))
        assert_that(pages | beam.Map(lambda d: (d.item.title, d.item.outlinks)), equal_to([
            ("Home page", ("http://site.example/docs/a.html", "http://site.example/b",
                           "http://other.example/x"))]), label="pages")
        links = out.discovered | beam.FlatMap(lambda d: d.links)
        assert_that(links | beam.Map(lambda r: (r.url, r.depth, r.discovered_from)),
                    equal_to([
                        ("http://site.example/docs/a.html", 2, page.request.url),
                        ("http://site.example/b", 2, page.request.url),
                        ("http://other.example/x", 2, page.request.url),
                        ("http://elsewhere.example/new", 1, redirect.request.url)]),
                    label="links")
        unstored = out.discovered | beam.Filter(lambda d: isinstance(d.item, FetchResult))
        assert_that(unstored | beam.Map(lambda d: d.item.outcome),
                    equal_to(["not_stored", OUTCOME_REDIRECT, OUTCOME_ERROR]), label="unstored")


_PUBLISHED: list[tuple[bytes, dict[str, str]]] = []


def _recorder(topic: str):
    return _PUBLISHED.extend


def test_links_are_published_by_host_without_duplicates_before_their_results_move_on():
    _PUBLISHED.clear()
    links = [CrawlRequest(f"http://h{i % 3}.example/p{i % 5}") for i in range(30)]
    page = ParsedPage(_fetch(), "t", (), "sum")
    items = [Discovered(tuple(links[:15]), page), Discovered(tuple(links[15:]), None),
             Discovered((), _fetch("http://site.example/404", body=None, status=404,
                                   outcome="not_stored"))]
    with TestPipeline() as p:
        released = (p | beam.Create(items, reshuffle=False)
                    | PublishLinks("projects/p/topics/t", _recorder))
        assert_that(released.pages | beam.Map(lambda pg: pg.title), equal_to(["t"]),
                    label="pages")
        assert_that(released.unstored | beam.Map(lambda r: r.status), equal_to([404]),
                    label="unstored")
    decoded = {(attributes["host"], tuple(sorted(r.url for r in decode_requests(data))))
               for data, attributes in _PUBLISHED}
    expected: dict[str, set[str]] = {}
    for r in links:
        expected.setdefault(r.url.split("/")[2], set()).add(r.url)
    assert decoded == {(h, tuple(sorted(u))) for h, u in expected.items()}
    assert len(_PUBLISHED) == 3  # one message per host


def test_write_warc_writes_records_that_read_back_exactly(tmp_path: Path):
    bodies = [b"<html>one</html>", b"<html>\x00binary\xff</html>", b"\r\n"]
    pages = [ParsedPage(_fetch(f"http://site.example/{i}", body=b), f"t{i}", (), f"sum{i}")
             for i, b in enumerate(bodies)]
    with TestPipeline() as p:
        stored = (p | beam.Create(pages)
                  | WriteWarc(str(tmp_path / "warc"), roll_bytes=1, roll_seconds=60, shards=2))
        located = stored | beam.Map(lambda s: json.dumps(
            [s.page.fetch.request.url, s.location.file, s.location.offset,
             s.page.fetch.body is None]))
        assert_that(located, is_not_empty())
        located | beam.io.WriteToText(str(tmp_path / "out"))
    lines = [json.loads(line) for f in tmp_path.glob("out*") for line in f.read_text().split("\n")
             if line]
    assert len(lines) == 3
    for url, path, offset, body_dropped in lines:
        assert body_dropped
        record = read_record(Path(path).read_bytes(), offset)
        assert record.target_uri == url
        assert record.payload == bodies[int(url.rsplit("/", 1)[1])]
