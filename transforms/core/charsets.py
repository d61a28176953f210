"""Decoding an HTML body to text the way a browser picks its encoding (pure).

Split from ``transforms.core.links`` (which re-exports :func:`decode_html`): choosing a
character set is its own concern, apart from walking the parsed page.
"""

from __future__ import annotations

import codecs
import re

_SNIFF_BYTES = 4096
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s;"',]+)""", re.IGNORECASE)
# Matches both <meta charset=x> and <meta http-equiv=content-type content="...; charset=x">.
# The attribute run is bounded so that a page of unclosed "<meta" cannot make it quadratic.
_META_CHARSET = re.compile(
    rb"""<meta\b[^>]{0,512}?\bcharset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE
)
# Python codec names that must not decode a web page: they are not character sets (or raise
# on any input), and UTF-7 is refused by browsers.
_REFUSED_CODECS = frozenset({
    "idna", "punycode", "raw-unicode-escape", "undefined", "unicode-escape", "utf-7",
})
# Labels that browsers decode with a superset (WHATWG Encoding Standard); the superset gives
# the text the page author saw, e.g. curly quotes on pages labelled iso-8859-1.
_BROWSER_SUPERSETS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "tis-620": "cp874",
    "euc_kr": "cp949",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "big5": "big5hkscs",
}


def decode_html(body: bytes, content_type: str | None) -> str:
    """Decodes an HTML body to text, the way a browser picks the encoding.

    The order follows the WHATWG encoding sniffing algorithm: a byte-order mark wins (it cannot
    be there by accident, while headers are often wrong), then the charset of the Content-Type
    header, then a ``<meta charset>`` or ``<meta http-equiv=content-type>`` within the first
    4 KB, then UTF-8. Unknown or unusable charset names fall through to the next source.

    Args:
        body: the raw (content-decoded) response body.
        content_type: the Content-Type header, or None.

    Returns:
        The text; undecodable bytes become U+FFFD. Never raises.
    """
    for bom, bom_encoding in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(bom_encoding, "replace")
    encoding: str | None = None
    if content_type:
        header_match = _HEADER_CHARSET.search(content_type)
        if header_match:
            encoding = _codec_for(header_match.group(1), from_meta=False)
    if encoding is None:
        meta_match = _META_CHARSET.search(body, 0, _SNIFF_BYTES)
        if meta_match:
            encoding = _codec_for(meta_match.group(1).decode("ascii"), from_meta=True)
    if encoding is not None:
        try:
            return body.decode(encoding, "replace")
        except (LookupError, UnicodeError):
            pass  # a codec that cannot decode with replacement; UTF-8 below is the default
    return body.decode("utf-8", "replace")


def _codec_for(label: str, *, from_meta: bool) -> str | None:
    """Maps a charset label to a Python codec name, or None if it cannot decode a page."""
    try:
        name = codecs.lookup(label.strip().lower()).name
    except (LookupError, ValueError):
        return None
    if name in _REFUSED_CODECS:
        return None
    if from_meta and name.startswith("utf-16"):
        # A meta tag was readable as ASCII, so the page is not UTF-16 (WHATWG: use UTF-8).
        return "utf-8"
    return _BROWSER_SUPERSETS.get(name, name)
