"""Tests for transforms.core.robots_meta: robots meta tags and X-Robots-Tag headers."""

from __future__ import annotations

import pytest

from transforms.core.links import extract_html
from transforms.core.robots import product_token
from transforms.core.robots_meta import (
    RobotsDirectives,
    meta_contents,
    page_directives,
    parse_directives,
    x_robots_tags,
)

UA = "beam-crawler/0.1 (+https://crawler.example/about)"
NONE = RobotsDirectives()
NOINDEX = RobotsDirectives(noindex=True)
NOFOLLOW = RobotsDirectives(nofollow=True)
BOTH = RobotsDirectives(noindex=True, nofollow=True)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], NONE),
        ([""], NONE),
        (["noindex"], NOINDEX),
        (["nofollow"], NOFOLLOW),
        (["noindex, nofollow"], BOTH),
        (["NoIndex,NoFollow"], BOTH),
        (["noindex nofollow"], BOTH),  # spaces instead of commas, as many pages write
        (["none"], BOTH),
        (["NONE"], BOTH),
        (["all"], NONE),
        (["index, follow"], NONE),
        (["index", "nofollow"], NOFOLLOW),
        (["index, noindex"], NOINDEX),  # the most restrictive wins
        (["follow", "none"], BOTH),
        (["noarchive, nosnippet, max-snippet:50, max-image-preview:large"], NONE),
        (["noimageindex, notranslate, indexifembedded, unknown-thing"], NONE),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow"], NOFOLLOW),
        (["unavailable_after: Friday, 25-Jun-2010 15:00:00 PST, noindex"], NOINDEX),
        (["max-snippet: 20, noindex"], NOINDEX),
        (["noindexed, nofollowing, no index"], NONE),  # only whole directives count
        ([" , ,noindex,, "], NOINDEX),
    ],
)
def test_directives_for_every_crawler(values, expected):
    assert parse_directives(values, UA) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["beam-crawler: noindex"], NOINDEX),
        (["Beam-Crawler: NOINDEX"], NOINDEX),
        (["beam-crawler:nofollow"], NOFOLLOW),
        (["beam-crawler: none"], BOTH),
        (["googlebot: noindex"], NONE),
        (["googlebot: noindex, nofollow"], NONE),  # a prefix runs to the end of the value
        (["otherbot: noindex, beam-crawler: nofollow"], NOFOLLOW),
        (["beam-crawler: nofollow, otherbot: noindex"], NOFOLLOW),
        (["noindex, googlebot: nofollow"], NOINDEX),
        (["googlebot: noindex", "nofollow"], NOFOLLOW),  # each header line starts afresh
        (["beam-crawler: unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"], NOINDEX),
        (["beam-crawler-news: noindex"], NONE),  # tokens match exactly, not by prefix
        (["beam: noindex"], NONE),
        (["beam-crawler: all", "otherbot: none"], NONE),
    ],
)
def test_per_user_agent_prefixes(values, expected):
    assert parse_directives(values, UA) == expected


def test_user_agent_may_be_given_as_a_product_token():
    assert parse_directives(["beam-crawler: noindex"], "Beam-Crawler") == NOINDEX
    assert product_token(UA).lower() == "beam-crawler"
    assert product_token(" Beam-Crawler ").lower() == "beam-crawler"


def test_page_directives_combine_meta_names_and_headers():
    meta = {"robots": ("index, follow",), "beam-crawler": ("nofollow",),
            "googlebot": ("noindex",), "viewport": ("width=device-width",)}
    assert page_directives(meta, [], UA) == NOFOLLOW
    assert page_directives(meta, ["noindex"], UA) == BOTH
    assert page_directives(meta, ["googlebot: none"], UA) == NOFOLLOW
    assert page_directives({}, ["beam-crawler: noindex", "otherbot: nofollow"], UA) == NOINDEX
    assert page_directives({"robots": ("all", "none")}, [], UA) == BOTH
    assert page_directives({"googlebot": ("none",)}, ["googlebot: none"], UA) == NONE


def test_page_directives_read_per_agent_prefixes_in_meta_content_too():
    assert page_directives({"robots": ("beam-crawler: noindex",)}, [], UA) == NOINDEX
    assert page_directives({"robots": ("otherbot: noindex",)}, [], UA) == NONE


def test_union_is_most_restrictive():
    assert NOINDEX.union(NOFOLLOW) == BOTH
    assert NONE.union(NONE) == NONE
    assert BOTH.union(NONE) == BOTH


def test_meta_contents_groups_by_lowercased_name_in_order():
    pairs = [("robots", "noindex"), ("Robots", "nofollow"), (" beam-crawler ", "none"),
             ("description", "A page")]
    assert meta_contents(pairs) == {
        "robots": ("noindex", "nofollow"), "beam-crawler": ("none",), "description": ("A page",)}


def test_x_robots_tags_reads_every_header_line():
    headers = (("Content-Type", "text/html"), ("X-Robots-Tag", "googlebot: noindex"),
               ("x-robots-tag", "nofollow"), ("X-Robots-Tags", "none"))
    assert x_robots_tags(headers) == ("googlebot: noindex", "nofollow")
    assert page_directives({}, x_robots_tags(headers), UA) == NOFOLLOW


def test_from_an_html_page_to_its_directives():
    page = (b'<html><head><meta name="ROBOTS" content="index"><meta name="Beam-Crawler" '
            b'content="noindex"><meta name="googlebot" content="nofollow"></head></html>')
    info = extract_html(page, "https://h.example/")
    assert page_directives(meta_contents(info.meta_names), (), UA) == NOINDEX
    assert page_directives(meta_contents(info.meta_names), (), "googlebot/2.1") == NOFOLLOW
