"""Tests of the scalable Bloom filter used for per-host URL dedup."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transforms.core.bloom import BloomFullError, ScalableBloomFilter, bloom_bits, bloom_hashes

MEMBERS = 100_000
NON_MEMBERS = 200_000


def fingerprint(i: int, namespace: bytes = b"member") -> bytes:
    return hashlib.blake2b(namespace + i.to_bytes(8, "little"), digest_size=16).digest()


@pytest.fixture(scope="module")
def filled() -> ScalableBloomFilter:
    """A filter with error_rate 1e-3 grown through seven stages by 100k members."""
    bloom = ScalableBloomFilter(initial_capacity=1024, error_rate=1e-3)
    for i in range(MEMBERS):
        bloom.add(fingerprint(i))
    return bloom


def measured_false_positives(bloom: ScalableBloomFilter) -> int:
    return sum(fingerprint(i, b"non-member") in bloom for i in range(NON_MEMBERS))


def test_bits_formula_matches_known_value() -> None:
    bits = bloom_bits(1_000_000, 0.01)
    assert bits == 9_585_059  # ~9.59 Mbit, ~1.2 MB
    assert bloom_hashes(1_000_000, bits) == 7
    assert bloom_bits(1000, 1e-6) == math.ceil(1000 * math.log(1e6) / math.log(2) ** 2)


@pytest.mark.parametrize(("capacity", "rate"), [(0, 0.1), (10, 0.0), (10, 1.0), (10, -1.0)])
def test_bits_formula_rejects_bad_arguments(capacity: int, rate: float) -> None:
    with pytest.raises(ValueError):
        bloom_bits(capacity, rate)


def test_no_false_negatives(filled: ScalableBloomFilter) -> None:
    assert filled.stage_count == 7
    assert all(fingerprint(i) in filled for i in range(MEMBERS))
    # Re-adding a member reports it as present and changes nothing.
    before = filled.to_bytes()
    assert not any(filled.add(fingerprint(i)) for i in range(0, MEMBERS, 97))
    assert filled.to_bytes() == before


def test_false_positive_rate_matches_estimate_and_bound(filled: ScalableBloomFilter) -> None:
    # With seven full-ish stages the compound rate approaches the bound (the estimate is
    # ~0.98e-3 here), so the measurement is checked against the estimate within sampling
    # error, and the estimate against the bound.
    estimate = filled.false_positive_rate()
    assert estimate <= filled.error_rate
    measured = measured_false_positives(filled) / NON_MEMBERS
    sigma = math.sqrt(estimate / NON_MEMBERS)
    assert abs(measured - estimate) <= 4 * sigma


def test_measured_false_positive_rate_below_bound() -> None:
    # One stage at capacity: its share of the budget is error_rate * (1 - tightening).
    bloom = ScalableBloomFilter(initial_capacity=50_000, error_rate=1e-3)
    for i in range(50_000):
        bloom.add(fingerprint(i))
    assert bloom.stage_count == 1
    assert measured_false_positives(bloom) / NON_MEMBERS <= 1e-3


@pytest.mark.parametrize("error_rate", [0.1, 1e-2, 1e-3, 1e-6])
@pytest.mark.parametrize("tightening", [0.5, 0.8, 0.9])
def test_estimated_rate_of_a_full_filter_is_below_bound(error_rate: float,
                                                        tightening: float) -> None:
    bloom = ScalableBloomFilter(initial_capacity=4, error_rate=error_rate, tightening=tightening,
                                max_capacity=3000)
    i = 0
    while not bloom.full:
        bloom.add(fingerprint(i))
        i += 1
    assert bloom.stage_count == 10
    assert bloom.false_positive_rate() <= error_rate


def test_stages_grow_at_capacity() -> None:
    bloom = ScalableBloomFilter(initial_capacity=10, growth=2, max_capacity=1000)
    stages = []
    for i in range(71):
        assert bloom.add(fingerprint(i))
        stages.append(bloom.stage_count)
    # Stage capacities 10, 20, 40: a new stage starts with items 11, 31 and 71.
    assert stages[9] == 1 and stages[10] == 2
    assert stages[29] == 2 and stages[30] == 3
    assert stages[69] == 3 and stages[70] == 4
    assert bloom.count == len(bloom) == 71


def test_small_filter_is_small() -> None:
    bloom = ScalableBloomFilter()
    bloom.add(fingerprint(0))
    assert bloom.size_bytes < 5000
    assert bloom.size_bytes == len(bloom.to_bytes())


def test_serialization_round_trip(filled: ScalableBloomFilter) -> None:
    data = filled.to_bytes()
    assert len(data) == filled.size_bytes
    copy = ScalableBloomFilter.from_bytes(data)
    assert copy.to_bytes() == data
    assert (copy.count, copy.stage_count, copy.full) == (filled.count, filled.stage_count, False)
    assert copy.false_positive_rate() == filled.false_positive_rate()
    assert all(fingerprint(i) in copy for i in range(0, MEMBERS, 7))


def test_a_restored_filter_keeps_growing_like_the_original() -> None:
    original = ScalableBloomFilter(initial_capacity=16, max_capacity=500)
    for i in range(40):
        original.add(fingerprint(i))
    copy = ScalableBloomFilter.from_bytes(original.to_bytes())
    for i in range(30, 300):
        assert original.add(fingerprint(i)) == copy.add(fingerprint(i))
    assert original.to_bytes() == copy.to_bytes()


@pytest.mark.parametrize(
    "mangle",
    [
        lambda data: b"",
        lambda data: b"XYZ" + data[3:],
        lambda data: data[:3] + b"\x09" + data[4:],
        lambda data: data[:-1],
        lambda data: data + b"\x00",
        lambda data: data[:60],
    ],
)
def test_from_bytes_rejects_corrupt_data(mangle: Callable[[bytes], bytes]) -> None:
    bloom = ScalableBloomFilter(initial_capacity=8)
    for i in range(20):
        bloom.add(fingerprint(i))
    with pytest.raises(ValueError):
        ScalableBloomFilter.from_bytes(mangle(bloom.to_bytes()))


def test_full_filter() -> None:
    bloom = ScalableBloomFilter(initial_capacity=16, max_capacity=100)
    i = 0
    while not bloom.full:
        bloom.add(fingerprint(i))
        i += 1
    assert bloom.count == 100
    assert bloom.add(fingerprint(0)) is False  # present: still answered
    with pytest.raises(BloomFullError):
        bloom.add(fingerprint(10**6))
    assert bloom.count == 100
    assert fingerprint(0) in bloom
    restored = ScalableBloomFilter.from_bytes(bloom.to_bytes())
    assert restored.full


def test_membership_of_other_inputs() -> None:
    bloom = ScalableBloomFilter()
    assert bloom.add(b"http://example.com/")  # not 16 bytes: hashed first
    assert b"http://example.com/" in bloom
    assert bytearray(b"http://example.com/") in bloom
    assert b"http://example.com/x" not in bloom
    assert "http://example.com/" not in bloom  # a str is never a member
    assert not bloom.add(b"http://example.com/")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_capacity": 0},
        {"error_rate": 0.0},
        {"error_rate": 1.0},
        {"growth": 0},
        {"tightening": 0.0},
        {"tightening": 1.0},
        {"max_capacity": 0},
    ],
)
def test_rejects_bad_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ScalableBloomFilter(**kwargs)


# -- the state format: versions and parts -------------------------------------------------------

V1_BYTES = (Path(__file__).parents[1] / "data" / "bloom_v1.bin").read_bytes()


def test_bytes_written_by_version_1_are_read_by_this_version() -> None:
    # tests/unit/data/bloom_v1.bin was written by the version 1 code (commit 1b2e313) for
    # url-0 .. url-39 with initial_capacity=16, error_rate=1e-3, max_capacity=1000.
    assert V1_BYTES[:4] == b"SBF\x01"
    bloom = ScalableBloomFilter.from_bytes(V1_BYTES)
    assert (bloom.count, bloom.stage_count, bloom.max_stage_capacity) == (40, 2, None)
    urls = [hashlib.blake2b(f"url-{i}".encode(), digest_size=16).digest() for i in range(40)]
    assert all(u in bloom for u in urls)
    bloom.add(fingerprint(10_000))  # keeps working, and is written in this version
    again = ScalableBloomFilter.from_bytes(bloom.to_bytes())
    assert again.to_bytes()[3] == 2 and again.count == 41 and all(u in again for u in urls)


def test_capped_stages_stop_growing_and_keep_the_bound() -> None:
    bloom = ScalableBloomFilter(initial_capacity=64, error_rate=1e-4, tightening=0.85,
                                max_capacity=10_000, max_stage_capacity=256)
    for i in range(3000):
        bloom.add(fingerprint(i))
    sizes = [len(bloom.stage_bytes(i)) for i in range(bloom.stage_count)]
    assert bloom.stage_count > 12
    # Once at the cap, a stage grows only by the tighter error rate, not by its item count.
    assert max(sizes) < 3 * sizes[2]
    assert bloom.false_positive_rate() < 1e-4
    assert all(fingerprint(i) in bloom for i in range(3000))


def test_parts_round_trip_and_frozen_stages_never_change() -> None:
    bloom = ScalableBloomFilter(initial_capacity=32, max_capacity=5000, max_stage_capacity=64)
    written: list[bytes] = []  # what a state owner appends: each frozen stage once
    for i in range(400):
        bloom.add(fingerprint(i))
        head, frozen = bloom.to_parts()
        assert frozen[:len(written)] == written  # older stages are byte-for-byte unchanged
        written += frozen[len(written):]
    # A change rewrites the head only: one capped stage and a header, a small part of the whole.
    assert len(written) >= 6 and len(head) < len(bloom.to_bytes()) // 4
    copy = ScalableBloomFilter.from_parts(head, list(reversed(written)))
    assert copy.to_bytes() == bloom.to_bytes()
    with pytest.raises(ValueError, match="stages"):
        ScalableBloomFilter.from_parts(head, written[1:])
