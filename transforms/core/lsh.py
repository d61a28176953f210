"""MinHash LSH for near duplicates: band keys, the bounded bucket each key holds, and the
verdict on a page (pure).

**Banding.** A 128-value signature (``transforms.core.minhash``) is cut into ``BANDS`` = 10
bands of ``ROWS`` = 12 values (120 of the 128 values; the last 8 only take part in the
verification). Each band hashes to a key ``<band>#<16 hex>``; two pages whose signatures agree
on all 12 values of any band share that key and become candidates. For a pair with shingle
Jaccard s, P(candidate) = 1 - (1 - s^12)^10:

    s            0.50    0.70    0.80    0.85    0.90    0.95
    P(cand.)     0.002   0.130   0.509   0.784   0.964   1.000

datasketch's integrated areas for threshold 0.9 (``_false_positive_probability``,
``_false_negative_probability``) are FP 0.113 and FN 0.0005. ``MinHashLSH(threshold=0.9)``
would pick (5, 25), which makes a pair at s = 0.9 a candidate only 31% of the time, and (8, 16)
only 81%; (10, 12) is the fewest bands with P(cand.) >= 0.9 at s = 0.9.

**Verification.** A candidate is confirmed when the estimated Jaccard of the two full
signatures (equal positions / 128) is at least the threshold; the best confirmed candidate is
the page's original. The candidate false positives above cost only a 128-value comparison each.
Because the threshold applies to the *estimate* (sd 0.027 at s = 0.9), the end-to-end
probability that a pair is reported (both steps; Monte Carlo, 400,000 pairs per s) is:

    s            0.80    0.85    0.88    0.90    0.92    0.95
    P(reported)  0.001   0.042   0.223   0.481   0.775   0.988

so pairs at s >= 0.93 are found at least 9 times in 10, pairs at s <= 0.85 at most 1 in 24, and
s = 0.9 is the coin-flip point. The threshold can be lowered to ``MIN_THRESHOLD`` = 0.8, no
further: the bands are fixed (the table's keys depend on them), and below 0.8 they make fewer
than half the pairs at the threshold candidates. With 5-word shingles, s = 0.9 is about 1% of
the words replaced at scattered places, or one replaced passage of about 5% of the words.

**State bounds.** A bucket keeps at most ``MAX_CANDIDATES`` = 16 candidates, at most
``MAX_PER_HOST`` = 4 from one host, each a URL of at most ``MAX_URL_CHARS`` characters, its
host and its 512-byte signature: at most 16 * (4096 + 253 + 512) bytes (~78 KB) of values,
~1.1 KB per candidate for a typical URL, and one candidate for most keys (a page that matches
nothing is alone in each of its buckets). A page touches ``BANDS`` keys, so the index grows by at
most 10 small rows per distinct page that the crawl's budgets let in, and checking a page costs
at most 10 * 16 comparisons.

**Admission** (``judge``): first come, kept. A probe joins a bucket only if it matched nothing
there, its URL is new to the bucket and short enough, the bucket has room, and its host has
fewer than ``MAX_PER_HOST`` entries. Nothing is ever evicted, so:

* an attacker's pages cannot grow a bucket past its bound, nor flush the originals that came
  first: copies of one text all fall in the same 10 buckets, and one host fills at most 4 of a
  bucket's 16 slots;
* to fill a bucket of a target text with pages that do *not* match it, an attacker needs texts
  agreeing with it on 12 MinHash values of a band (i.e. near copies, which are then reported
  as copies) or a collision of the 64-bit BLAKE2b band hash;
* a full bucket still compares every probe with its candidates, so a copy is still found;
  only a new, distinct text sharing the key is not added (the next copy of *it* may be missed
  in this band; it has 9 others).

A URL already in a bucket is never compared with itself; a recrawl whose text changed enters
the buckets of its new signature, and its old entries stay (stale, bounded, harmless).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import NamedTuple

from transforms.core.minhash import NUM_PERM, estimated_jaccard

BANDS = 10
ROWS = 12
MAX_CANDIDATES = 16
MAX_PER_HOST = 4
MAX_URL_CHARS = 4096
DEFAULT_THRESHOLD = 0.9
# The bands are fixed (the table's keys depend on them), so a lower threshold finds little more:
# P(cand.) is 0.51 at s = 0.8. Thresholds below this are refused.
MIN_THRESHOLD = 0.8
_BAND_BYTES = ROWS * 4
_KEY_DIGEST_BYTES = 8

assert BANDS * ROWS <= NUM_PERM


class Candidate(NamedTuple):
    """One page in a bucket: its URL, host and 512-byte MinHash signature."""

    url: str
    host: str
    signature: bytes


class Match(NamedTuple):
    """The best confirmed candidate for a probe and its estimated Jaccard similarity."""

    original: str
    similarity: float


class Verdict(NamedTuple):
    """What one bucket says of a probe: its match (or None) and the bucket after the probe,
    or None when the bucket is unchanged (nothing to write)."""

    match: Match | None
    bucket: tuple[Candidate, ...] | None


def candidate_probability(similarity: float, bands: int = BANDS, rows: int = ROWS) -> float:
    """P(two signatures with Jaccard ``similarity`` share at least one band key)."""
    return 1.0 - (1.0 - similarity ** rows) ** bands


def band_keys(signature: bytes) -> list[str]:
    """The ``BANDS`` keys ``<band>#<hex>`` of a signature; [] for b"" (no text to compare).

    Raises:
        ValueError: when a non-empty signature is not 512 bytes.
    """
    if not signature:
        return []
    if len(signature) != NUM_PERM * 4:
        raise ValueError(f"a signature is {NUM_PERM * 4} bytes, got {len(signature)}")
    keys = []
    for band in range(BANDS):
        chunk = signature[band * _BAND_BYTES:(band + 1) * _BAND_BYTES]
        # The band number salts the hash, so equal values in different bands never collide.
        digest = hashlib.blake2b(chunk, digest_size=_KEY_DIGEST_BYTES,
                                 person=b"lsh-band" + bytes([band])).hexdigest()
        keys.append(f"{band:02d}#{digest}")
    return keys


def best_match(probe: Candidate, candidates: Sequence[Candidate],
               threshold: float = DEFAULT_THRESHOLD) -> Match | None:
    """The candidate most similar to ``probe`` with estimate >= ``threshold`` (the earliest
    among equals), never ``probe``'s own URL; None when none is."""
    best: Match | None = None
    for candidate in candidates:
        if candidate.url == probe.url:
            continue
        similarity = estimated_jaccard(probe.signature, candidate.signature)
        if similarity >= threshold and (best is None or similarity > best.similarity):
            best = Match(candidate.url, similarity)
    return best


def admits(bucket: Sequence[Candidate], probe: Candidate) -> bool:
    """Whether ``probe`` may join ``bucket`` (first come, kept; see the module docstring)."""
    if len(bucket) >= MAX_CANDIDATES or len(probe.url) > MAX_URL_CHARS:
        return False
    if any(c.url == probe.url for c in bucket):
        return False
    return sum(1 for c in bucket if c.host == probe.host) < MAX_PER_HOST


def judge(bucket: Sequence[Candidate], probe: Candidate,
          threshold: float = DEFAULT_THRESHOLD) -> Verdict:
    """Compares ``probe`` with a bucket and decides whether it joins: a probe that matched a
    candidate is represented by it already, so only an unmatched one is added."""
    match = best_match(probe, bucket, threshold)
    if match is None and admits(bucket, probe):
        return Verdict(None, (*bucket, probe))
    return Verdict(match, None)


def merge_matches(matches: Sequence[Match]) -> Match | None:
    """One report from a page's per-band matches: the most similar (earliest among equals)."""
    best: Match | None = None
    for match in matches:
        if best is None or match.similarity > best.similarity:
            best = match
    return best
