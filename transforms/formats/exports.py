"""The analysts' export files: three datasets, their Parquet schemas, and their rows (pyarrow).

Files live under ``{prefix}/{dataset}/dt=YYYY-MM-DD/hour=HH/part-*.parquet`` (or ``.jsonl``):
Hive-style partitions by the row's event time in UTC (``fetched_at`` for pages, ``at``
otherwise). ``dt`` and ``hour`` are in the path only, not in the files; BigQuery external
tables (``hive_partition_uri_prefix``) and DuckDB (``hive_partitioning=true``) add them as
columns. Parquet files are zstd-compressed. Timestamps are UTC, microseconds.

``pages``: one row per fetched (stored) HTML page::

    url string                 the canonical URL (the webtable row)
    host string                its politeness key: host, plus :port when explicit
    final_url string           after same-host redirects
    fetched_at timestamp[us, tz=UTC]
    status int32               HTTP status
    content_type string
    content_length int64       body bytes as received
    title, description, og_title, og_description, og_image, og_type, og_site_name,
    canonical, lang, text string   previews and the main text (capped at extraction)
    text_truncated bool        the text was cut at the cap
    word_count int32           words of the whole main text
    outlinks list<struct<url string, anchor string, rel string>>   every link (capped)
    outlink_count int32        links that entered the frontier
    noindex, nofollow bool     meta robots / X-Robots-Tag
    payload_digest, text_digest string   sha1: + base32
    duplicate_of string        the first URL seen with the same content
    duplicate_kind string      payload | text
    near_duplicate_of string   a near copy's original (MinHash LSH; batch export only: the
                               streaming export writes these to ``near_duplicates``)
    near_similarity float64    its estimated Jaccard similarity
    warc_file string, warc_offset int64, warc_length int64   the gzip member of the record
    warc_type string           response | revisit
    depth int32, discovered_from string

``outcomes``: one row per URL outcome (streaming: every terminal outcome as it happens;
``crawler export``: each URL's latest outcome, ``queued`` included)::

    url, host, outcome string; at timestamp[us, tz=UTC]; http_status int32; detail string;
    depth int32

``near_duplicates``: one row per page found to be a near copy of an earlier one::

    url, host, near_duplicate_of string; similarity float64; at timestamp[us, tz=UTC]

An empty text field is exported as null.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from transforms.core import status
from transforms.core.records import (
    OUTCOME_FETCHED,
    FetchResult,
    NearDuplicate,
    StoredPage,
    UrlOutcome,
)
from transforms.core.url_keys import politeness_key
from transforms.core.urls import InvalidUrl
from transforms.formats.rowkeys import url_from_row_key
from transforms.formats.rows import Cells, fetch_cells, from_iso
from transforms.formats.schema import (
    CONTENT_FAMILY,
    FETCH_FAMILY,
    PARSE_FAMILY,
    SCHEDULE_FAMILY,
)

PAGES = "pages"
OUTCOMES = "outcomes"
NEAR_DUPLICATES = "near_duplicates"
DATASETS = (PAGES, OUTCOMES, NEAR_DUPLICATES)
FORMATS = {"parquet": "parquet", "jsonl": "jsonl"}  # format name -> file extension
COMPRESSION = "zstd"
ROW_GROUP_ROWS = 10_000  # rows per Parquet row group: bounds a writer's memory

_TIME = pa.timestamp("us", tz="UTC")
_LINK = pa.struct([("url", pa.string()), ("anchor", pa.string()), ("rel", pa.string())])
_STRINGS = ("title", "description", "og_title", "og_description", "og_image", "og_type",
            "og_site_name", "canonical", "lang", "text")

PAGES_SCHEMA = pa.schema(
    [("url", pa.string()), ("host", pa.string()), ("final_url", pa.string()),
     ("fetched_at", _TIME), ("status", pa.int32()), ("content_type", pa.string()),
     ("content_length", pa.int64())]
    + [(name, pa.string()) for name in _STRINGS]
    + [("text_truncated", pa.bool_()), ("word_count", pa.int32()),
       ("outlinks", pa.list_(_LINK)), ("outlink_count", pa.int32()),
       ("noindex", pa.bool_()), ("nofollow", pa.bool_()), ("payload_digest", pa.string()),
       ("text_digest", pa.string()), ("duplicate_of", pa.string()),
       ("duplicate_kind", pa.string()), ("near_duplicate_of", pa.string()),
       ("near_similarity", pa.float64()), ("warc_file", pa.string()),
       ("warc_offset", pa.int64()), ("warc_length", pa.int64()), ("warc_type", pa.string()),
       ("depth", pa.int32()), ("discovered_from", pa.string())])
OUTCOMES_SCHEMA = pa.schema(
    [("url", pa.string()), ("host", pa.string()), ("outcome", pa.string()), ("at", _TIME),
     ("http_status", pa.int32()), ("detail", pa.string()), ("depth", pa.int32())])
NEAR_DUPLICATES_SCHEMA = pa.schema(
    [("url", pa.string()), ("host", pa.string()), ("near_duplicate_of", pa.string()),
     ("similarity", pa.float64()), ("at", _TIME)])
SCHEMAS: dict[str, pa.Schema] = {PAGES: PAGES_SCHEMA, OUTCOMES: OUTCOMES_SCHEMA,
                                 NEAR_DUPLICATES: NEAR_DUPLICATES_SCHEMA}


class ExportRow(NamedTuple):
    """One row of one dataset: ``at`` (seconds since the epoch) is its event time, which
    picks its partition; ``row`` maps the dataset's columns to Python values (timestamps as
    aware UTC datetimes), ready for ``pyarrow.Table.from_pylist``."""

    dataset: str
    at: float
    row: dict[str, Any]


def utc(ts: float) -> datetime:
    """Seconds since the epoch -> an aware UTC datetime (a timestamp column's value)."""
    return datetime.fromtimestamp(ts, UTC)


def partition_of(at: float) -> tuple[str, str]:
    """The Hive partition (``dt``, ``hour``) of an event time, in UTC: e.g.
    ``("2026-11-25", "07")``."""
    moment = utc(at)
    return moment.strftime("%Y-%m-%d"), moment.strftime("%H")


def _text(value: str | None) -> str | None:
    return value or None


def _flag(text: str | None) -> bool | None:
    return None if not text else text == "1"


def _number(text: str | None, kind: type[int] | type[float] = int) -> Any:
    """A numeric cell's value, None when absent or damaged (the row is kept)."""
    try:
        return kind(text) if text else None
    except ValueError:
        return None


def outcome_detail(detail: str | None, error: str | None, error_detail: str | None) -> str:
    """What an outcome row says about why: the outcome's detail, else its error's."""
    return detail or error_detail or error or ""


# -- rows from the pipeline's records (the streaming export) -----------------------------------


def page_export_row(stored: StoredPage) -> ExportRow:
    """The ``pages`` row of a stored page; a page without extracted content has null content
    columns, and a payload duplicate stored as a revisit record has ``warc_type`` revisit."""
    page, fetch = stored.page, stored.page.fetch
    content = page.content
    row: dict[str, Any] = {
        "url": fetch.request.url, "host": fetch.host, "final_url": fetch.final_url,
        "fetched_at": utc(fetch.fetched_at), "status": fetch.status,
        "content_type": fetch.content_type, "content_length": fetch.content_length,
        "title": page.title, "canonical": page.canonical,
        "outlink_count": len(page.outlinks), "noindex": page.noindex,
        "nofollow": page.nofollow, "payload_digest": _text(page.checksum),
        "duplicate_of": page.duplicate_of, "duplicate_kind": _text(page.duplicate_kind),
        "near_duplicate_of": None, "near_similarity": None,
        "warc_file": stored.location.file, "warc_offset": stored.location.offset,
        "warc_length": stored.location.length,
        "warc_type": "revisit" if page.revisit is not None else "response",
        "depth": fetch.request.depth, "discovered_from": fetch.request.discovered_from}
    if content is None:
        row.update({name: None for name in _STRINGS if name not in ("title", "canonical")})
        row.update(text_truncated=None, word_count=None, outlinks=None, text_digest=None)
    else:
        row.update(
            description=content.description, og_title=content.og_title,
            og_description=content.og_description, og_image=content.og_image,
            og_type=content.og_type, og_site_name=content.og_site_name, lang=content.lang,
            text=_text(content.text), text_truncated=content.text_truncated,
            word_count=content.word_count, text_digest=_text(content.text_digest),
            outlinks=[{"url": link.url, "anchor": link.anchor, "rel": link.rel}
                      for link in content.outlinks])
    return ExportRow(PAGES, fetch.fetched_at, row)


def fetch_outcome_row(result: FetchResult) -> ExportRow:
    """The ``outcomes`` row of a fetch (stored or not), with the detail the webtable shows."""
    detail = fetch_cells(result)["detail"]
    return ExportRow(OUTCOMES, result.fetched_at, {
        "url": result.request.url, "host": result.host, "outcome": result.outcome,
        "at": utc(result.fetched_at), "http_status": result.status,
        "detail": outcome_detail(detail, result.error, result.error_detail),
        "depth": result.request.depth})


def frontier_outcome_row(outcome: UrlOutcome) -> ExportRow:
    """The ``outcomes`` row of a frontier decision (robots-blocked, filtered, budget, ...)."""
    return ExportRow(OUTCOMES, outcome.at, {
        "url": outcome.request.url, "host": outcome.host, "outcome": outcome.outcome,
        "at": utc(outcome.at), "http_status": None, "detail": outcome.detail,
        "depth": outcome.request.depth})


def near_duplicate_export_row(nd: NearDuplicate) -> ExportRow:
    """The ``near_duplicates`` row of a near copy."""
    return ExportRow(NEAR_DUPLICATES, nd.at, {
        "url": nd.url, "host": nd.host, "near_duplicate_of": nd.original,
        "similarity": nd.similarity, "at": utc(nd.at)})


def export_rows(item: StoredPage | FetchResult | UrlOutcome | NearDuplicate
                ) -> list[ExportRow]:
    """What the streaming export writes for one element the crawl records: a stored page's
    ``pages`` row and its ``fetched`` outcome; a terminal outcome's row; a near copy's row.

    ``queued`` and ``retry_scheduled`` are skipped: every URL passes through them and a
    terminal outcome follows, so the outcomes dataset stays one row per URL visit.
    """
    if isinstance(item, StoredPage):
        fetch = item.page.fetch
        if fetch.outcome != OUTCOME_FETCHED:
            fetch = dataclasses.replace(fetch, outcome=OUTCOME_FETCHED)
        return [page_export_row(item), fetch_outcome_row(fetch)]
    if isinstance(item, NearDuplicate):
        return [near_duplicate_export_row(item)]
    if not status.is_terminal(item.outcome):
        return []
    return [fetch_outcome_row(item) if isinstance(item, FetchResult)
            else frontier_outcome_row(item)]


# -- rows from webtable cells (``crawler export``) ---------------------------------------------


def _links(text: str | None) -> list[dict[str, str]] | None:
    """``p:links`` (JSON list of [url, anchor, rel]) -> the outlinks column; None when absent
    or unreadable (a damaged cell loses the links, never the page)."""
    if not text:
        return None
    try:
        return [{"url": str(link[0]), "anchor": str(link[1]) if len(link) > 1 else "",
                 "rel": str(link[2]) if len(link) > 2 else ""} for link in json.loads(text)]
    except (ValueError, TypeError, IndexError, KeyError):
        return None


def _page_from_cells(url: str, host: str, at: float, cells: Cells) -> ExportRow:
    f, p = cells.get(FETCH_FAMILY, {}), cells.get(PARSE_FAMILY, {})
    c, s = cells.get(CONTENT_FAMILY, {}), cells.get(SCHEDULE_FAMILY, {})
    row: dict[str, Any] = {
        "url": url, "host": host, "final_url": _text(f.get("final_url")),
        "fetched_at": utc(at), "status": _number(f.get("status")),
        "content_type": _text(f.get("content_type")),
        "content_length": _number(f.get("length"))}
    row.update({name: _text(p.get(name)) for name in _STRINGS})
    row.update({
        "text_truncated": _flag(p.get("text_truncated")),
        "word_count": _number(p.get("word_count")),
        "outlinks": _links(p.get("links")), "outlink_count": _number(p.get("outlinks")),
        "noindex": _flag(p.get("noindex")), "nofollow": _flag(p.get("nofollow")),
        "payload_digest": _text(f.get("checksum")), "text_digest": _text(p.get("text_digest")),
        "duplicate_of": _text(p.get("duplicate_of")),
        "duplicate_kind": _text(p.get("duplicate_kind")),
        "near_duplicate_of": _text(p.get("near_duplicate_of")),
        "near_similarity": _number(p.get("near_similarity"), float),
        "warc_file": _text(c.get("warc_file")), "warc_offset": _number(c.get("warc_offset")),
        "warc_length": _number(c.get("warc_length")),
        "warc_type": _text(c.get("warc_type")) or ("response" if c.get("warc_file") else None),
        "depth": _number(s.get("depth")), "discovered_from": _text(s.get("discovered_from"))})
    return ExportRow(PAGES, at, row)


def rows_from_cells(key: str, cells: Cells) -> list[ExportRow]:
    """The export rows of one webtable row (its latest cells): the URL's latest outcome;
    when that is ``fetched`` and the row has parse cells, its ``pages`` row; and when the page
    is a near copy, its ``near_duplicates`` row. Rows that are not a URL's, or that have no
    outcome time, give nothing."""
    try:
        url = url_from_row_key(key)
    except InvalidUrl:
        return []
    f, s = cells.get(FETCH_FAMILY, {}), cells.get(SCHEDULE_FAMILY, {})
    outcome = f.get("outcome")
    at = from_iso(f.get("outcome_at")) or from_iso(f.get("fetched_at"))
    if not outcome or at is None:
        return []
    host = s.get("host") or politeness_key(url)
    out = [ExportRow(OUTCOMES, at, {
        "url": url, "host": host, "outcome": outcome, "at": utc(at),
        "http_status": _number(f.get("status")),
        "detail": outcome_detail(f.get("detail"), f.get("error"), f.get("error_detail")),
        "depth": _number(s.get("depth"))})]
    fetched_at = from_iso(f.get("fetched_at"))
    if outcome != OUTCOME_FETCHED or PARSE_FAMILY not in cells or fetched_at is None:
        return out
    page = _page_from_cells(url, host, fetched_at, cells)
    out.append(page)
    original = page.row["near_duplicate_of"]
    if original:
        out.append(ExportRow(NEAR_DUPLICATES, fetched_at, {
            "url": url, "host": host, "near_duplicate_of": original,
            "similarity": page.row["near_similarity"], "at": utc(fetched_at)}))
    return out


# -- files ---------------------------------------------------------------------------------------


def export_path(prefix: str, dataset: str, partition: tuple[str, str], fmt: str,
                opened_at: float, shard: int, seq: int, token: str) -> str:
    """``{prefix}/{dataset}/dt=../hour=../part-{YYYYmmddHHMMSS}-{shard}-{seq}-{token}.{ext}``:
    the time sorts a partition's files, shard and seq keep one writer's files apart, the
    token keeps writers of different jobs apart."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(opened_at))
    dt, hour = partition
    return (f"{prefix.rstrip('/')}/{dataset}/dt={dt}/hour={hour}/"
            f"part-{stamp}-{shard:03d}-{seq:06d}-{token}.{FORMATS[fmt]}")


def group_rows(rows: Iterable[ExportRow]
               ) -> dict[tuple[str, str, str], list[ExportRow]]:
    """Rows by (dataset, dt, hour): one file each, in first-seen order."""
    groups: dict[tuple[str, str, str], list[ExportRow]] = {}
    for row in rows:
        groups.setdefault((row.dataset, *partition_of(row.at)), []).append(row)
    return groups


def _batches(rows: Iterable[ExportRow], dataset: str, size: int
             ) -> Iterable[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        if row.dataset != dataset:
            raise ValueError(f"a {row.dataset} row in a {dataset} file")
        batch.append(row.row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def write_parquet(out: IO[bytes], dataset: str, rows: Iterable[ExportRow],
                  row_group_rows: int = ROW_GROUP_ROWS) -> int:
    """Writes ``rows`` (all of ``dataset``) to ``out`` as one Parquet file, a row group per
    ``row_group_rows`` rows, so a writer holds one row group at a time; returns the count.

    Raises:
        ValueError: a row of another dataset, or a value that does not fit the schema.
    """
    schema, count = SCHEMAS[dataset], 0
    with pq.ParquetWriter(out, schema, compression=COMPRESSION) as writer:
        for batch in _batches(rows, dataset, row_group_rows):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count


def parquet_bytes(dataset: str, rows: Iterable[ExportRow]) -> bytes:
    """One complete zstd Parquet file of ``rows``, all of ``dataset``.

    Raises:
        ValueError: a row of another dataset, or a value that does not fit the schema.
    """
    buffer = io.BytesIO()
    write_parquet(buffer, dataset, rows)
    return buffer.getvalue()


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def jsonl_line(row: ExportRow) -> bytes:
    """One JSON object per row and line (UTF-8), columns in schema order, timestamps as ISO
    8601 UTC."""
    ordered = {name: row.row.get(name) for name in SCHEMAS[row.dataset].names}
    return (json.dumps(ordered, ensure_ascii=False, default=_json_value,
                       separators=(",", ":")) + "\n").encode("utf-8")


def jsonl_bytes(rows: Iterable[ExportRow]) -> bytes:
    """JSON Lines of ``rows``: the same columns and names as the Parquet files."""
    return b"".join(jsonl_line(row) for row in rows)
