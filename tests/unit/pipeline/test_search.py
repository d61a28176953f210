"""``crawler search`` over pages Parquet files in the exports' Hive layout: ranking, snippets,
noindex and duplicates kept out, the newest capture of a URL winning, incremental updates, and
the command's output and exit statuses."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli.main import main
from pipeline.ops.search import (
    DUPLICATE,
    EMPTY,
    INDEXED,
    NOINDEX,
    QuerySyntaxError,
    default_exports,
    default_index_path,
    list_page_files,
    open_index,
    row_state,
    run_search,
    search,
    update_index,
)

T0 = datetime(2025, 3, 4, 10, 15, tzinfo=UTC)
# The columns search reads, typed as the pages dataset has them, plus some it does not read.
SCHEMA = pa.schema([
    ("url", pa.string()), ("host", pa.string()), ("fetched_at", pa.timestamp("us", tz="UTC")),
    ("status", pa.int32()), ("title", pa.string()), ("description", pa.string()),
    ("lang", pa.string()), ("text", pa.string()), ("word_count", pa.int32()),
    ("outlinks", pa.list_(pa.struct([("url", pa.string()), ("anchor", pa.string()),
                                     ("rel", pa.string())]))),
    ("noindex", pa.bool_()), ("duplicate_of", pa.string()),
])
FILLER = ("The committee met on Tuesday to review the annual budget, the roadmap and the hiring "
          "plan for the coming year. ")


def page(url: str, *, title: str = "", text: str = "", description: str | None = None,
         lang: str | None = "en", minutes: float = 0, noindex: bool = False,
         duplicate_of: str | None = None) -> dict[str, Any]:
    return {"url": url, "host": url.split("/")[2], "fetched_at": T0 + timedelta(minutes=minutes),
            "status": 200, "title": title or None, "description": description, "lang": lang,
            "text": text or None, "word_count": len(text.split()), "outlinks": [],
            "noindex": noindex, "duplicate_of": duplicate_of}


def write_pages(exports: Path, rows: list[dict[str, Any]], *, part: str = "part-0",
                schema: pa.Schema = SCHEMA) -> Path:
    """Writes rows where the exporter would: pages/dt=.../hour=.../{part}.parquet, partitioned
    by the first row's fetched_at."""
    at = rows[0].get("fetched_at", T0)
    folder = exports / "pages" / f"dt={at:%Y-%m-%d}" / f"hour={at:%H}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{part}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")
    return path


CORPUS = [
    page("https://a.example/quantum", title="Quantum computing explained",
         text=FILLER * 3 + "A short note on qubits."),
    page("https://b.example/physics", title="Physics notes",
         text=FILLER + "Quantum effects, quantum states and quantum tunnelling in detail. "
         + FILLER),
    page("https://c.example/cooking", title="Bread", text="Flour, water, salt and time."),
    page("https://d.example/secret", title="Quantum secret", text="quantum " * 20,
         noindex=True),
    page("https://e.example/mirror", title="Quantum computing explained",
         text=FILLER * 3 + "A short note on qubits.",
         duplicate_of="https://a.example/quantum"),
]


@pytest.fixture(name="exports")
def exports_fixture(tmp_path: Path) -> Path:
    exports = tmp_path / "exports"
    write_pages(exports, CORPUS)
    return exports


def run(exports: Path, query: str, index: Path, **kw: Any):
    return run_search(query, str(exports), index, **kw)


def urls(result) -> list[str]:
    return [hit.url for hit in result.hits]


def test_title_match_ranks_first_and_unrelated_pages_are_not_returned(exports, tmp_path):
    result = run(exports, "quantum", tmp_path / "i.sqlite")
    assert urls(result) == ["https://a.example/quantum", "https://b.example/physics"]
    assert [hit.rank for hit in result.hits] == [1, 2]
    assert result.hits[0].title == "Quantum computing explained"
    assert result.hits[0].score < result.hits[1].score  # bm25: lower is better


def test_snippets_show_the_matched_words_in_their_text(exports, tmp_path):
    result = run(exports, "tunnelling", tmp_path / "i.sqlite")
    assert urls(result) == ["https://b.example/physics"]
    snippet = result.hits[0].snippet
    assert "[tunnelling]" in snippet
    assert "quantum states" in snippet.lower()
    assert len(snippet.split()) <= 20  # a fragment, not the whole text


def test_stemming_and_diacritics_are_folded(tmp_path):
    exports = tmp_path / "exports"
    write_pages(exports, [page("https://f.example/", title="Café reviews",
                               text="We reviewed many cafés while running errands.")])
    index = tmp_path / "i.sqlite"
    assert urls(run(exports, "cafe", index)) == ["https://f.example/"]
    assert urls(run(exports, "runs", index)) == ["https://f.example/"]


