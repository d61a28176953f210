"""``crawler search``: a full-text index over the exported pages, kept up to date incrementally.

A downstream consumer of the analysts' exports (``transforms.formats.exports``): it reads only
the ``pages`` Parquet files under ``{exports}/pages/dt=YYYY-MM-DD/hour=HH/*.parquet``, a local
directory or ``gs://`` (through Beam's ``FileSystems``, which honours ``STORAGE_EMULATOR_HOST``),
and never the webtable. The index is SQLite FTS5 from Python's own ``sqlite3``: no dependency,
BM25 ranking, ``snippet()``, and incremental inserts and deletes (DuckDB's FTS extension is not
in the PyPI wheel and needs a download; see the research notes).

The index file remembers the files it has read (path and size), so a later call reads only new
(or rewritten) files; each file is indexed in one transaction with its record, so an interrupted
update resumes cleanly. Per URL it keeps the newest capture by ``fetched_at``: a newer row
replaces the indexed text, an older one (a file read late) is ignored, and a newer row that is
``noindex`` or an exact duplicate (``duplicate_of`` set: its text is indexed under the
original's URL) removes the URL from the results but stays as a tombstone so an older copy
cannot come back. If a file it indexed has gone (retention, a wiped emulator bucket), the index
is rebuilt from what is there. Columns read: url, title, description, text, lang, noindex,
fetched_at, duplicate_of.

Ranking is ``bm25`` with the title weighted 5x and the description 2x over the text.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

_LOG = logging.getLogger(__name__)

SCHEMA_VERSION = 1  # PRAGMA user_version of the index file; another version is rebuilt
TOKENIZER = "porter unicode61 remove_diacritics 2"
WEIGHTS = (5.0, 2.0, 1.0)  # bm25 weights of the title, description and text columns
SNIPPET_TOKENS = 16
MARK = ("[", "]")  # around matched terms in snippets
PAGE_FILES = "pages/dt=*/hour=*/*.parquet"
COLUMNS = ("url", "title", "description", "text", "lang", "noindex", "fetched_at",
           "duplicate_of")
REQUIRED = ("url", "fetched_at")
INDEXED, NOINDEX, DUPLICATE, EMPTY = "indexed", "noindex", "duplicate", "empty"
_BATCH_ROWS = 2_000
_SYNTAX_ERRORS = re.compile(r"fts5|syntax error|no such column|unterminated|unknown special")

_DDL = f"""
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER NOT NULL,
                                  rows INTEGER NOT NULL, indexed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS docs (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE,
                                 fetched_at INTEGER NOT NULL, state TEXT NOT NULL, lang TEXT);
CREATE VIRTUAL TABLE IF NOT EXISTS pages USING fts5(title, description, text,
                                                    tokenize='{TOKENIZER}');
"""


class QuerySyntaxError(ValueError):
    """The query is not valid FTS5 query syntax (or is empty)."""


@dataclass(frozen=True)
class ExportFile:
    """One Parquet file of the pages dataset: its path or URI and size in bytes."""

    path: str
    size: int


@dataclass(frozen=True)
class IndexUpdate:
    """What one update of the index did.

    Attributes:
        files_total: files of the pages dataset now indexed.
        files_new: files read by this update.
        files_failed: files that could not be read (left for the next update).
        rows_read: rows read from the new files.
        docs: URLs in the index (searchable) after the update.
        rebuilt: whether the index was started over.
        seconds: how long the update took.
    """

    files_total: int
    files_new: int
    files_failed: int
    rows_read: int
    docs: int
    rebuilt: bool
    seconds: float


@dataclass(frozen=True)
class SearchHit:
    """One ranked result: ``score`` is bm25's (lower is better)."""

    rank: int
    url: str
    title: str
    snippet: str
    score: float


@dataclass(frozen=True)
class SearchResult:
    """A query's hits, the index update that preceded it, and the query's own time."""

    query: str
    hits: list[SearchHit]
    update: IndexUpdate
    query_ms: float


Reader = Callable[[str], "bytes | str"]


def run_search(query: str, exports: str, index_path: Path, *, limit: int = 10,
               lang: str | None = None, rebuild: bool = False,
               read: Reader | None = None) -> SearchResult:
    """Brings the index at ``index_path`` up to date with ``exports``, then runs the query.

    Raises:
        QuerySyntaxError: if the query is not valid; checked before any file is read.
        OSError, apache_beam.io.filesystem.BeamIOError: if the exports cannot be listed.
    """
    conn, fresh = open_index(index_path, rebuild=rebuild)
    with closing(conn):
        search(conn, query, limit=1)  # a bad query fails fast, before a long update
        update = update_index(conn, list_page_files(exports), read)
        if fresh and not update.rebuilt:
            update = IndexUpdate(**{**update.__dict__, "rebuilt": True})
        start = time.perf_counter()
        hits = search(conn, query, limit=limit, lang=lang)
        return SearchResult(query, hits, update, (time.perf_counter() - start) * 1000)


