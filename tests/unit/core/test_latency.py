"""The loop-latency histogram: buckets, the hosts-table cell and back, percentiles."""

from __future__ import annotations

from transforms.core.latency import (
    bucket_of,
    counter_name,
    histogram_text,
    merge,
    parse_histogram,
    percentile,
)


def test_buckets_are_upper_edges_and_the_last_is_open():
    assert bucket_of(0.0) == "5" and bucket_of(5.0) == "5" and bucket_of(5.1) == "10"
    assert bucket_of(999) == "1000" and bucket_of(10**7) == "inf"
    assert counter_name(150) == "loop_ms_200"


def test_the_cell_carries_the_counters_and_reads_back():
    counters = {"loop_ms_200": 3, "loop_ms_20": 5, "loop_ms_inf": 1, "fetched": 9}
    text = histogram_text(counters)
    assert text == "20:5,200:3,inf:1"
    assert parse_histogram(text) == {"20": 5, "200": 3, "inf": 1}
    assert parse_histogram("") == {} and parse_histogram("20:x,,50:2") == {"50": 2}


def test_percentiles_of_the_merged_hosts():
    total = merge([{"20": 5, "200": 3}, {"20": 1, "1000": 1}])
    assert total == {"20": 6, "200": 3, "1000": 1}
    assert percentile(total, 0.5) == 20.0
    assert percentile(total, 0.9) == 200.0
    assert percentile(total, 1.0) == 1000.0
    assert percentile({}, 0.5) is None
    assert percentile({"inf": 1}, 0.5) == float("inf")
