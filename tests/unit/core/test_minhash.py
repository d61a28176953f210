"""Tests of the MinHash text signatures (transforms.core.minhash)."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH  # type: ignore[import-untyped]

from transforms.core.minhash import (
    NUM_PERM,
    SHINGLE_WORDS,
    SIGNATURE_BYTES,
    estimated_jaccard,
    exact_jaccard,
    shingle_hashes,
    shingles,
    signature_of_hashes,
    signature_values,
    text_signature,
    to_datasketch,
    words,
)


def vocabulary(seed: int, size: int = 4000) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(size)]


VOCAB = vocabulary(7)


def random_text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n_words))


def edited(rng: random.Random, text: str, fraction: float) -> str:
    """``text`` with ``fraction`` of its words replaced at random positions."""
    w = text.split()
    for i in rng.sample(range(len(w)), round(fraction * len(w))):
        w[i] = rng.choice(VOCAB) + "x"
    return " ".join(w)


def test_words_are_lowercased_word_tokens() -> None:
    assert words("Hello, World! it's 2024_x") == ["hello", "world", "it", "s", "2024_x"]


def test_shingles_are_five_word_windows() -> None:
    assert shingles("a b c d e f") == ["a b c d e", "b c d e f"]
    assert shingles("a b c d") == []


def test_short_text_has_empty_signature() -> None:
    assert text_signature("") == b""
    assert text_signature("one two three four") == b""
    assert len(text_signature("one two three four five")) == SIGNATURE_BYTES
    assert estimated_jaccard(b"", text_signature("one two three four five")) == 0.0


def test_signature_is_512_bytes_of_uint32() -> None:
    sig = text_signature(random_text(random.Random(1), 300))
    assert len(sig) == SIGNATURE_BYTES == NUM_PERM * 4
    values = signature_values(sig)
    assert values.dtype == np.dtype("<u4") and values.size == NUM_PERM


def test_identical_texts_give_identical_signatures() -> None:
    text = random_text(random.Random(2), 500)
    assert text_signature(text) == text_signature(text)
    # Case, punctuation and whitespace are not words.
    noisy = "  ".join(w.upper() + "," for w in text.split())
    assert text_signature(noisy) == text_signature(text)
    assert estimated_jaccard(text_signature(text), text_signature(noisy)) == 1.0


def test_word_order_matters() -> None:
    text = random_text(random.Random(3), 400)
    shuffled = text.split()
    random.Random(4).shuffle(shuffled)
    assert estimated_jaccard(text_signature(text), text_signature(" ".join(shuffled))) < 0.1


def test_values_equal_datasketch_update_batch_on_the_same_shingle_hashes() -> None:
    """Bit-identical to datasketch's affine32 MinHash (seed 1) fed the same hashes."""
    text = random_text(random.Random(5), 700)
    hashes = shingle_hashes(text)
    reference = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=lambda x: x)
    reference.update_batch([int(h) for h in hashes])
    assert np.array_equal(signature_of_hashes(hashes), reference.hashvalues)
    assert np.array_equal(signature_values(text_signature(text)), reference.hashvalues)


def test_datasketch_jaccard_on_wrapped_signatures_equals_ours() -> None:
    rng = random.Random(6)
    for _ in range(20):
        a = random_text(rng, rng.randint(50, 800))
        b = edited(rng, a, rng.uniform(0.0, 0.1))
        sa, sb = text_signature(a), text_signature(b)
        assert to_datasketch(sa).jaccard(to_datasketch(sb)) == estimated_jaccard(sa, sb)


def test_wrapped_signatures_work_in_datasketch_lsh() -> None:
    rng = random.Random(8)
    base = random_text(rng, 600)
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(10, 12))
    lsh.insert("base", to_datasketch(text_signature(base)))
    lsh.insert("other", to_datasketch(text_signature(random_text(rng, 600))))
    near = text_signature(base.replace(base.split()[300], "changed", 1))
    assert lsh.query(to_datasketch(near)) == ["base"]


def test_estimate_tracks_exact_jaccard_on_edited_copies() -> None:
    rng = random.Random(9)
    errors = []
    for _ in range(60):
        a = random_text(rng, rng.randint(300, 800))
        b = edited(rng, a, rng.uniform(0.0, 0.05))
        errors.append(abs(estimated_jaccard(text_signature(a), text_signature(b))
                          - exact_jaccard(a, b)))
    # sd of the estimate is at most sqrt(0.25 / 128) = 0.044; the mean error is about 0.8 sd.
    assert float(np.mean(errors)) < 0.03
    assert max(errors) < 0.15


def test_estimate_tracks_exact_jaccard_on_random_pairs() -> None:
    """Overlapping random texts (a shared middle passage) span the whole range of J."""
    rng = random.Random(10)
    errors = []
    for _ in range(60):
        shared = random_text(rng, rng.randint(0, 600))
        a = f"{random_text(rng, rng.randint(5, 300))} {shared}"
        b = f"{shared} {random_text(rng, rng.randint(5, 300))}"
        errors.append(estimated_jaccard(text_signature(a), text_signature(b))
                      - exact_jaccard(a, b))
    # Mid-range J has the widest estimate (sd up to 0.044): unbiased, mean |error| near 0.8 sd.
    assert abs(float(np.mean(errors))) < 0.015
    assert float(np.mean(np.abs(errors))) < 0.045
    assert max(np.abs(errors)) < 0.18


def test_unrelated_texts_estimate_near_zero() -> None:
    rng = random.Random(11)
    sims = [estimated_jaccard(text_signature(random_text(rng, 400)),
                              text_signature(random_text(rng, 400))) for _ in range(20)]
    assert max(sims) < 0.05


def test_wrong_length_signature_is_rejected() -> None:
    with pytest.raises(ValueError):
        estimated_jaccard(b"\x00" * 10, b"\x00" * 10)
    with pytest.raises(ValueError):
        to_datasketch(b"\x00" * (SIGNATURE_BYTES - 4))


def test_huge_text_is_chunked_and_matches_unchunked_min() -> None:
    text = random_text(random.Random(12), 9000)
    hashes = shingle_hashes(text)
    assert hashes.size == 9000 - SHINGLE_WORDS + 1
    halves = np.minimum(signature_of_hashes(hashes[:4000]), signature_of_hashes(hashes[4000:]))
    assert np.array_equal(signature_values(text_signature(text)), halves)


def test_median_page_cost_is_within_budget() -> None:
    """Goal 0.5 ms per median page (~640 shingles); measured ~0.2 ms. Generous bound for CI."""
    text = random_text(random.Random(13), 644)
    text_signature(text)
    best = min(_time_per_call(text) for _ in range(3))
    assert best < 2e-3


def _time_per_call(text: str, calls: int = 100) -> float:
    start = time.process_time()
    for _ in range(calls):
        text_signature(text)
    return (time.process_time() - start) / calls
