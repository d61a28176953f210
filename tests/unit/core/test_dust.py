"""DUST rules: what tells two same-content URLs apart, how evidence becomes a rule, rewriting."""

from __future__ import annotations

import pytest

from transforms.core.dust import (
    MAX_CANDIDATE_RULES,
    MAX_RULES,
    RULE_SUPPORT,
    add_evidence,
    adopted_rules,
    rewrite,
    rule_between,
    rule_from_id,
    rule_id,
)
from transforms.core.records import RULE_DROP, RULE_SORT, UrlRule

BASE = "https://shop.example/facet/"


def test_parameter_order_alone_is_a_sort_rule_for_that_path():
    rule = rule_between(BASE + "?color=red&size=m", BASE + "?size=m&color=red")
    assert rule == UrlRule("/facet/", RULE_SORT)


def test_one_parameter_present_in_one_url_only_or_with_another_value_is_a_drop_rule():
    assert rule_between(BASE + "?color=red", BASE + "?color=red&ref=home") == UrlRule(
        "/facet/", RULE_DROP, "ref")
    assert rule_between(BASE + "?ref=a&color=red", BASE + "?color=red&ref=b") == UrlRule(
        "/facet/", RULE_DROP, "ref")
    # Repeated values of one parameter count as that parameter.
    assert rule_between(BASE + "?t=1&t=2", BASE + "?t=3") == UrlRule("/facet/", RULE_DROP, "t")


@pytest.mark.parametrize("a, b", [
    (BASE + "?color=red", BASE + "?size=m"),  # two parameters differ
    (BASE + "?color=red&size=s", BASE + "?color=blue&size=m"),
    ("https://shop.example/a?x=1", "https://shop.example/b?x=1"),  # another path
    ("https://shop.example/a?x=1", "https://other.example/a?x=2"),  # another host
    ("http://shop.example/a?x=1", "https://shop.example/a?x=2"),  # another scheme
    (BASE + "?x=1", BASE + "?x=1"),  # the same URL
])
def test_urls_that_differ_in_more_than_one_parameter_or_outside_the_query_teach_nothing(a, b):
    assert rule_between(a, b) is None


def test_a_rule_is_adopted_only_after_distinct_contents_showed_it():
    evidence: dict[str, list[str]] = {}
    adopted: list[str] = []
    rule = UrlRule("/facet/", RULE_SORT)
    for _ in range(5):  # one page under many URLs is one piece of evidence
        assert not add_evidence(evidence, adopted, rule, "t:one")
    assert adopted == []
    for i in range(2, RULE_SUPPORT + 1):
        learned = add_evidence(evidence, adopted, rule, f"t:{i}")
    assert learned and adopted == ["sort /facet/"] and evidence == {}
    assert not add_evidence(evidence, adopted, rule, "t:later")  # known already


def test_evidence_and_rules_stay_within_their_bounds():
    evidence: dict[str, list[str]] = {}
    adopted: list[str] = []
    for i in range(MAX_CANDIDATE_RULES + 10):
        add_evidence(evidence, adopted, UrlRule(f"/p{i}", RULE_SORT), "t:a")
    assert len(evidence) == MAX_CANDIDATE_RULES
    evidence.clear()
    for i in range(MAX_RULES + 5):
        for d in range(RULE_SUPPORT):
            add_evidence(evidence, adopted, UrlRule(f"/q{i}", RULE_SORT), f"t:{d}")
    assert len(adopted) == MAX_RULES


def test_rewrite_sorts_and_drops_on_the_rule_path_only_and_keeps_encoding():
    rules = [UrlRule("/facet/", RULE_SORT), UrlRule("/facet/", RULE_DROP, "ref")]
    assert rewrite(BASE + "?size=m&ref=x&color=r%C3%A9d", rules) == (
        BASE + "?color=r%C3%A9d&size=m")
    assert rewrite("https://shop.example/other?size=m&color=red", rules) == (
        "https://shop.example/other?size=m&color=red")
    assert rewrite(BASE, rules) == BASE
    assert rewrite(BASE + "?ref=only", rules) == BASE


def test_rule_ids_round_trip_and_junk_is_skipped():
    for rule in (UrlRule("/facet/", RULE_SORT), UrlRule("/item", RULE_DROP, "ref")):
        assert rule_from_id(rule_id(rule)) == rule
    assert adopted_rules(["sort /a", "nonsense", "drop /b", "drop /c p"]) == [
        UrlRule("/a", RULE_SORT), UrlRule("/c", RULE_DROP, "p")]
