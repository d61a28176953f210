"""``PublishLinks`` on Beam's TestPipeline: links published by host, then results released."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from tests.transforms.results import fetch_result
from transforms.core.records import CrawlRequest, Discovered, ParsedPage
from transforms.formats.messages import decode_requests
from transforms.loop import PublishLinks

_PUBLISHED: list[tuple[bytes, dict[str, str]]] = []


def _recorder(topic: str):
    return _PUBLISHED.extend


def test_links_are_published_by_host_without_duplicates_before_their_results_move_on():
    _PUBLISHED.clear()
    links = [CrawlRequest(f"http://h{i % 3}.example/p{i % 5}") for i in range(30)]
    page = ParsedPage(fetch_result(), "t", (), "sum")
    items = [Discovered(tuple(links[:15]), page), Discovered(tuple(links[15:]), None),
             Discovered((), fetch_result("http://site.example/404", body=None, status=404,
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
