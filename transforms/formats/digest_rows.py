"""A content digest's record as a ``dedup`` table row, and back (pure).

Row key ``d#<content key>`` (``transforms.core.duplicates.content_key``: ``t:`` or ``p:`` and
the digest), family ``d``, column ``v``: the record as JSON, e.g.::

    {"original": "https://a.example/x", "at": 1764000000.25,
     "captures": {"sha1:ABC...": ["https://a.example/x", "2026-11-25T10:00:00.250000Z"]},
     "urls": [["https://a.example/x", "a.example"], ["https://a.example/x?s=1", "a.example"]]}
"""

from __future__ import annotations

import json

from transforms.core.duplicates import DigestRecord
from transforms.formats.rows import Cells, Row
from transforms.formats.schema import DIGEST_FAMILY

ROW_PREFIX = "d#"
COLUMN = "v"


def digest_row_key(content_key: str) -> str:
    return ROW_PREFIX + content_key


def digest_row(content_key: str, record: DigestRecord, at: float) -> Row:
    doc = {"original": record.original, "at": record.original_at,
           "captures": {d: list(c) for d, c in record.captures.items()},
           "urls": [list(u) for u in record.urls]}
    return Row(digest_row_key(content_key),
               {DIGEST_FAMILY: {COLUMN: json.dumps(doc, separators=(",", ":"))}}, at)


def record_from_cells(cells: Cells | None) -> DigestRecord | None:
    """The record a row holds; None for no row or one that cannot be read (the content is
    then seen as new: a duplicate missed, never a page lost)."""
    text = (cells or {}).get(DIGEST_FAMILY, {}).get(COLUMN)
    if not text:
        return None
    try:
        doc = json.loads(text)
        return DigestRecord(str(doc["original"]), float(doc["at"]),
                            {str(d): (str(c[0]), str(c[1]))
                             for d, c in doc.get("captures", {}).items()},
                            [(str(u[0]), str(u[1])) for u in doc.get("urls", [])])
    except (ValueError, KeyError, TypeError, IndexError):
        return None
