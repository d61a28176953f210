"""``ExtractLinks`` on Beam's TestPipeline: pages parsed once, links and results routed."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from tests.transforms.results import fetch_result
from transforms.core.records import OUTCOME_ERROR, OUTCOME_REDIRECT, FetchResult, ParsedPage
from transforms.extract import ExtractLinks


def test_extract_links_parses_pages_and_routes_everything_else():
    page = fetch_result()
    not_html = fetch_result("http://site.example/f.pdf", body=None, content_type="application/pdf",
                      outcome="not_stored")
    redirect = fetch_result("http://site.example/moved", body=None, status=301,
                      redirect_to="http://elsewhere.example/new", outcome=OUTCOME_REDIRECT)
    error = fetch_result("http://site.example/err", body=None, status=None, error="timeout",
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


def test_extract_links_fills_page_content_and_counts_it():
    long_text = " ".join(f"w{i}" for i in range(15_000))  # over the 64 KiB text cap
    pages = [
        fetch_result(),
        fetch_result("http://site.example/long", body=f"<p>{long_text}</p>".encode()),
        fetch_result("http://site.example/empty", body=b"<nav><a href=/>Home</a></nav>"),
    ]
    p = TestPipeline()
    out = p | beam.Create(pages) | ExtractLinks()
    contents = out.discovered | beam.Map(lambda d: (
        d.item.fetch.final_url.rsplit("/", 1)[1], d.item.content.word_count,
        d.item.content.text_truncated, len(d.item.content.outlinks)))
    assert_that(contents, equal_to([("index.html", 6, False, 4), ("long", 15_000, True, 0),
                                    ("empty", 0, False, 1)]))
    result = p.run()
    result.wait_until_finish()
    metrics = result.metrics().query(MetricsFilter())
    counters = {c.key.metric.name: c.committed for c in metrics["counters"]}
    assert counters["pages_with_text"] == 2 and counters["pages_text_truncated"] == 1
    words = {d.key.metric.name: d.committed for d in metrics["distributions"]}["text_words"]
    assert (words.count, words.sum, words.max) == (3, 15_006, 15_000)
