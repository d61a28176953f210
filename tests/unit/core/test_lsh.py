"""Tests of the LSH band keys, the bounded buckets and their rows (transforms.core.lsh,
transforms.formats.band_rows)."""

from __future__ import annotations

import base64
import json
import random
import re

import numpy as np
import pytest
from datasketch.lsh import (  # type: ignore[import-untyped]
    _false_negative_probability,
    _false_positive_probability,
)

from transforms.core import lsh
from transforms.core.lsh import (
    BANDS,
    MAX_CANDIDATES,
    MAX_PER_HOST,
    MAX_URL_CHARS,
    ROWS,
    Candidate,
    Match,
    admits,
    band_keys,
    best_match,
    candidate_probability,
    judge,
    merge_matches,
)
from transforms.core.minhash import NUM_PERM, estimated_jaccard, text_signature
from transforms.formats.band_rows import band_row, band_row_key, bucket_from_cells
from transforms.formats.schema import BAND_FAMILY

VOCAB = [f"w{i}" for i in range(5000)]


def text(rng: random.Random, n: int = 400) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def signature_with_agreement(rng: np.random.Generator, base: np.ndarray, agree: int
                             ) -> bytes:
    """A signature equal to ``base`` at ``agree`` random positions and different elsewhere."""
    out = base.copy()
    differ = rng.choice(NUM_PERM, NUM_PERM - agree, replace=False)
    out[differ] ^= np.uint32(0x5A5A5A5A)
    return out.astype("<u4").tobytes()


def cand(url: str, host: str, signature: bytes) -> Candidate:
    return Candidate(url, host, signature)


# -- banding ----------------------------------------------------------------------------------


def test_bands_reach_recall_at_the_threshold() -> None:
    assert BANDS * ROWS <= NUM_PERM
    assert candidate_probability(0.9) >= 0.9
    assert candidate_probability(0.5) < 0.01


def test_docstring_figures_match_the_chosen_bands() -> None:
    """The rates documented in the module docstring are the ones the constants give."""
    doc = lsh.__doc__ or ""
    row = re.search(r"P\(cand\.\)\s+([\d. ]+)", doc)
    assert row is not None
    documented = [float(x) for x in row.group(1).split()]
    computed = [round(candidate_probability(s), 3) for s in (0.5, 0.7, 0.8, 0.85, 0.9, 0.95)]
    assert documented == computed
    assert f"FP {_false_positive_probability(0.9, BANDS, ROWS):.3f}" in doc
    assert f"FN {_false_negative_probability(0.9, BANDS, ROWS):.4f}" in doc


def test_documented_end_to_end_rates_hold_by_simulation() -> None:
    """Candidate *and* estimate >= 0.9, simulated on positions agreeing with probability s."""
    rng = np.random.default_rng(3)
    n = 40_000
    for s, low, high in ((0.85, 0.03, 0.055), (0.9, 0.45, 0.52), (0.95, 0.98, 0.995)):
        equal = rng.random((n, NUM_PERM)) < s
        bands = equal[:, :BANDS * ROWS].reshape(n, BANDS, ROWS)
        candidate = np.any(np.all(bands, axis=2), axis=1)
        confirmed = equal.sum(axis=1) / NUM_PERM >= 0.9
        assert low < float((candidate & confirmed).mean()) < high


def test_band_keys_shape_and_determinism() -> None:
    sig = text_signature(text(random.Random(1)))
    keys = band_keys(sig)
    assert len(keys) == BANDS == len(set(keys))
    assert all(re.fullmatch(r"\d\d#[0-9a-f]{16}", k) for k in keys)
    assert [k[:2] for k in keys] == [f"{b:02d}" for b in range(BANDS)]
    assert band_keys(sig) == keys
    assert band_keys(b"") == []
    with pytest.raises(ValueError):
        band_keys(b"\x00" * 100)


def test_band_keys_share_a_key_exactly_when_a_band_agrees() -> None:
    rng = np.random.default_rng(2)
    base = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint64).astype(np.uint32)
    other = base.copy()
    other[ROWS:] ^= np.uint32(1)  # only band 0 agrees
    shared = set(band_keys(base.tobytes())) & set(band_keys(other.tobytes()))
    assert shared == {band_keys(base.tobytes())[0]}
    # Equal values in *different* bands do not collide: the band number salts the key.
    rolled = np.roll(base, ROWS)
    assert not set(band_keys(base.tobytes())) & set(band_keys(rolled.tobytes()))


def test_near_copy_shares_a_band_and_unrelated_text_does_not() -> None:
    rng = random.Random(4)
    original = text(rng, 600)
    words = original.split()
    words[300:304] = ["edited", "four", "words", "here"]
    near = " ".join(words)
    a, b, c = (text_signature(t) for t in (original, near, text(rng, 600)))
    assert set(band_keys(a)) & set(band_keys(b))
    assert not set(band_keys(a)) & set(band_keys(c))


# -- verification -----------------------------------------------------------------------------


def test_best_match_picks_the_most_similar_above_threshold() -> None:
    rng = np.random.default_rng(5)
    base = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint64).astype(np.uint32)
    probe = cand("https://p.example/x", "p.example", base.astype("<u4").tobytes())
    c95 = cand("https://a.example/95", "a.example", signature_with_agreement(rng, base, 122))
    c99 = cand("https://b.example/99", "b.example", signature_with_agreement(rng, base, 127))
    c80 = cand("https://c.example/80", "c.example", signature_with_agreement(rng, base, 102))
    assert best_match(probe, [c95, c80, c99]) == Match(c99.url, 127 / 128)
    assert best_match(probe, [c80]) is None
    assert best_match(probe, [c80], threshold=0.75) == Match(c80.url, 102 / 128)
    # The same URL is never its own original, even with an equal signature.
    assert best_match(probe, [probe._replace(host="other")]) is None