def test_noindex_pages_and_exact_duplicates_are_never_in_the_index(exports, tmp_path):
    index = tmp_path / "i.sqlite"
    result = run(exports, "quantum OR qubits OR secret", index, limit=50)
    assert "https://d.example/secret" not in urls(result)
    assert "https://e.example/mirror" not in urls(result)
    assert result.update.docs == 3
    with sqlite3.connect(index) as conn:
        states = dict(conn.execute("SELECT url, state FROM docs"))
        texts = [row[0] for row in conn.execute("SELECT text FROM pages")]
    assert states["https://d.example/secret"] == NOINDEX
    assert states["https://e.example/mirror"] == DUPLICATE
    assert not any("quantum quantum" in text for text in texts)


def test_a_newer_capture_replaces_the_older_and_an_older_one_read_late_is_ignored(tmp_path):
    exports, index = tmp_path / "exports", tmp_path / "i.sqlite"
    url = "https://g.example/news"
    write_pages(exports, [page(url, title="News", text="The harvest was early.", minutes=0)],
                part="part-0")
    assert urls(run(exports, "harvest", index)) == [url]
    write_pages(exports, [page(url, title="News", text="The election was close.", minutes=90)],
                part="part-1")
    assert urls(run(exports, "harvest", index)) == []
    assert urls(run(exports, "election", index)) == [url]
    # A file of an older capture, listed after the newer one: the newer text stays.
    write_pages(exports, [page(url, title="News", text="The flood was early.", minutes=30)],
                part="part-9")
    result = run(exports, "flood OR election", index)
    assert urls(result) == [url]
    assert "[election]" in result.hits[0].snippet
    assert result.update.docs == 1


def test_a_page_that_became_noindex_is_removed(tmp_path):
    exports, index = tmp_path / "exports", tmp_path / "i.sqlite"
    url = "https://h.example/private"
    write_pages(exports, [page(url, title="Roster", text="names of the team")], part="part-0")
    assert urls(run(exports, "roster", index)) == [url]
    write_pages(exports, [page(url, title="Roster", text="names of the team", minutes=5,
                               noindex=True)], part="part-1")
    result = run(exports, "roster", index)
    assert urls(result) == []
    assert result.update.docs == 0


def test_updates_are_incremental_a_second_call_reads_only_the_new_file(exports, tmp_path):
    index = tmp_path / "i.sqlite"
    first = run(exports, "quantum", index)
    assert (first.update.files_new, first.update.files_total) == (1, 1)
    assert first.update.rows_read == len(CORPUS)
    again = run(exports, "quantum", index)
    assert (again.update.files_new, again.update.rows_read, again.update.rebuilt) == (0, 0, False)
    write_pages(exports, [page("https://i.example/q", title="More quantum", minutes=65),
                          page("https://j.example/r", title="Rye", minutes=66)], part="part-1")
    third = run(exports, "quantum", index)
    assert (third.update.files_new, third.update.files_total, third.update.rows_read) == (1, 2, 2)
    assert "https://i.example/q" in urls(third)
    assert third.update.docs == 5
    rebuilt = run(exports, "quantum", index, rebuild=True)
    assert (rebuilt.update.files_new, rebuilt.update.rebuilt, rebuilt.update.docs) == (2, True, 5)


def test_a_file_that_is_gone_makes_the_index_start_over(exports, tmp_path):
    index = tmp_path / "i.sqlite"
    extra = write_pages(exports, [page("https://k.example/", title="Quantum extra",
                                       minutes=120)], part="part-1")
    assert "https://k.example/" in urls(run(exports, "quantum", index))
    extra.unlink()
    result = run(exports, "quantum", index)
    assert result.update.rebuilt
    assert "https://k.example/" not in urls(result)
    assert (result.update.files_total, result.update.docs) == (1, 3)


def test_an_unreadable_file_is_counted_and_retried_next_time(exports, tmp_path):
    index = tmp_path / "i.sqlite"
    broken = exports / "pages" / "dt=2025-03-04" / "hour=11" / "part-0.parquet"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"PAR1 not really")
    result = run(exports, "quantum", index)
    assert (result.update.files_failed, result.update.files_total) == (1, 1)
    write_pages(exports, [page("https://l.example/", title="Quantum late", minutes=60)])
    later = run(exports, "quantum", index)
    assert (later.update.files_new, later.update.files_failed) == (1, 0)
    assert "https://l.example/" in urls(later)


def test_lang_filter_matches_the_language_and_its_variants(tmp_path):
    exports = tmp_path / "exports"
    write_pages(exports, [page("https://m.example/en", title="Jazz", lang="en-GB"),
                          page("https://m.example/fr", title="Jazz", lang="fr"),
                          page("https://m.example/none", title="Jazz", lang=None)])
    index = tmp_path / "i.sqlite"
    assert urls(run(exports, "jazz", index, lang="EN")) == ["https://m.example/en"]
    assert urls(run(exports, "jazz", index, lang="fr")) == ["https://m.example/fr"]
    assert len(run(exports, "jazz", index).hits) == 3


