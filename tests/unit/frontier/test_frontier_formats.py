"""The frontier's versioned state formats and the index's row keys: round trips, bytes written
by version 1 read by this code, and key order equal to fetch order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transforms.core.records import AckToken, CrawlRequest
from transforms.core.retry import HostBackoff
from transforms.core.robots import RobotsRules
from transforms.formats.index import IndexEntry, entry_cells, entry_from_cells, index_row_key
from transforms.frontier.state import (
    ActiveLease,
    HeadEntry,
    HostState,
    InboxBatch,
    IoJob,
    decode_head,
    decode_host_state,
    decode_inbox,
    decode_robots,
    encode_head,
    encode_host_state,
    encode_inbox,
    encode_robots,
)

DATA = Path(__file__).parents[1] / "data"
REQUEST = CrawlRequest("https://a.example/x?y=1", 2, 3, "https://a.example/", attempt=1,
                       kind="sitemap", via="https://a.example/robots.txt", lastmod=1.5e9,
                       revisit="recrawl")


def _state() -> HostState:
    return HostState(
        "a.example#1", phase="ready", incarnation="i1", robots_mode="parsed",
        robots_fetched_at=10.0, robots_attempts=1, robots_retry_at=11.0,
        next_allowed_at=12.5, lease=ActiveLease("L", (HeadEntry(3.5, REQUEST, True, 7),), 20.0,
                                                False, 2, None),
        io=IoJob("J", "refill", 30.0, 1), timer_at=13.0, counters={"fetched": 4},
        last_error="timeout: x", backoff=HostBackoff(2, 40.0, 4.0), spilled=9,
        index_exhausted=True, next_eligible_at=99.0, head_size=3, arrivals=1, inbox=0,
        seq=12, seen_version="v", seen_frozen=2, robots_saved_at=10.0, marked_pending=True)


def test_host_state_round_trips():
    state = _state()
    assert decode_host_state(encode_host_state(state)) == state


def test_head_inbox_and_robots_round_trip():
    head = [HeadEntry(1.0, REQUEST), HeadEntry(-2.5, CrawlRequest("ftp://b/"), True, 3)]
    assert decode_head(encode_head(head)) == head
    batch = InboxBatch((REQUEST,), (AckToken("m", 1, 2),))
    assert decode_inbox(encode_inbox(batch)) == batch
    rules = RobotsRules("parsed", "User-agent: *\nDisallow: /x\n", 200, 5.0, "")
    assert decode_robots(encode_robots(rules)) == rules


def test_bytes_written_by_version_1_are_read_by_this_code():
    # tests/unit/data/frontier_state_v1.json: the first version's cells, hex-encoded. A field
    # added later must get its default from them, not fail.
    cells = {name: bytes.fromhex(value) for name, value in
             json.loads((DATA / "frontier_state_v1.json").read_text()).items()}
    state = decode_host_state(cells["host"])
    assert state.host == "a.example" and state.counters == {"accepted": 2}
    assert state.lease is not None and state.lease.entries[0].request.url == "https://a.example/"
    assert [e.request.url for e in decode_head(cells["head"])] == ["https://a.example/b"]
    assert decode_inbox(cells["inbox"]).tokens == (AckToken("m1", 0, 1),)
    assert decode_robots(cells["robots"]).mode == "parsed"


def test_a_newer_version_or_another_value_is_refused_with_a_clear_error():
    data = encode_host_state(_state())
    with pytest.raises(ValueError, match="newer than this code"):
        decode_host_state(data[:2] + bytes([9]) + data[3:])
    with pytest.raises(ValueError, match="not a HS state value"):
        decode_host_state(encode_head([]))


def test_index_keys_sort_in_fetch_order():
    entries = [(-1.0, 5), (0.0, 2), (0.0, 3), (25_000_000.5, 1), (25_000_000.25, 9)]
    keys = [index_row_key("a.example", rank, f"https://a.example/{i}", seq)
            for i, (rank, seq) in enumerate(entries)]
    assert sorted(keys) == [keys[0], keys[1], keys[2], keys[4], keys[3]]
    assert all(k.startswith("a.example|") for k in keys)
    with pytest.raises(ValueError):
        index_row_key("a|b", 0.0, "https://a/")


def test_index_entries_round_trip_through_their_cells():
    entry = IndexEntry("a.example", 12.25, REQUEST, 99.0, 4, "inc", 120.0)
    assert entry_from_cells(entry.row_key, entry_cells(entry)) == entry
    assert entry.held("inc", 100.0) and not entry.held("inc", 121.0)
    assert not entry.held("other", 100.0)
