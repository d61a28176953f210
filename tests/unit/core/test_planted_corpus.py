"""The planted duplicate corpus (pipeline.demo.planted) and how MinHash LSH does on it: near
copies found with precision >= 0.95 and recall >= 0.9, distinct same-template pages never
flagged. Texts are the generator's (the HTML text extractor is tested elsewhere)."""

from __future__ import annotations

import difflib
import random
import urllib.request
from collections import Counter
from collections.abc import Sequence

import pytest

from pipeline.demo.planted import (
    DISTINCT,
    EXACT,
    KINDS,
    NEAR,
    NEAR_NAV,
    ORIGINAL,
    SAME_TEXT,
    WORDS_RANGE,
    PlantedPage,
    PlantedSite,
    planted_pages,
    planted_site,
)
from transforms.core.lsh import Candidate, Match, band_keys, judge, merge_matches
from transforms.core.minhash import exact_jaccard, text_signature

BASE = "http://127.0.0.1:8000"
NEAR_KINDS = (NEAR, NEAR_NAV)


@pytest.fixture(scope="module")
def pages() -> list[PlantedPage]:
    return planted_pages(seed=0, originals=40, distinct=40)


def run_lsh(pages: Sequence[PlantedPage]) -> dict[str, Match]:
    """The near-duplicate stage's logic over pages in arrival order: every page to its band
    buckets, judged there, one report per page (its best match). Exact and same-text copies
    are left out, as the exact-duplicate stage marks them before."""
    buckets: dict[str, tuple[Candidate, ...]] = {}
    found: dict[str, Match] = {}
    for page in pages:
        if page.kind in (EXACT, SAME_TEXT):
            continue
        probe = Candidate(page.path, "planted.example", text_signature(page.text))
        matches = []
        for key in band_keys(probe.signature):
            verdict = judge(buckets.get(key, ()), probe)
            if verdict.bucket is not None:
                buckets[key] = verdict.bucket
            if verdict.match is not None:
                matches.append(verdict.match)
        best = merge_matches(matches)
        if best is not None:
            found[page.path] = best
    return found


def cluster(page: PlantedPage) -> str:
    return page.original or page.path


def test_corpus_is_deterministic_and_seeded() -> None:
    assert planted_pages(3, 5, 5) == planted_pages(3, 5, 5)
    assert planted_pages(3, 5, 5) != planted_pages(4, 5, 5)
    with pytest.raises(ValueError):
        planted_pages(0, -1, 0)


def test_kinds_counts_and_sizes(pages: list[PlantedPage]) -> None:
    counts = Counter(p.kind for p in pages)
    assert counts == {ORIGINAL: 40, EXACT: 40, SAME_TEXT: 40, NEAR: 40, NEAR_NAV: 40,
                      DISTINCT: 40}
    assert set(counts) == set(KINDS)
    assert len({p.path for p in pages}) == len(pages)
    by_path = {p.path: p for p in pages}
    for page in pages:
        words = sum(len(p.split()) for p in page.paragraphs)
        if page.kind in (ORIGINAL, DISTINCT):
            assert page.original is None
            assert WORDS_RANGE[0] <= words <= WORDS_RANGE[1]
        else:
            assert page.original is not None and by_path[page.original].kind == ORIGINAL
            assert page.title == by_path[page.original].title


def test_copies_differ_from_their_original_as_planted(pages: list[PlantedPage]) -> None:
    by_path = {p.path: p for p in pages}
    for page in pages:
        if page.original is None:
            continue
        original = by_path[page.original]
        if page.kind in (EXACT, SAME_TEXT):
            assert page.text == original.text
            continue
        a, b = original.text.split(), page.text.split()
        ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
        edited = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")
        if page.kind == NEAR:  # 2-4% planted; the diff may align an edit's common words
            assert 0.015 <= edited / len(a) <= 0.05, page.path
        else:
            assert 1 <= edited <= 12, page.path
        assert 0.9 <= exact_jaccard(page.text, original.text) < 1.0


def test_distinct_pages_share_almost_no_shingles(pages: list[PlantedPage]) -> None:
    sites = [p for p in pages if p.kind in (ORIGINAL, DISTINCT)][:30]
    worst = max(exact_jaccard(a.text, b.text) for i, a in enumerate(sites) for b in sites[i + 1:])
    assert worst < 0.05


def test_lsh_finds_near_copies_with_precision_and_recall(pages: list[PlantedPage]) -> None:
    """In crawl order (each original before its copies) the reported original is exact."""
    by_path = {p.path: p for p in pages}
    found = run_lsh(pages)
    truth = {p.path: p.original for p in pages if p.kind in NEAR_KINDS}
    correct = sum(1 for url, match in found.items() if truth.get(url) == match.original)
    precision = correct / len(found)
    recall = correct / len(truth)
    assert precision >= 0.95, precision
    assert recall >= 0.9, recall
    assert all(m.similarity >= 0.9 for m in found.values())
    # Distinct same-template pages and originals are never flagged.
    assert not [u for u in found if by_path[u].kind in (ORIGINAL, DISTINCT)]


def test_lsh_clusters_hold_in_any_arrival_order(pages: list[PlantedPage]) -> None:
    """Shuffled, a copy may come first and its original is then reported as the copy's near
    duplicate: still a correct pair of one cluster."""
    by_path = {p.path: p for p in pages}
    shuffled = list(pages)
    random.Random(5).shuffle(shuffled)
    found = run_lsh(shuffled)
    correct = sum(1 for url, m in found.items()
                  if cluster(by_path[url]) == cluster(by_path[m.original]))
    assert correct / len(found) >= 0.95
    flagged_clusters = {cluster(by_path[u]) for u in found}
    originals = {p.path for p in pages if p.kind == ORIGINAL}
    assert len(flagged_clusters & originals) / len(originals) >= 0.9
    assert not [u for u in found if by_path[u].kind == DISTINCT]


def test_identical_texts_have_identical_signatures(pages: list[PlantedPage]) -> None:
    by_path = {p.path: p for p in pages}
    for page in pages:
        if page.kind in (EXACT, SAME_TEXT) and page.original:
            assert text_signature(page.text) == text_signature(by_path[page.original].text)


def test_site_responses_and_truth() -> None:
    responses, truth = planted_site(BASE, seed=1, originals=4, distinct=3)
    pages = planted_pages(1, 4, 3)
    assert set(truth) == {BASE + p.path for p in pages}
    assert {t.kind for t in truth.values()} == set(KINDS)
    assert set(responses["/"].links) == set(truth)
    assert responses["/robots.txt"].body == b"User-agent: *\nDisallow:\n"
    for page in pages:
        body = responses[page.path].body.decode()
        assert responses[page.path].status == 200 and page.paragraphs[0] in body
        if page.original is None:
            continue
        assert truth[BASE + page.path].original == BASE + page.original
        original = responses[page.original].body
        if page.kind == EXACT:
            assert responses[page.path].body == original
        else:
            assert responses[page.path].body != original
        if page.kind in (SAME_TEXT, NEAR_NAV):
            assert "<nav><ul>" not in body  # other navigation and markup


def test_planted_site_serves_the_corpus_over_http() -> None:
    with PlantedSite().start(seed=2, originals=2, distinct=1) as site:
        some = sorted(site.truth)[0]
        for url in (site.seed_url, some, site.base_url + "/robots.txt"):
            with urllib.request.urlopen(url, timeout=5) as reply:  # loopback only
                path = url[len(site.base_url):]
                assert reply.status == 200 and reply.read() == site.response(path).body
        assert [h.path for h in site.requests()][:1] == ["/"]