def test_best_match_keeps_the_earliest_among_equals() -> None:
    sig = text_signature(text(random.Random(6)))
    first, second = cand("https://a/1", "a", sig), cand("https://a/2", "a", sig)
    assert best_match(cand("https://a/3", "a", sig), [first, second]) == Match(first.url, 1.0)
    assert merge_matches([Match("x", 0.92), Match("y", 0.97), Match("z", 0.97)]) == \
        Match("y", 0.97)
    assert merge_matches([]) is None


# -- the bucket policy ------------------------------------------------------------------------


def test_judge_adds_unmatched_probe_and_reports_matched_one() -> None:
    rng = random.Random(7)
    original_text = text(rng, 500)
    original = cand("https://a.example/o", "a.example", text_signature(original_text))
    copy = cand("https://b.example/c", "b.example", text_signature(original_text + " extra"))
    verdict = judge((), original)
    assert verdict == (None, (original,))
    verdict = judge((original,), copy)
    assert verdict.bucket is None  # represented by the original already
    assert verdict.match is not None and verdict.match.original == original.url
    assert verdict.match.similarity == estimated_jaccard(copy.signature, original.signature)


def test_same_url_again_is_neither_compared_nor_added() -> None:
    sig = text_signature(text(random.Random(8)))
    page = cand("https://a.example/o", "a.example", sig)
    assert judge((page,), page) == (None, None)


def test_flood_from_one_host_is_capped_and_cannot_flush_earlier_entries() -> None:
    rng = random.Random(9)
    legit = cand("https://good.example/", "good.example", text_signature(text(rng)))
    bucket: tuple[Candidate, ...] = (legit,)
    for i in range(1000):
        probe = cand(f"https://evil.example/{i}", "evil.example", text_signature(text(rng)))
        verdict = judge(bucket, probe)
        bucket = verdict.bucket or bucket
    assert bucket[0] == legit
    assert sum(1 for c in bucket if c.host == "evil.example") == MAX_PER_HOST
    assert len(bucket) == 1 + MAX_PER_HOST


def test_flood_from_many_hosts_stops_at_max_candidates_first_come_kept() -> None:
    rng = random.Random(10)
    bucket: tuple[Candidate, ...] = ()
    arrivals = [cand(f"https://h{i}.example/", f"h{i}.example", text_signature(text(rng)))
                for i in range(200)]
    for probe in arrivals:
        bucket = judge(bucket, probe).bucket or bucket
    assert bucket == tuple(arrivals[:MAX_CANDIDATES])
    # A copy of an admitted page is still found in a full bucket.
    copy = cand("https://late.example/", "late.example", arrivals[3].signature)
    verdict = judge(bucket, copy)
    assert verdict.match == Match(arrivals[3].url, 1.0) and verdict.bucket is None


def test_overlong_url_is_compared_but_not_stored() -> None:
    sig = text_signature(text(random.Random(11)))
    long_url = "https://a.example/" + "x" * MAX_URL_CHARS
    assert not admits((), cand(long_url, "a.example", sig))
    assert judge((), cand(long_url, "a.example", sig)) == (None, None)


# -- rows -------------------------------------------------------------------------------------


def test_band_row_round_trip() -> None:
    rng = random.Random(12)
    bucket = tuple(cand(f"https://h{i}.example/ü?q={i}", f"h{i}.example",
                        text_signature(text(rng))) for i in range(3))
    key = band_keys(bucket[0].signature)[4]
    row = band_row(key, bucket, 1764000000.5)
    assert row.key == band_row_key(key) == "l#" + key
    assert set(row.cells) == {BAND_FAMILY} and row.at == 1764000000.5
    doc = json.loads(row.cells[BAND_FAMILY]["v"])
    assert doc["v"] == 1 and len(doc["c"]) == 3
    assert bucket_from_cells(row.cells) == bucket


def test_version_1_row_bytes_still_read() -> None:
    """A row written by version 1 (bytes fixed here) reads back unchanged."""
    signature = bytes(range(256)) * 2
    cells = {BAND_FAMILY: {"v": '{"v":1,"c":[["https://a.example/","a.example","'
                                 + base64.b64encode(signature).decode() + '"]]}'}}
    assert bucket_from_cells(cells) == (Candidate("https://a.example/", "a.example", signature),)


@pytest.mark.parametrize("value", ["", "not json", '{"v":2,"c":[]}', '{"v":1}',
                                   '{"v":1,"c":[["u","h","!!!"]]}', '{"v":1,"c":[["u"]]}'])
def test_unreadable_rows_give_an_empty_bucket(value: str) -> None:
    assert bucket_from_cells({BAND_FAMILY: {"v": value}}) == ()


def test_missing_row_is_empty_and_oversized_row_is_cut() -> None:
    assert bucket_from_cells(None) == ()
    sig = text_signature(text(random.Random(13)))
    big = tuple(cand(f"https://h{i}/", f"h{i}", sig) for i in range(MAX_CANDIDATES + 5))
    assert len(bucket_from_cells(band_row("00#0", big, 0.0).cells)) == MAX_CANDIDATES