def default_index_path(state_dir: Path, exports: str) -> Path:
    """``<state dir>/search/<sha1 of the exports location>.sqlite``: one index per location."""
    key = hashlib.sha1(normalize_location(exports).encode()).hexdigest()
    return state_dir / "search" / f"{key}.sqlite"


def normalize_location(exports: str) -> str:
    """A URI as given without its trailing slash; a local directory as an absolute path."""
    if "://" in exports:
        return exports.rstrip("/")
    return str(Path(exports).expanduser().resolve())


def default_exports(warc_prefix: str) -> str:
    """The exports folder next to the WARC folder: ``gs://b/warc`` -> ``gs://b/exports``."""
    parent = warc_prefix.rstrip("/").rsplit("/", 1)[0]
    return f"{parent}/exports"


def list_page_files(exports: str) -> list[ExportFile]:
    """The pages dataset's Parquet files under ``exports``, sorted by path (so by hour)."""
    location = normalize_location(exports)
    if "://" not in location:
        root = Path(location)
        return sorted((ExportFile(str(p), p.stat().st_size) for p in root.glob(PAGE_FILES)
                       if p.is_file()), key=_path)
    from apache_beam.io.filesystems import FileSystems

    matched = FileSystems.match([f"{location}/{PAGE_FILES}"])[0].metadata_list
    return sorted((ExportFile(m.path, m.size_in_bytes) for m in matched), key=_path)


def _path(export_file: ExportFile) -> str:
    return export_file.path


