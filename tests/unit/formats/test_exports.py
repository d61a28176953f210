"""The export datasets (transforms.formats.exports): schemas, rows from records and from
webtable cells, partitions at hour and day boundaries, Parquet and JSON Lines that read back."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from transforms.core.records import (
    OUTCOME_ERROR,
    OUTCOME_FETCHED,
    OUTCOME_QUEUED,
    OUTCOME_RETRY,
    OUTCOME_ROBOTS_BLOCKED,
    CrawlRequest,
    FetchResult,
    NearDuplicate,
    OutLink,
    PageContent,
    ParsedPage,
    Revisit,
    StoredPage,
    UrlOutcome,
    WarcLocation,
)
from transforms.formats.exports import (
    NEAR_DUPLICATES,
    OUTCOMES,
    PAGES,
    SCHEMAS,
    ExportRow,
    export_path,
    export_rows,
    fetch_outcome_row,
    frontier_outcome_row,
    group_rows,
    jsonl_bytes,
    near_duplicate_export_row,
    page_export_row,
    parquet_bytes,
    partition_of,
    rows_from_cells,
    write_parquet,
)
from transforms.formats.rowkeys import row_key
from transforms.formats.rows import iso, outcome_row, stored_page_row, unstored_result_row

T0 = 1_700_000_000.25  # 2023-11-14T22:13:20.25Z
URL = "https://www.example.com/a?b=1"


def _fetch(url: str = URL, **kw) -> FetchResult:
    values: dict[str, Any] = dict(request=CrawlRequest(url, depth=2, discovered_from="https://www.example.com/"),
                  host="www.example.com", fetched_at=T0, final_url=url, status=200,
                  content_type="text/html", content_length=1234, outcome=OUTCOME_FETCHED)
    values.update(kw)
    return FetchResult(**values)


CONTENT = PageContent(
    description="A page", og_title="OG", og_description="OG d", og_image="https://i/x.png",
    og_type="article", og_site_name="Example", lang="en-GB", text="hello big world",
    text_truncated=True, word_count=3,
    outlinks=(OutLink("https://www.example.com/b", "B page", ""),
              OutLink("https://other.example/", "", "nofollow ugc")),
    text_digest="sha1:TEXT")


def _stored(content: PageContent | None = CONTENT, **page) -> StoredPage:
    values: dict[str, Any] = dict(fetch=_fetch(), title="Title", outlinks=("https://www.example.com/b",),
                  checksum="sha1:PAYLOAD", canonical="https://www.example.com/a",
                  content=content, noindex=True)
    values.update(page)
    return StoredPage(ParsedPage(**values), WarcLocation("gs://b/warc/x.warc.gz", 512, 900))


def test_schemas_have_the_documented_columns_and_types():
    pages = SCHEMAS[PAGES]
    assert pages.names[:4] == ["url", "host", "final_url", "fetched_at"]
    assert pages.field("fetched_at").type == pa.timestamp("us", tz="UTC")
    assert pages.field("status").type == pa.int32()
    assert pages.field("content_length").type == pa.int64()
    assert pages.field("outlinks").type == pa.list_(pa.struct(
        [("url", pa.string()), ("anchor", pa.string()), ("rel", pa.string())]))
    assert pages.field("near_similarity").type == pa.float64()
    assert pages.field("noindex").type == pa.bool_()
    assert pages.field("warc_offset").type == pa.int64()
    assert pages.names == [
        "url", "host", "final_url", "fetched_at", "status", "content_type", "content_length",
        "title", "description", "og_title", "og_description", "og_image", "og_type",
        "og_site_name", "canonical", "lang", "text", "text_truncated", "word_count",
        "outlinks", "outlink_count", "noindex", "nofollow", "payload_digest", "text_digest",
        "duplicate_of", "duplicate_kind", "near_duplicate_of", "near_similarity", "warc_file",
        "warc_offset", "warc_length", "warc_type", "depth", "discovered_from"]
    assert SCHEMAS[OUTCOMES].names == ["url", "host", "outcome", "at", "http_status", "detail",
                                       "depth"]
    assert SCHEMAS[NEAR_DUPLICATES].names == ["url", "host", "near_duplicate_of", "similarity",
                                              "at"]
    for schema in SCHEMAS.values():  # partitions live in the path only
        assert "dt" not in schema.names and "hour" not in schema.names


def test_page_row_from_a_stored_page_fills_every_column():
    row = page_export_row(_stored())
    assert row.dataset == PAGES and row.at == T0
    assert set(row.row) == set(SCHEMAS[PAGES].names)
    r = row.row
    assert r["fetched_at"] == datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=UTC)
    assert (r["url"], r["host"], r["status"], r["content_length"]) == (
        URL, "www.example.com", 200, 1234)
    assert (r["title"], r["description"], r["og_image"], r["lang"]) == (
        "Title", "A page", "https://i/x.png", "en-GB")
    assert r["outlinks"][1] == {"url": "https://other.example/", "anchor": "",
                                "rel": "nofollow ugc"}
    assert (r["outlink_count"], r["noindex"], r["nofollow"]) == (1, True, False)
    assert (r["payload_digest"], r["text_digest"], r["text_truncated"]) == (
        "sha1:PAYLOAD", "sha1:TEXT", True)
    assert (r["warc_file"], r["warc_offset"], r["warc_length"], r["warc_type"]) == (
        "gs://b/warc/x.warc.gz", 512, 900, "response")
    assert (r["depth"], r["discovered_from"]) == (2, "https://www.example.com/")
    assert r["duplicate_of"] is None and r["duplicate_kind"] is None


def test_page_row_of_a_revisit_and_of_a_page_without_content():
    revisit = _stored(duplicate_of="https://m.example/a", duplicate_kind="payload",
                      revisit=Revisit("https://m.example/a", "2023-11-14T22:00:00Z", "sha1:P"))
    r = page_export_row(revisit).row
    assert (r["warc_type"], r["duplicate_of"], r["duplicate_kind"]) == (
        "revisit", "https://m.example/a", "payload")
    bare = page_export_row(_stored(content=None)).row
    assert bare["title"] == "Title"  # from the page, not the content
    assert all(bare[c] is None for c in ("description", "og_title", "lang", "text",
                                         "word_count", "outlinks", "text_digest"))


def test_outcome_rows_of_fetches_and_frontier_decisions():
    failed = _fetch(status=None, outcome=OUTCOME_ERROR, error="timeout",
                    error_detail="timeout: read took 30 s", request=CrawlRequest(URL, attempt=2))
    row = fetch_outcome_row(failed)
    assert row.dataset == OUTCOMES and set(row.row) == set(SCHEMAS[OUTCOMES].names)
    assert (row.row["outcome"], row.row["http_status"], row.row["detail"]) == (
        "error", None, "after 3 attempts")
    assert fetch_outcome_row(dataclasses.replace(failed, request=CrawlRequest(URL))).row[
        "detail"] == "timeout: read took 30 s"
    blocked = frontier_outcome_row(UrlOutcome(CrawlRequest(URL, depth=4), "www.example.com",
                                              OUTCOME_ROBOTS_BLOCKED, T0 + 5, "Disallow: /a"))
    assert (blocked.at, blocked.row["outcome"], blocked.row["detail"], blocked.row["depth"]) == (
        T0 + 5, "robots_blocked", "Disallow: /a", 4)
    near = near_duplicate_export_row(NearDuplicate(URL, "www.example.com", "https://o/", 0.93,
                                                   T0))
    assert near.row == {"url": URL, "host": "www.example.com", "near_duplicate_of": "https://o/",
                        "similarity": 0.93, "at": datetime.fromtimestamp(T0, UTC)}


def test_export_rows_skip_the_outcomes_every_url_passes_through():
    assert [r.dataset for r in export_rows(_stored())] == [PAGES, OUTCOMES]
    assert export_rows(_stored())[1].row["outcome"] == OUTCOME_FETCHED
    queued = UrlOutcome(CrawlRequest(URL), "www.example.com", OUTCOME_QUEUED, T0)
    assert export_rows(queued) == []
    assert export_rows(_fetch(outcome=OUTCOME_RETRY)) == []
    assert len(export_rows(dataclasses.replace(queued, outcome=OUTCOME_ROBOTS_BLOCKED))) == 1
    assert len(export_rows(_fetch(outcome="not_stored", status=404))) == 1
    near = NearDuplicate(URL, "h", "https://o/", 0.9, T0)
    assert [r.dataset for r in export_rows(near)] == [NEAR_DUPLICATES]


@pytest.mark.parametrize(("at", "expected"), [
    (1_700_002_800.0 - 1e-6, ("2023-11-14", "22")),  # 22:59:59.999999
    (1_700_002_800.0, ("2023-11-14", "23")),  # 23:00:00
    (1_700_006_400.0 - 1e-6, ("2023-11-14", "23")),
    (1_700_006_400.0, ("2023-11-15", "00")),  # midnight UTC starts a new dt
    (0.0, ("1970-01-01", "00")),
])
def test_partition_is_the_utc_hour_of_the_event_time(at, expected):
    assert partition_of(at) == expected


def _page_cells(**parse: str) -> dict[str, dict[str, str]]:
    p = {"title": "T", "description": "D", "og_title": "OG", "lang": "de", "text": "Hallo Welt",
         "text_truncated": "0", "word_count": "2", "outlinks": "1",
         "links": json.dumps([["https://x.example/", "X", "nofollow"], ["https://y.example/"]]),
         "noindex": "0", "nofollow": "1", "text_digest": "sha1:T", "duplicate_of":
         "https://orig.example/", "duplicate_kind": "text"}
    p.update(parse)
    return {"f": {"outcome": "fetched", "outcome_at": iso(T0), "fetched_at": iso(T0),
                  "status": "200", "content_type": "text/html", "length": "77",
                  "final_url": URL, "checksum": "sha1:P", "detail": ""},
            "c": {"warc_file": "gs://b/w.warc.gz", "warc_offset": "10", "warc_length": "20",
                  "warc_type": "revisit"},
            "p": p,
            "s": {"depth": "3", "host": "www.example.com", "discovered_from": "https://s/"}}


def test_rows_from_cells_give_the_page_its_outcome_and_its_near_duplicate():
    rows = rows_from_cells(row_key(URL), _page_cells(near_duplicate_of="https://n.example/",
                                                     near_similarity="0.953"))
    assert [r.dataset for r in rows] == [OUTCOMES, PAGES, NEAR_DUPLICATES]
    outcome, page, near = (r.row for r in rows)
    assert set(page) == set(SCHEMAS[PAGES].names)
    assert (outcome["url"], outcome["outcome"], outcome["http_status"], outcome["depth"]) == (
        URL, "fetched", 200, 3)
    assert (page["content_length"], page["warc_type"], page["warc_offset"], page["lang"]) == (
        77, "revisit", 10, "de")
    assert page["outlinks"] == [{"url": "https://x.example/", "anchor": "X", "rel": "nofollow"},
                                {"url": "https://y.example/", "anchor": "", "rel": ""}]
    assert (page["noindex"], page["nofollow"], page["text_truncated"]) == (False, True, False)
    assert (page["near_similarity"], page["duplicate_kind"]) == (0.953, "text")
    assert near == {"url": URL, "host": "www.example.com", "near_duplicate_of":
                    "https://n.example/", "similarity": 0.953,
                    "at": datetime.fromtimestamp(round(T0, 3), UTC)}


def test_rows_from_cells_of_urls_without_a_stored_page():
    queued = outcome_row(UrlOutcome(CrawlRequest(URL), "www.example.com", OUTCOME_QUEUED, T0))
    assert [(r.dataset, r.row["outcome"]) for r in rows_from_cells(*queued[:2])] == [
        (OUTCOMES, "queued")]
    missing = unstored_result_row(_fetch(outcome="not_stored", status=404))
    rows = rows_from_cells(*missing[:2])
    assert [(r.dataset, r.row["http_status"]) for r in rows] == [(OUTCOMES, 404)]
    no_parse = _page_cells()
    del no_parse["p"]
    assert [r.dataset for r in rows_from_cells(row_key(URL), no_parse)] == [OUTCOMES]
    assert rows_from_cells("not a row key", _page_cells()) == []
    assert rows_from_cells(row_key(URL), {"s": {"host": "h"}}) == []


def test_damaged_cells_lose_a_value_not_the_row():
    rows = rows_from_cells(row_key(URL), _page_cells(word_count="many", links="[broken",
                                                     near_similarity="x"))
    page = rows[1].row
    assert (page["word_count"], page["outlinks"], page["near_similarity"]) == (None, None, None)
    assert page["title"] == "T"


def test_a_webtable_row_exports_as_its_record_does():
    """The batch export (from cells) and the streaming export (from records) agree."""
    stored = _stored(duplicate_of="https://orig.example/", duplicate_kind="text")
    row = stored_page_row(stored)
    if "text" not in row.cells.get("p", {}):
        pytest.skip("transforms.formats.rows does not write the content cells yet")
    from_cells = {r.dataset: r for r in rows_from_cells(row.key, row.cells)}
    from_record = {r.dataset: r for r in export_rows(stored)}
    millis = datetime.fromtimestamp(round(T0, 3), UTC)  # the webtable keeps milliseconds
    for dataset in (PAGES, OUTCOMES):
        expected = {k: (millis if isinstance(v, datetime) else v)
                    for k, v in from_record[dataset].row.items()}
        assert from_cells[dataset].row == expected, dataset


def _parquet_rows(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


def test_parquet_bytes_read_back_with_the_schema_and_values():
    rows = [page_export_row(_stored()), page_export_row(_stored(content=None))]
    table = _parquet_rows(parquet_bytes(PAGES, rows))
    assert table.schema.equals(SCHEMAS[PAGES])
    assert table.num_rows == 2
    got = table.to_pylist()
    assert got[0]["outlinks"] == rows[0].row["outlinks"]
    assert got[0]["fetched_at"] == rows[0].row["fetched_at"]
    assert got[1]["text"] is None
    assert pq.ParquetFile(io.BytesIO(parquet_bytes(PAGES, rows))).metadata.row_group(
        0).column(0).compression == "ZSTD"


def test_parquet_writer_bounds_row_groups_and_refuses_other_datasets():
    rows = [near_duplicate_export_row(NearDuplicate(f"{URL}{i}", "h", "o", 0.9, T0))
            for i in range(5)]
    buffer = io.BytesIO()
    assert write_parquet(buffer, NEAR_DUPLICATES, rows, row_group_rows=2) == 5
    assert pq.ParquetFile(io.BytesIO(buffer.getvalue())).metadata.num_row_groups == 3
    with pytest.raises(ValueError, match="pages row in a near_duplicates file"):
        parquet_bytes(NEAR_DUPLICATES, [*rows, page_export_row(_stored())])


def test_jsonl_has_the_schema_columns_in_order_and_iso_times():
    rows = export_rows(_stored())
    lines = jsonl_bytes(rows).decode().splitlines()
    docs = [json.loads(line) for line in lines]
    assert list(docs[0]) == SCHEMAS[PAGES].names
    assert list(docs[1]) == SCHEMAS[OUTCOMES].names
    assert docs[0]["fetched_at"] == "2023-11-14T22:13:20.250000Z"
    assert docs[0]["outlinks"][0] == {"url": "https://www.example.com/b", "anchor": "B page",
                                      "rel": ""}


def test_paths_are_hive_partitioned_and_groups_split_at_the_hour():
    path = export_path("gs://b/exports/", PAGES, ("2023-11-14", "22"), "parquet", T0, 1, 7,
                       "abc")
    assert path == ("gs://b/exports/pages/dt=2023-11-14/hour=22/"
                    "part-20231114221320-001-000007-abc.parquet")
    assert export_path("/x", OUTCOMES, ("2023-11-14", "22"), "jsonl", T0, 0, 1, "t").endswith(
        "/x/outcomes/dt=2023-11-14/hour=22/part-20231114221320-000-000001-t.jsonl")
    rows = [ExportRow(OUTCOMES, at, {}) for at in (1_700_002_799.0, 1_700_002_800.0,
                                                   1_700_002_801.0)]
    rows.append(ExportRow(PAGES, 1_700_002_801.0, {}))
    assert {k: len(v) for k, v in group_rows(rows).items()} == {
        (OUTCOMES, "2023-11-14", "22"): 1, (OUTCOMES, "2023-11-14", "23"): 2,
        (PAGES, "2023-11-14", "23"): 1}
