"""A MinHash LSH band bucket as a ``dedup`` table row, and back (pure).

Row key ``l#<band key>`` (``transforms.core.lsh.band_keys``: ``<band>#<16 hex>``), family ``l``,
column ``v``: the bucket as versioned JSON, candidates in arrival order, e.g.::

    {"v": 1, "c": [["https://a.example/x", "a.example", "<base64 of 512 bytes>"], ...]}

A bucket holds at most ``transforms.core.lsh.MAX_CANDIDATES`` candidates, so a row is at most
about 80 KB and usually one candidate (~1 KB).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Sequence

from transforms.core.lsh import MAX_CANDIDATES, Candidate
from transforms.core.minhash import SIGNATURE_BYTES
from transforms.formats.rows import Cells, Row
from transforms.formats.schema import BAND_FAMILY

ROW_PREFIX = "l#"
COLUMN = "v"
VERSION = 1

_LOG = logging.getLogger(__name__)


def band_row_key(band_key: str) -> str:
    return ROW_PREFIX + band_key


def encode_bucket(bucket: Sequence[Candidate]) -> str:
    """The bucket as the row's versioned JSON (also the stage's state value)."""
    doc = {"v": VERSION,
           "c": [[c.url, c.host, base64.b64encode(c.signature).decode("ascii")]
                 for c in bucket]}
    return json.dumps(doc, separators=(",", ":"))


def decode_bucket(text: str | None) -> tuple[Candidate, ...]:
    """The inverse of :func:`encode_bucket`; () for nothing or text that cannot be read (the
    band then starts empty: a near copy may be missed in this band, never a page lost).
    Entries with a bad signature are skipped, and never more than ``MAX_CANDIDATES`` are
    returned."""
    if not text:
        return ()
    try:
        doc = json.loads(text)
        if doc.get("v") != VERSION:
            _LOG.warning("band bucket of unknown version", extra={"version": doc.get("v")})
            return ()
        out = []
        for url, host, encoded in doc["c"][:MAX_CANDIDATES]:
            signature = base64.b64decode(encoded, validate=True)
            if len(signature) == SIGNATURE_BYTES:
                out.append(Candidate(str(url), str(host), signature))
        return tuple(out)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        _LOG.warning("unreadable band bucket", extra={"length": len(text)})
        return ()


def band_row(band_key: str, bucket: Sequence[Candidate], at: float) -> Row:
    """The row that stores ``bucket`` for ``band_key``, with the cell timestamp ``at``."""
    return Row(band_row_key(band_key), {BAND_FAMILY: {COLUMN: encode_bucket(bucket)}}, at)


def bucket_from_cells(cells: Cells | None) -> tuple[Candidate, ...]:
    """The bucket a row holds (see :func:`decode_bucket`); () for no row."""
    return decode_bucket((cells or {}).get(BAND_FAMILY, {}).get(COLUMN))
