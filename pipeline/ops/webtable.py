"""Reading the webtable back: one URL's row (``crawler show``) and a host's rows
(``crawler ls``)."""

from __future__ import annotations

from dataclasses import dataclass

from google.cloud import bigtable
from google.cloud.bigtable.row_set import RowSet

from transforms.core.urls import canonicalize_url
from transforms.formats.rowkeys import host_row_prefixes, row_key, url_from_row_key
from transforms.formats.schema import CONTENT_FAMILY, FETCH_FAMILY, PARSE_FAMILY


@dataclass
class UrlRow:
    key: str
    url: str
    cells: dict[str, dict[str, str]]

    def get(self, family: str, column: str, default: str = "") -> str:
        return self.cells.get(family, {}).get(column, default)


def _decode(row) -> UrlRow:
    cells = {fam: {col.decode(): vals[0].value.decode("utf-8", "replace")
                   for col, vals in columns.items()}
             for fam, columns in row.cells.items()}
    key = row.row_key.decode()
    return UrlRow(key, url_from_row_key(key), cells)


def _table(project: str, instance: str, table: str):
    return bigtable.Client(project=project, admin=False).instance(instance).table(table)


def read_url(url: str, project: str, instance: str, table: str) -> UrlRow | None:
    """The latest cells of one URL's row (the URL is canonicalized first)."""
    row = _table(project, instance, table).read_row(row_key(canonicalize_url(url)).encode())
    return _decode(row) if row is not None else None


def list_host(host: str, project: str, instance: str, table: str, limit: int = 50
              ) -> list[UrlRow]:
    """Up to ``limit`` rows of a host (politeness key such as ``example.com`` or ``h:8080``)."""
    row_set = RowSet()
    for prefix in host_row_prefixes(host):
        row_set.add_row_range_with_prefix(prefix)
    rows = []
    for row in _table(project, instance, table).read_rows(row_set=row_set):
        decoded = _decode(row)
        rows.append(decoded)
        if len(rows) >= limit:
            break
    return rows


def format_row(row: UrlRow) -> str:
    lines = [f"url        {row.url}", f"row key    {row.key}"]
    for family in sorted(row.cells):
        for column, value in sorted(row.cells[family].items()):
            lines.append(f"{family}:{column:<16} {value}")
    warc = row.get(CONTENT_FAMILY, "warc_file")
    if warc:
        lines.append(f"WARC       {warc} @ offset {row.get(CONTENT_FAMILY, 'warc_offset')} "
                     f"({row.get(CONTENT_FAMILY, 'warc_length')} bytes, gzip member)")
    else:
        lines.append("WARC       (no stored record)")
    return "\n".join(lines)


def format_listing(rows: list[UrlRow]) -> str:
    lines = [f"{'status':>6}  {'outcome':<15} {'fetched_at':<24}  url"]
    for r in rows:
        lines.append(f"{r.get(FETCH_FAMILY, 'status', '-'):>6}  "
                     f"{r.get(FETCH_FAMILY, 'outcome', '-'):<15} "
                     f"{r.get(FETCH_FAMILY, 'fetched_at', '-'):<24}  {r.url}"
                     + (f"  [{r.get(PARSE_FAMILY, 'title')}]" if r.get(PARSE_FAMILY, 'title')
                        else ""))
    lines.append(f"{len(rows)} rows")
    return "\n".join(lines)