def open_index(path: Path, *, rebuild: bool = False) -> tuple[sqlite3.Connection, bool]:
    """Opens (creating it if needed) the index file; returns it and whether it was started over.

    A file of another ``SCHEMA_VERSION`` or ``rebuild=True`` starts from empty.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)  # explicit transactions only
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    fresh = rebuild or version not in (0, SCHEMA_VERSION)
    if fresh:
        _drop_all(conn)
    conn.executescript(_DDL)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return conn, fresh


def update_index(conn: sqlite3.Connection, files: list[ExportFile], read: Reader | None = None,
                 *, clock: Callable[[], float] = time.monotonic) -> IndexUpdate:
    """Indexes the files not indexed yet (or whose size changed); rebuilds if one has gone.

    Args:
        conn: an index opened by :func:`open_index`.
        files: the pages dataset as listed now (:func:`list_page_files`).
        read: ``path -> bytes or local path`` for pyarrow; local paths as they are and
            remote ones through ``FileSystems`` when None.
        clock: seconds, for the timing.

    Returns:
        What was done.
    """
    start = clock()
    known = dict(conn.execute("SELECT path, size FROM files").fetchall())
    listed = {f.path for f in files}
    rebuilt = bool(set(known) - listed)
    if rebuilt:
        _LOG.warning("indexed export files are gone; rebuilding the search index",
                     extra={"gone": len(set(known) - listed)})
        _drop_all(conn)
        conn.executescript(_DDL)
        known = {}
    new = [f for f in files if known.get(f.path) != f.size]
    rows = failed = 0
    for export_file in new:
        try:
            rows += _index_file(conn, export_file, read or _read)
        except (OSError, pa.ArrowException, ValueError) as exc:
            failed += 1
            _LOG.warning("export file not indexed", extra={"path": export_file.path,
                                                           "error": str(exc)})
    total = int(conn.execute("SELECT count(*) FROM files").fetchone()[0])
    update = IndexUpdate(files_total=total, files_new=len(new) - failed,
                         files_failed=failed, rows_read=rows, docs=count_docs(conn),
                         rebuilt=rebuilt, seconds=clock() - start)
    _LOG.info("search index updated", extra=update.__dict__)
    return update


def count_docs(conn: sqlite3.Connection) -> int:
    """URLs that searches can return."""
    return int(conn.execute("SELECT count(*) FROM docs WHERE state = ?", (INDEXED,))
               .fetchone()[0])


def search(conn: sqlite3.Connection, query: str, *, limit: int = 10,
           lang: str | None = None) -> list[SearchHit]:
    """Ranks the indexed pages for an FTS5 query (words, "phrases", prefix*, AND/OR/NOT,
    ``title:word``).

    Args:
        conn: the index.
        query: the query, in FTS5 syntax.
        limit: at most this many hits.
        lang: only pages whose language is this one or a variant of it (``en`` matches
            ``en-GB``); case-insensitive.

    Returns:
        The hits, best first.

    Raises:
        QuerySyntaxError: if the query is empty or not valid FTS5 syntax.
    """
    if not query.strip():
        raise QuerySyntaxError("empty query")
    sql = (
        "SELECT d.url, pages.title, CASE WHEN pages.text = '' "
        f"THEN snippet(pages, 1, ?, ?, '…', {SNIPPET_TOKENS}) "
        f"ELSE snippet(pages, 2, ?, ?, '…', {SNIPPET_TOKENS}) END, "
        f"bm25(pages, {', '.join(map(str, WEIGHTS))}) AS score "
        "FROM pages JOIN docs d ON d.id = pages.rowid WHERE pages MATCH ?")
    params: list[Any] = [*MARK, *MARK, query]
    if lang:
        sql += " AND (d.lang = ? OR d.lang LIKE ?)"
        params += [lang.lower(), f"{lang.lower()}-%"]
    sql += " ORDER BY score, d.url LIMIT ?"
    try:
        rows = conn.execute(sql, [*params, limit]).fetchall()
    except sqlite3.OperationalError as exc:
        if _SYNTAX_ERRORS.search(str(exc)):
            raise QuerySyntaxError(f"bad query {query!r}: {exc}") from exc
        raise
    return [SearchHit(rank, url, title or "", snippet or "", score)
            for rank, (url, title, snippet, score) in enumerate(rows, start=1)]


def _index_file(conn: sqlite3.Connection, export_file: ExportFile, read: Reader) -> int:
    """Applies one file's rows and records the file, in one transaction; returns its rows."""
    source = read(export_file.path)
    parquet = pq.ParquetFile(pa.BufferReader(source) if isinstance(source, bytes) else source)
    names = set(parquet.schema_arrow.names)
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise ValueError(f"not a pages file: no {', '.join(missing)} column")
    rows = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS,
                                          columns=[c for c in COLUMNS if c in names]):
            for row in _rows(batch):
                _apply(conn, row)
                rows += 1
        conn.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)",
                     (export_file.path, export_file.size, rows, time.time()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return rows


def _rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    """The batch's rows, with ``fetched_at`` as integer microseconds (0 when null)."""
    columns = {name: batch.column(name) for name in batch.schema.names}
    columns["fetched_at"] = (columns["fetched_at"].cast(pa.timestamp("us", tz="UTC"))
                             .cast(pa.int64()))
    values = {name: column.to_pylist() for name, column in columns.items()}
    for i in range(batch.num_rows):
        yield {name: values[name][i] if name in values else None for name in COLUMNS}


def row_state(row: dict[str, Any]) -> str:
    """What becomes of a page row: indexed, or kept out as noindex, duplicate or empty."""
    if row.get("noindex"):
        return NOINDEX
    if row.get("duplicate_of"):
        return DUPLICATE
    if not any(row.get(name) for name in ("title", "description", "text")):
        return EMPTY
    return INDEXED


def _apply(conn: sqlite3.Connection, row: dict[str, Any]) -> None:
    """Keeps the newest capture of the row's URL: replaces an older one, ignores an older row."""
    url, fetched_at = row["url"], row["fetched_at"] or 0
    if not url:
        return
    known = conn.execute("SELECT id, fetched_at, state FROM docs WHERE url = ?",
                         (url,)).fetchone()
    if known is not None and known[1] >= fetched_at:
        return
    state = row_state(row)
    lang = (row.get("lang") or "").strip().lower() or None
    if known is None:
        doc_id = conn.execute("INSERT INTO docs (url, fetched_at, state, lang) VALUES "
                              "(?, ?, ?, ?)", (url, fetched_at, state, lang)).lastrowid
    else:
        doc_id = known[0]
        conn.execute("UPDATE docs SET fetched_at = ?, state = ?, lang = ? WHERE id = ?",
                     (fetched_at, state, lang, doc_id))
        if known[2] == INDEXED:
            conn.execute("DELETE FROM pages WHERE rowid = ?", (doc_id,))
    if state == INDEXED:
        conn.execute("INSERT INTO pages (rowid, title, description, text) VALUES (?, ?, ?, ?)",
                     (doc_id, row.get("title") or "", row.get("description") or "",
                      row.get("text") or ""))


def _read(path: str) -> bytes | str:
    """A local path as it is; a remote file's bytes (pyarrow needs to seek; export files are
    bounded by the exporter's window)."""
    if "://" not in path:
        return path
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    with closing(FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)) as f:
        buffer = io.BytesIO()
        while chunk := f.read(1 << 20):
            buffer.write(chunk)
        return buffer.getvalue()


def _drop_all(conn: sqlite3.Connection) -> None:
    conn.executescript("DROP TABLE IF EXISTS pages; DROP TABLE IF EXISTS docs; "
                       "DROP TABLE IF EXISTS files;")
