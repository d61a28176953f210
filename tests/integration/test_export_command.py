"""``crawler export`` end to end on the emulators: webtable rows written as the pipeline writes
them, exported by the batch Beam job (DirectRunner) as Parquet and JSON Lines to a local
directory and to the GCS emulator, read back: counts, the time filter, the layout and schema.
Bad input exits 2 before anything runs."""

from __future__ import annotations

import io
import itertools
import json
import uuid
from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.cli.main import main
from pipeline.local.stack import LocalStack
from pipeline.ops import resources
from pipeline.ops.export import ExportSpec, key_ranges, parse_time, shard_of
from transforms.core.records import (
    OUTCOME_QUEUED,
    OUTCOME_ROBOTS_BLOCKED,
    CrawlRequest,
    FetchResult,
    OutLink,
    PageContent,
    ParsedPage,
    StoredPage,
    UrlOutcome,
    WarcLocation,
)
from transforms.formats.exports import NEAR_DUPLICATES, OUTCOMES, PAGES, SCHEMAS
from transforms.formats.rows import Row, outcome_row, stored_page_row, unstored_result_row
from transforms.formats.schema import TABLE_FAMILIES, WEBTABLE
from transforms.stores.bigtable import BigtableStoreSpec

pytestmark = pytest.mark.integration

DAY = parse_time("2021-03-01", "day")
HOST = "site.example"
# (path, minutes after DAY): four pages in three hour partitions of two days.
PAGE_TIMES = [("/a", 10 * 60 + 15), ("/b", 10 * 60 + 45), ("/c", 11 * 60 + 5),
              ("/d", 24 * 60 + 30)]


def _page_row(path: str, at: float, near: str | None = None) -> Row:
    """A stored page's webtable row as ``transforms.formats.rows`` writes it, with the parse
    cells documented for the content (added where that module does not write them)."""
    url = f"https://{HOST}{path}"
    fetch = FetchResult(CrawlRequest(url, depth=1, discovered_from=f"https://{HOST}/"), HOST,
                        at, url, status=200, content_type="text/html", content_length=321)
    content = PageContent(description=f"about {path}", lang="en", text=f"text of {path}",
                          word_count=3, outlinks=(OutLink(f"https://{HOST}/z", "Z", ""),),
                          text_digest=f"sha1:{path}")
    page = ParsedPage(fetch, f"Page {path}", (f"https://{HOST}/z",), f"sha1:P{path}",
                      content=content)
    row = stored_page_row(StoredPage(page, WarcLocation("gs://b/warc/1.warc.gz", 100, 50)))
    parse = row.cells["p"]
    for column, value in {"description": content.description, "lang": content.lang,
                          "text": content.text, "word_count": str(content.word_count),
                          "text_truncated": "0", "text_digest": content.text_digest,
                          "links": json.dumps([list(link) for link in content.outlinks])}.items():
        parse.setdefault(column, value or "")
    if near:
        parse.update(near_duplicate_of=near, near_similarity="0.953")
    return row


@pytest.fixture(scope="module")
def webtable(local_stack: LocalStack) -> str:
    """A fresh instance whose webtable holds 5 pages, 2 outcomes in the window, 1 after."""
    instance = f"export-{uuid.uuid4().hex[:8]}"
    resources.ensure_bigtable(local_stack.project, instance,
                              {WEBTABLE: TABLE_FAMILIES[WEBTABLE]})
    rows = [_page_row(path, DAY + minutes * 60) for path, minutes in PAGE_TIMES]
    rows.append(_page_row("/a-copy", DAY + 10 * 3600 + 50 * 60, near=f"https://{HOST}/a"))
    rows.append(outcome_row(UrlOutcome(CrawlRequest(f"https://{HOST}/private"), HOST,
                                       OUTCOME_ROBOTS_BLOCKED, DAY + 10 * 3600 + 20 * 60)))
    rows.append(unstored_result_row(FetchResult(
        CrawlRequest(f"https://{HOST}/gone"), HOST, DAY + 11 * 3600 + 30 * 60,
        f"https://{HOST}/gone", status=404, outcome="not_stored")))
    rows.append(outcome_row(UrlOutcome(CrawlRequest(f"https://{HOST}/later"), HOST,
                                       OUTCOME_QUEUED, DAY + 4 * 86400)))
    BigtableStoreSpec(local_stack.project, instance).open().write_rows(WEBTABLE, rows)
    return instance


def _export(stack: LocalStack, instance: str, *flags: str,
            capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--state-dir", str(stack.state_dir), "export", "--instance", instance,
                 *flags])
    return code, capsys.readouterr().out


