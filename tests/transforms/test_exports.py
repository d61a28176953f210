"""``WriteExports`` on the DirectRunner: rolled by time in streaming (TestStream), by row count
and at the end of a bounded input; the files read back with pyarrow.dataset (Hive
partitioning) and with DuckDB, with the documented schema and every row once.

TestStream drives REAL_TIME timers with a test clock; the roll timer is set from the wall
clock, so the stream first moves the test clock to now and then ticks it forward.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import apache_beam as beam
import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to

from transforms.core.records import (
    CrawlRequest,
    FetchResult,
    NearDuplicate,
    PageContent,
    ParsedPage,
    StoredPage,
    WarcLocation,
)
from transforms.exports import (
    WriteExports,
    decode_state_row,
    encode_state_row,
    unwritten_rows,
)
from transforms.formats.exports import (
    NEAR_DUPLICATES,
    OUTCOMES,
    PAGES,
    SCHEMAS,
    ExportRow,
    export_rows,
    partition_of,
)

HOUR = 3600.0
T0 = 1_700_002_800.0  # 2023-11-14T23:00:00Z


def _page_rows(i: int, at: float) -> list[ExportRow]:
    url = f"https://h{i % 3}.example/p{i}"
    fetch = FetchResult(CrawlRequest(url, depth=1), f"h{i % 3}.example", at, url, status=200,
                        content_type="text/html", content_length=100 + i)
    content = PageContent(text=f"page {i} text", word_count=3, lang="en" if i % 2 else "fr")
    page = ParsedPage(fetch, f"Title {i}", (), f"sha1:{i}", content=content)
    return export_rows(StoredPage(page, WarcLocation("gs://b/w.warc.gz", i * 10, 10)))


def _rows(n: int, start: float) -> list[ExportRow]:
    """``n`` pages (and their outcomes) every 20 minutes from ``start``, a near copy each 4th."""
    rows: list[ExportRow] = []
    for i in range(n):
        at = start + i * 1200.0
        rows += _page_rows(i, at)
        if i % 4 == 0:
            rows += export_rows(NearDuplicate(f"https://h0.example/p{i}", "h0.example",
                                              "https://h0.example/", 0.95, at))
    return rows


def _where(path: str) -> tuple[str, str, str, int]:
    """(dataset, dt, hour, seq) of a written file."""
    parts = path.split("/")
    seq = int(parts[-1].split("-")[3])
    return parts[-4], parts[-3][3:], parts[-2][5:], seq


def _expected(rows: list[ExportRow], seq: int) -> set[tuple[str, str, str, int]]:
    return {(r.dataset, *partition_of(r.at), seq) for r in rows}


def _ticks(stream: TestStream, seconds: float, tick: float = 0.5) -> TestStream:
    for _ in range(int(seconds / tick)):
        stream = stream.advance_processing_time(tick)
    return stream


def test_streaming_rolls_by_time_and_the_files_read_back(tmp_path: Path):
    first, second = _rows(5, T0 - HOUR), _rows(3, T0 + 5 * HOUR)
    before = unwritten_rows()
    stream = TestStream().advance_processing_time(round(time.time(), 3)).add_elements(first)
    stream = _ticks(stream, 30).add_elements(second)
    stream = _ticks(stream, 30).advance_watermark_to_infinity()
    with TestPipeline() as p:
        paths = (p | stream
                 | WriteExports(str(tmp_path), roll_seconds=1.0, roll_rows=1000, shards=1))
        # One roll per batch: the first batch's files were written by the timer (seq 1)
        # before the second arrived (seq 2).
        assert_that(paths | beam.Map(_where), equal_to(
            sorted(_expected(first, 1) | _expected(second, 2))))
    assert unwritten_rows() == before
    rows = first + second
    count = {d: sum(r.dataset == d for r in rows) for d in (PAGES, OUTCOMES, NEAR_DUPLICATES)}

    # pyarrow.dataset with Hive partitioning: the documented schema plus dt and hour.
    pages = ds.dataset(tmp_path / PAGES, format="parquet", partitioning="hive")
    table = pages.to_table()
    assert table.num_rows == count[PAGES] == 8
    assert table.schema.remove(table.schema.get_field_index("dt")).remove(
        table.schema.get_field_index("hour") - 1).equals(SCHEMAS[PAGES])
    assert sorted(table.column("url").to_pylist()) == sorted(
        r.row["url"] for r in rows if r.dataset == PAGES)
    for fragment in pages.get_fragments():  # dt/hour live in the path only
        assert pq_schema(fragment).equals(SCHEMAS[PAGES])
    for dataset in (OUTCOMES, NEAR_DUPLICATES):
        got = ds.dataset(tmp_path / dataset, format="parquet", partitioning="hive").to_table()
        assert got.num_rows == count[dataset]

    # DuckDB reads the same files, partitions as columns, types as documented.
    con = duckdb.connect()
    glob = f"{tmp_path}/{PAGES}/**/*.parquet"
    source = f"read_parquet('{glob}', hive_partitioning=true)"
    assert con.execute(f"select count(*) from {source}").fetchone() == (count[PAGES],)
    types = {name: kind for name, kind, *_ in
             con.execute(f"describe select * from {source}").fetchall()}
    assert types["fetched_at"] == "TIMESTAMP WITH TIME ZONE"
    assert types["outlinks"] == "STRUCT(url VARCHAR, anchor VARCHAR, rel VARCHAR)[]"
    assert types["status"] == "INTEGER" and types["content_length"] == "BIGINT"
    assert types["dt"] == "DATE"
    by_hour = con.execute(f"select strftime(dt, '%Y-%m-%d'), hour, count(*) from {source} "
                          "group by all order by all").fetchall()
    expected: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.dataset == PAGES:
            expected[partition_of(r.at)] = expected.get(partition_of(r.at), 0) + 1
    assert by_hour == [(*k, v) for k, v in sorted(expected.items())]
    langs = [r.row["lang"] for r in rows if r.dataset == PAGES]
    assert con.execute(f"select lang, count(*) from {source} group by lang order by lang"
                       ).fetchall() == [(lang, langs.count(lang)) for lang in sorted(set(langs))]


def pq_schema(fragment: ds.ParquetFileFragment) -> pa.Schema:
    return fragment.physical_schema


def test_rolls_at_the_row_count_and_writes_the_rest_at_the_end_of_input(tmp_path: Path):
    rows = [ExportRow(r.dataset, T0 + i, r.row)  # all in one hour: 3 + 3 + 1 rows, 3 files
            for i, r in enumerate(r for r in _rows(7, T0) if r.dataset == OUTCOMES)]
    before = unwritten_rows()
    with TestPipeline() as p:
        paths = (p | beam.Create(rows)
                 | WriteExports(str(tmp_path), roll_seconds=3600.0, roll_rows=3, shards=1))
        assert_that(paths | beam.combiners.Count.Globally(), equal_to([3]))
    assert unwritten_rows() == before
    table = ds.dataset(tmp_path / OUTCOMES, format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("url").to_pylist()) == sorted(r.row["url"] for r in rows)
    seqs = sorted(int(f.name.split("-")[3]) for f in (tmp_path / OUTCOMES).rglob("*.parquet"))
    assert seqs[-1] == 3  # two full rolls of 3 rows, then the last row at the end of input


def test_buffered_rows_are_versioned_bytes_that_read_back_exactly():
    for row in _rows(2, T0 + 0.123456):
        assert decode_state_row(encode_state_row(row)) == row
    # Bytes of version 1 as a job buffered them, with a column the schema has since dropped
    # and one missing: the missing one reads as null, the dropped one is ignored.
    v1 = (b'\x01{"d":"outcomes","t":1700002800.5,"r":{"url":"https://h/","host":"h",'
          b'"outcome":"fetched","at":"2023-11-14T23:00:00.500000Z","http_status":200,'
          b'"old_column":1,"depth":0}}')
    row = decode_state_row(v1)
    assert row == ExportRow(OUTCOMES, 1_700_002_800.5, {
        "url": "https://h/", "host": "h", "outcome": "fetched",
        "at": datetime(2023, 11, 14, 23, 0, 0, 500000, tzinfo=UTC), "http_status": 200,
        "detail": None, "depth": 0})
    with pytest.raises(ValueError, match="unknown version"):
        decode_state_row(b"\x02" + v1[1:])