def test_limit_caps_the_hits(exports, tmp_path):
    assert urls(run(exports, "quantum", tmp_path / "i.sqlite", limit=1)) == [
        "https://a.example/quantum"]


@pytest.mark.parametrize("query", ['"unclosed', "AND", "nosuchcolumn:word", "   ", "a ("])
def test_bad_query_syntax_is_a_query_syntax_error(exports, tmp_path, query):
    conn, _ = open_index(tmp_path / "i.sqlite")
    update_index(conn, list_page_files(str(exports)))
    with pytest.raises(QuerySyntaxError):
        search(conn, query)


def test_query_syntax_is_checked_before_any_file_is_read(exports, tmp_path):
    with pytest.raises(QuerySyntaxError):
        run(exports, '"unclosed', tmp_path / "i.sqlite")
    conn, _ = open_index(tmp_path / "i.sqlite")
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 0


def test_the_real_pages_schema_is_readable(tmp_path):
    exports_module = pytest.importorskip("transforms.formats.exports")
    schema = exports_module.PAGES_SCHEMA
    row = {name: None for name in schema.names}
    row.update(page("https://n.example/", title="Parquet columns", text="zstd row groups"))
    row["outlinks"] = [{"url": "https://n.example/x", "anchor": "x", "rel": ""}]
    exports = tmp_path / "exports"
    write_pages(exports, [{name: row[name] for name in schema.names}], schema=schema)
    assert urls(run(exports, "zstd", tmp_path / "i.sqlite")) == ["https://n.example/"]


def test_files_without_the_required_columns_are_not_indexed(tmp_path):
    exports = tmp_path / "exports"
    write_pages(exports, [{"title": "x"}], schema=pa.schema([("title", pa.string())]))
    result = run(exports, "x", tmp_path / "i.sqlite")
    assert (result.update.files_failed, result.update.docs) == (1, 0)


def test_row_state():
    assert row_state(page("https://x/", title="t")) == INDEXED
    assert row_state(page("https://x/", title="t", noindex=True)) == NOINDEX
    assert row_state(page("https://x/", title="t", duplicate_of="https://y/")) == DUPLICATE
    assert row_state(page("https://x/")) == EMPTY


def test_default_locations():
    assert default_exports("gs://bucket/warc") == "gs://bucket/exports"
    assert default_exports("gs://bucket/crawl/warc/") == "gs://bucket/crawl/exports"
    key = hashlib.sha1(b"gs://bucket/exports").hexdigest()
    assert default_index_path(Path("/s"), "gs://bucket/exports/") == Path(
        f"/s/search/{key}.sqlite")


# --- the command ------------------------------------------------------------------------------

def test_cli_prints_ranked_results_and_a_summary(exports, tmp_path, capsys):
    state = tmp_path / "state"
    code = main(["--state-dir", str(state), "search", "quantum", "--exports", str(exports)])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "  1. https://a.example/quantum"
    assert lines[1] == "     Quantum computing explained"
    assert lines[2].startswith("     ")
    assert "  2. https://b.example/physics" in lines
    assert re.search(r"\[quantum\]", out, re.IGNORECASE)
    assert re.fullmatch(
        r"2 result\(s\) for 'quantum'; 3 docs from 1 file\(s\) in \S+ \(1 new, "
        r"[\d.]+ s\); query [\d.]+ ms", lines[-1])
    # The default index is per exports location under the state directory.
    assert default_index_path(state, str(exports)).is_file()
    assert main(["--state-dir", str(state), "search", "quantum", "--exports",
                 str(exports)]) == 0
    assert "(0 new, " in capsys.readouterr().out.splitlines()[-1]


def test_cli_bad_query_exits_2_with_a_message_and_no_traceback(exports, tmp_path, capsys):
    code = main(["--state-dir", str(tmp_path), "search", '"unclosed', "--exports",
                 str(exports)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith("error: bad query")
    assert "Traceback" not in captured.err + captured.out


def test_cli_without_exports_or_local_stack_exits_2(tmp_path, capsys):
    assert main(["--state-dir", str(tmp_path), "search", "quantum"]) == 2
    assert "no --exports" in capsys.readouterr().err


def test_cli_reports_no_results_and_an_explicit_index_file(exports, tmp_path, capsys):
    index = tmp_path / "custom.sqlite"
    assert main(["--state-dir", str(tmp_path), "search", "zeppelin", "--exports", str(exports),
                 "--index", str(index)]) == 0
    assert capsys.readouterr().out.startswith("0 result(s) for 'zeppelin'")
    assert index.is_file()


def test_an_index_of_another_schema_version_is_started_over(exports, tmp_path):
    index = tmp_path / "i.sqlite"
    run(exports, "quantum", index)
    with sqlite3.connect(index) as conn:
        conn.execute("PRAGMA user_version = 999")
    conn, fresh = open_index(index)
    assert fresh
    assert conn.execute("SELECT count(*) FROM docs").fetchone()[0] == 0