def test_parquet_export_of_the_whole_table(local_stack, webtable, tmp_path: Path, capsys):
    code, out = _export(local_stack, webtable, "--out", str(tmp_path), capsys=capsys)
    assert code == 0, out
    assert "pages 5, outcomes 8, near_duplicates 1 rows" in out
    counts = {}
    for dataset in (PAGES, OUTCOMES, NEAR_DUPLICATES):
        data = ds.dataset(tmp_path / dataset, format="parquet", partitioning="hive")
        counts[dataset] = data.count_rows()
        for fragment in data.get_fragments():
            assert fragment.physical_schema.equals(SCHEMAS[dataset])
    assert counts == {PAGES: 5, OUTCOMES: 8, NEAR_DUPLICATES: 1}
    partitions = sorted(str(p.relative_to(tmp_path / PAGES).parent)
                        for p in (tmp_path / PAGES).rglob("*.parquet"))
    assert partitions == ["dt=2021-03-01/hour=10", "dt=2021-03-01/hour=11",
                          "dt=2021-03-02/hour=00"]
    con = duckdb.connect()
    source = f"read_parquet('{tmp_path}/{PAGES}/**/*.parquet', hive_partitioning=true)"
    assert con.execute(f"select hour, count(*) from {source} where dt = '2021-03-01' "
                       "group by hour order by hour").fetchall() == [("10", 3), ("11", 1)]
    assert con.execute(f"select url, near_duplicate_of, description, outlinks[1].url "
                       f"from {source} where near_duplicate_of is not null").fetchall() == [
        (f"https://{HOST}/a-copy", f"https://{HOST}/a", "about /a-copy", f"https://{HOST}/z")]
    outcomes = f"read_parquet('{tmp_path}/{OUTCOMES}/**/*.parquet', hive_partitioning=true)"
    assert dict(con.execute(f"select outcome, count(*) from {outcomes} group by outcome")
                .fetchall()) == {"fetched": 5, "robots_blocked": 1, "not_stored": 1,
                                 "queued": 1}


def test_jsonl_export_keeps_only_the_window(local_stack, webtable, tmp_path: Path, capsys):
    code, out = _export(local_stack, webtable, "--out", str(tmp_path), "--format", "jsonl",
                        "--since", "2021-03-01T10:30:00Z", "--until", "2021-03-01T11:30",
                        capsys=capsys)
    assert code == 0, out
    files = sorted(tmp_path.rglob("*.jsonl"))
    assert all(f.name.startswith("part-") for f in files)
    docs = {d: [json.loads(line) for f in files if f.parts[-4] == d
                for line in f.read_text().splitlines()] for d in (PAGES, OUTCOMES)}
    # 10:45 and 11:05 pages and the 10:50 copy; 11:30 is the end, excluded; 10:20 before.
    assert sorted(d["url"].rsplit("/", 1)[1] for d in docs[PAGES]) == ["a-copy", "b", "c"]
    assert sorted(d["outcome"] for d in docs[OUTCOMES]) == ["fetched"] * 3
    assert all(list(d) == SCHEMAS[PAGES].names for d in docs[PAGES])
    assert {f.parent.relative_to(tmp_path).as_posix() for f in files} == {
        f"{d}/dt=2021-03-01/hour={h}" for d in (PAGES, OUTCOMES) for h in ("10", "11")} | {
        f"{NEAR_DUPLICATES}/dt=2021-03-01/hour=10"}


def test_parquet_export_to_the_gcs_emulator(local_stack, webtable, capsys):
    prefix = f"gs://{local_stack.bucket}/exports-{uuid.uuid4().hex[:6]}"
    code, out = _export(local_stack, webtable, "--out", prefix, "--since", "2021-03-01",
                        "--until", "2021-03-02", capsys=capsys)
    assert code == 0, out
    with local_stack.activate():
        found = [m.path for m in FileSystems.match([f"{prefix}/*/*/*/*.parquet"])[0]
                 .metadata_list]
        counts: dict[str, int] = {}
        for path in found:
            assert path.startswith(prefix) and "/dt=2021-03-01/hour=" in path
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                table = pq.read_table(io.BytesIO(f.read()))
            dataset = path[len(prefix) + 1:].split("/")[0]
            assert table.schema.equals(SCHEMAS[dataset])
            counts[dataset] = counts.get(dataset, 0) + table.num_rows
    assert counts == {PAGES: 4, OUTCOMES: 6, NEAR_DUPLICATES: 1}


@pytest.mark.parametrize(("flags", "message"), [
    (["--since", "2021-03-02", "--until", "2021-03-01"], "--since must be before --until"),
    (["--since", "yesterday"], "--since 'yesterday' is not an ISO 8601"),
    (["--format", "csv"], "--format 'csv': use one of parquet, jsonl"),
    (["--shards", "0"], "--shards must be at least 1"),
])
def test_bad_input_exits_2_with_a_clear_message(flags, message, tmp_path, capsys):
    assert main(["export", "--out", str(tmp_path), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_time_parsing_ranges_and_shards():
    assert parse_time("2021-03-01", "x") == parse_time("2021-03-01T00:00:00Z", "x")
    assert parse_time("2021-03-01T01:00+01:00", "x") == DAY
    ranges = key_ranges([b"com.example:", b"", b"a"])
    assert ranges[0][0] == b"" and ranges[-1][1] == b""
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert (b"c", b"com.example:") in ranges and (b"com.example:", b"d") in ranges
    assert shard_of("https://x/", 4) == shard_of("https://x/", 4) < 4
    spec = ExportSpec("p", "i", "t", "/out", since=DAY, until=DAY + 60)
    assert spec.within(DAY) and not spec.within(DAY + 60)
