"""End to end, what analysts get from one crawl of the planted duplicate corpus
(``pipeline.demo.planted``: originals, byte-identical mirrors, same-text print versions, near
copies, and distinct pages on the same template) on the emulators:

* exact copies found with precision and recall 1.0; near copies with precision >= 0.95 and
  recall >= 0.9; distinct pages on the same template never flagged;
* a mirror's WARC record is a ``revisit`` of the original's capture, and ``warcio check``
  accepts the files;
* the streaming Parquet export read back with pyarrow and DuckDB: one pages row per page
  fetched, the documented schema;
* ``crawler export`` (Parquet and JSON Lines) from the webtable and ``crawler search`` over the
  export, end to end.

One crawl runs per module.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow.dataset as ds
import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from warcio.archiveiterator import ArchiveIterator

from pipeline.cli.main import main
from pipeline.demo.planted import DISTINCT, EXACT, NEAR, NEAR_NAV, ORIGINAL, SAME_TEXT, PlantedSite
from tests.integration.sites import Crawl, crawl
from transforms.formats.exports import PAGES, SCHEMAS
from transforms.formats.schema import FETCH_FAMILY, PARSE_FAMILY

pytestmark = pytest.mark.integration


class Analysts(NamedTuple):
    site: PlantedSite
    crawl: Crawl
    exports: Path  # a local copy of the streaming export
    instance: str


def _download(prefix: str, into: Path) -> list[str]:
    """Copies every file under ``prefix`` (gs://, the emulator) below ``into``."""
    paths = [m.path for m in FileSystems.match([prefix + "/**"])[0].metadata_list]
    for path in paths:
        target = into / path[len(prefix):].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            target.write_bytes(f.read())
    return paths


@pytest.fixture(scope="module")
def analysts(local_stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Analysts]:
    prefix = f"gs://{local_stack.bucket}/exports-{uuid.uuid4().hex[:8]}"
    with PlantedSite().start("127.0.0.32") as site:
        with local_stack.activate():
            result = crawl(local_stack, [site.seed_url], [
                "--min_delay=0", "--idle_timeout=8", "--warc_roll_seconds=2",
                "--export_roll_seconds=2", f"--export_prefix={prefix}",
                "--allow_private_networks", "--max_pages=400"])
            local = tmp_path_factory.mktemp("exports")
            _download(prefix, local)
        instance = "pol-" + result.warc_prefix.rsplit("/", 1)[1]
        yield Analysts(site, result, local, instance)


def _group(site: PlantedSite) -> dict[str, str]:
    """Each planted URL -> its original's URL (itself for originals and distinct pages)."""
    return {url: truth.original or url for url, truth in site.truth.items()}


def _pairs(rows: dict, column: str) -> set[frozenset[str]]:
    return {frozenset((url, cells[PARSE_FAMILY][column])) for url, cells in rows.items()
            if cells.get(PARSE_FAMILY, {}).get(column)}


def test_exact_copies_are_found_with_precision_and_recall_one(analysts):
    group, rows = _group(analysts.site), analysts.crawl.rows
    found = _pairs(rows, "duplicate_of")
    planted = {frozenset((u, t.original)) for u, t in analysts.site.truth.items()
               if t.kind in (EXACT, SAME_TEXT) and t.original}
    # The copies of one original are one cluster: a print version may name the mirror if
    # the mirror came first, so pairs are judged by cluster.
    assert all(len({group[u] for u in pair}) == 1 for pair in found)  # precision 1
    clustered = {group[u] for pair in found for u in pair}
    assert clustered == {group[next(iter(p))] for p in planted}  # recall 1
    assert len(found) == len(planted)
    kinds = {rows[u][PARSE_FAMILY]["duplicate_kind"] for p in found for u in p
             if rows[u][PARSE_FAMILY].get("duplicate_of")}
    assert kinds == {"payload", "text"}


def test_near_copies_are_found_and_same_template_pages_are_not(analysts):
    group, truth, rows = _group(analysts.site), analysts.site.truth, analysts.crawl.rows
    found = _pairs(rows, "near_duplicate_of")
    correct = [pair for pair in found if len({group[u] for u in pair}) == 1]
    precision = len(correct) / max(1, len(found))
    near = [u for u, t in truth.items() if t.kind in (NEAR, NEAR_NAV)]
    recalled = [u for u in near if any(u in pair for pair in correct)]
    recall = len(recalled) / len(near)
    print(f"near duplicates: precision {precision:.3f}, recall {recall:.3f} "
          f"({len(found)} pairs, {len(near)} planted)")
    assert precision >= 0.95 and recall >= 0.9
    flagged = {u for pair in found | _pairs(rows, "duplicate_of") for u in pair}
    assert not {u for u, t in truth.items() if t.kind == DISTINCT} & flagged
    assert all(0.9 <= float(rows[u][PARSE_FAMILY]["near_similarity"]) <= 1.0
               for pair in found for u in pair if rows[u][PARSE_FAMILY].get("near_similarity"))


def test_a_mirror_is_a_revisit_record_and_the_warc_files_check(analysts, tmp_path):
    with_revisit = [u for u, cells in analysts.crawl.rows.items()
                    if cells.get(PARSE_FAMILY, {}).get("duplicate_kind") == "payload"]
    assert with_revisit
    files = _download(analysts.crawl.warc_prefix, tmp_path)
    revisits = {}
    for path in tmp_path.rglob("*.warc.gz"):
        for record in ArchiveIterator(io.BytesIO(path.read_bytes())):
            if record.rec_type == "revisit":
                revisits[record.rec_headers.get_header("WARC-Target-URI")] = record.rec_headers
    assert set(with_revisit) <= set(revisits)
    for url in with_revisit:
        headers = revisits[url]
        assert headers.get_header("WARC-Profile").endswith("revisit/identical-payload-digest")
        assert headers.get_header("WARC-Refers-To-Target-URI") in analysts.site.truth
    check = subprocess.run([str(Path(sys.executable).parent / "warcio"), "check", "-v",
                            *map(str, tmp_path.rglob("*.warc.gz"))], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert files


def test_the_streaming_export_has_a_row_per_page_fetched_and_the_documented_schema(analysts):
    fetched = [u for u, cells in analysts.crawl.rows.items()
               if cells[FETCH_FAMILY].get("outcome") == "fetched"]
    pages = ds.dataset(analysts.exports / "pages", format="parquet", partitioning="hive")
    table = pages.to_table()
    assert table.num_rows == len(fetched)
    assert [f.name for f in SCHEMAS[PAGES]] == [n for n in table.column_names
                                                 if n not in ("dt", "hour")]
    glob = str(analysts.exports / "pages" / "**" / "*.parquet")
    db = duckdb.connect()
    count, = db.execute(f"select count(*) from read_parquet('{glob}', hive_partitioning=true)"
                        ).fetchone()
    assert count == len(fetched)
    clusters = db.execute(
        "select duplicate_of, count(*) from read_parquet(?, hive_partitioning=true) "
        "where duplicate_of is not null group by 1 order by 2 desc", [glob]).fetchall()
    assert clusters and sum(n for _, n in clusters) == sum(
        1 for u in fetched if analysts.crawl.rows[u][PARSE_FAMILY].get("duplicate_of"))
    langs = dict(db.execute("select lang, count(*) from read_parquet(?, hive_partitioning="
                            "true) group by 1", [glob]).fetchall())
    assert langs.get("en", 0) >= len(analysts.site.truth)
    outcomes = str(analysts.exports / "outcomes" / "**" / "*.parquet")
    statuses = dict(db.execute("select outcome, count(*) from read_parquet(?, "
                               "hive_partitioning=true) group by 1", [outcomes]).fetchall())
    assert statuses.get("fetched") == len(fetched)


def test_crawler_export_and_crawler_search_end_to_end(analysts, local_stack, tmp_path,
                                                      capsys):
    state = ["--state-dir", str(local_stack.state_dir)]
    for fmt in ("parquet", "jsonl"):
        code = main([*state, "export", "--instance", analysts.instance, "--format", fmt,
                     "--out", str(tmp_path / fmt)])
        assert code == 0, capsys.readouterr()
    out = capsys.readouterr().out
    fetched = [u for u, cells in analysts.crawl.rows.items()
               if cells[FETCH_FAMILY].get("outcome") == "fetched"]
    table = ds.dataset(tmp_path / "parquet" / "pages", format="parquet",
                       partitioning="hive").to_table()
    assert table.num_rows == len(fetched), out
    near_in_table = sum(1 for v in table.column("near_duplicate_of").to_pylist() if v)
    assert near_in_table >= 1
    lines = [json.loads(line) for path in (tmp_path / "jsonl" / "pages").rglob("*.jsonl")
             for line in path.read_text().splitlines()]
    assert len(lines) == len(fetched)
    # Search the streaming export: an original's title finds the original first.
    original = next(u for u, t in analysts.site.truth.items() if t.kind == ORIGINAL)
    title = analysts.crawl.rows[original][PARSE_FAMILY]["title"]
    code = main(["search", title, "--exports", str(analysts.exports),
                 "--index", str(tmp_path / "index.sqlite")])
    printed = capsys.readouterr().out
    assert code == 0 and original in printed.splitlines()[0] + printed
    first = next(line for line in printed.splitlines() if "http" in line)
    assert original in first or title in first, printed
