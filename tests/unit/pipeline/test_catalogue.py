"""The faceted catalogue serves one text per filter set whatever the parameter order, links
that append a filter last, and 404 for unknown or repeated filters."""

from __future__ import annotations

from pipeline.demo.catalogue import Catalogue, distinct_pages, url_space
from pipeline.demo.exchange import RequestView
from transforms.core.links import extract_html, parse_html
from transforms.core.page_content import page_content


def _get(target: str):
    return Catalogue().respond(RequestView(target, "GET", {}))


def test_the_text_depends_on_the_filter_set_not_its_order():
    texts = set()
    for target in ("/facet/?color=red&size=m", "/facet/?size=m&color=red"):
        reply = _get(target)
        assert reply.status == 200
        parsed = parse_html(reply.body, "http://shop.test" + target)
        texts.add(page_content(parsed.info, parsed.tree, sign=False).text_digest)
    assert len(texts) == 1
    other = _get("/facet/?color=blue&size=m").body
    assert other != _get("/facet/?color=red&size=m").body


def test_links_append_each_unused_filter_last():
    links = extract_html(_get("/facet/?size=m").body, "http://shop.test/facet/?size=m").links
    assert "http://shop.test/facet/?size=m&color=red" in links
    assert not any("size=m&size" in link for link in links)


def test_unknown_or_repeated_filters_are_not_found_and_the_sizes_add_up():
    assert _get("/facet/?colour=red").status == 404
    assert _get("/facet/?color=red&color=blue").status == 404
    assert (distinct_pages(), url_space()) == (79, 292)
