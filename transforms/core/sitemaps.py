"""Sitemaps (the sitemaps.org protocol 0.9): parsing, the location scope rule and priorities.

Pure functions, no Beam import. :func:`parse_sitemap` never raises: what it cannot use goes to
``Sitemap.errors``, and entries read before a problem are kept (a cut-off file still helps).
The format is sniffed from the bytes, since servers often mislabel sitemaps:

* gzip, recognised by its magic bytes whatever the URL or Content-Type says, is inflated to
  at most ``MAX_SITEMAP_BYTES`` (the protocol's 50 MB uncompressed limit), so a gzip bomb
  costs no more than a 50 MB sitemap; concatenated members are one stream;
* XML ``<urlset>`` and ``<sitemapindex>`` with any namespace (sitemaps.org 0.9, Google's 0.84,
  none) and prefix. Entries are recognised by position (``root > url|sitemap > loc|lastmod|
  priority|changefreq``, fields with their entry's prefix), so ``<image:loc>`` never passes
  for a page's ``<loc>``; without namespace processing an undeclared prefix (common in image
  and video extensions) does not fail the file. Leading whitespace before ``<?xml`` is skipped;
* anything else is a text sitemap: one URL per line, UTF-8, a BOM and blank lines skipped.

XML safety: expat is used directly and every DOCTYPE is rejected. Sitemaps use no DTD, and an
internal DTD subset is the only place entities can be declared, so this rules out entity
expansion ("billion laughs", quadratic blowup) and external entities; an entity declaration
aborts the parse too, as a second line of defence. Expat never fetches external DTDs.

Limits: at most ``MAX_ENTRIES`` entries are returned (``truncated`` is set when there were more,
or when the body passed 50 MB). Invalid entries are skipped with an error, and parsing stops
after ``MAX_INVALID_ENTRIES`` of them, which bounds the work a hostile file causes.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit
from xml.parsers import expat

KIND_URLSET = "urlset"
KIND_INDEX = "index"
KIND_TEXT = "text"

MAX_ENTRIES = 50_000
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
MAX_LOC_LENGTH = 2048
MAX_INVALID_ENTRIES = 50_000
MAX_ERRORS = 20
DEFAULT_SITEMAP_PATHS = ("/sitemap.xml",)
CHANGEFREQS = frozenset({"always", "hourly", "daily", "weekly", "monthly", "yearly", "never"})

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_XML_CHUNK = 1024 * 1024
_MAX_FIELD_CHARS = 4 * MAX_LOC_LENGTH
_ROOTS = {"urlset": (KIND_URLSET, "url"), "sitemapindex": (KIND_INDEX, "sitemap")}
_FIELDS = frozenset({"loc", "lastmod", "priority", "changefreq"})
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_TEXT_LINE = re.compile(rb"\S[^\r\n]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_XML_START = re.compile(rb"(?:\xef\xbb\xbf)?\s*<")
# W3C Datetime (the ISO 8601 profile sitemaps use): YYYY, YYYY-MM, YYYY-MM-DD, then
# Thh:mm, Thh:mm:ss or Thh:mm:ss.s and a zone (Z or +hh:mm). A space for the T, a zone without
# colon and a missing zone (read as UTC) are tolerated: sitemap generators write them.
_W3C_DATETIME = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"\s*([Zz]|[+-]\d{2}(?::?\d{2})?)?)?)?)?", re.ASCII
)


@dataclass(frozen=True)
class SitemapEntry:
    """One ``<url>`` of a urlset, one ``<sitemap>`` of an index, or one line of a text sitemap.

    Attributes:
        url: the ``<loc>`` as written (whitespace stripped, entities decoded): an absolute
            http(s) URL, not canonicalized. In an index, the URL of a child sitemap.
        lastmod: ``<lastmod>`` in seconds since the epoch; None if absent or unparseable.
        priority: ``<priority>`` between 0.0 and 1.0; None if absent or invalid (the
            protocol's default is 0.5, see :func:`sitemap_priority`).
        changefreq: ``<changefreq>`` lowercased, one of :data:`CHANGEFREQS`; None otherwise.
    """

    url: str
    lastmod: float | None = None
    priority: float | None = None
    changefreq: str | None = None


@dataclass(frozen=True)
class Sitemap:
    """What a sitemap file lists.

    Attributes:
        kind: ``urlset`` (page URLs), ``index`` (child sitemap URLs) or ``text``. A body that
            is XML but not a sitemap (HTML, RSS, an unknown root) is reported as an empty
            ``urlset`` with an error.
        entries: the valid entries in document order, at most ``MAX_ENTRIES``.
        errors: short descriptions of what was skipped or went wrong, at most ``MAX_ERRORS``
            of them (then a count of the rest); empty for a clean file.
        truncated: True when entries past ``MAX_ENTRIES`` or bytes past ``MAX_SITEMAP_BYTES``
            were ignored.
    """

    kind: str
    entries: tuple[SitemapEntry, ...]
    errors: tuple[str, ...]
    truncated: bool


def parse_sitemap(body: bytes, url: str, content_type: str | None = None) -> Sitemap:
    """Parses a sitemap, sitemap index or text sitemap.

    Args:
        body: the response body, content-coding undone (a ``.gz`` file is still gzip).
        url: the sitemap's URL, for error messages; scope is :func:`filter_scope`'s job.
        content_type: the Content-Type header; only used to refuse a non-XML ``text/html``
            page (a "soft 404" at ``/sitemap.xml``) instead of reading it as a text sitemap.

    Returns:
        The :class:`Sitemap`. Never raises.
    """
    collector = _Collector()
    data, over_cap = _decompressed(body, collector)
    if over_cap:
        collector.truncated = True
        collector.error(f"{url}: over {MAX_SITEMAP_BYTES} bytes uncompressed; rest ignored",
                        entry=False)
    xml_start = _XML_START.match(data)
    if xml_start or data.startswith(_UTF16_BOMS):
        xml = data[xml_start.end() - 1:] if xml_start else data
        kind = _parse_xml(xml, collector, complete=not over_cap)
    elif content_type and content_type.split(";", 1)[0].strip().lower() == "text/html":
        collector.error(f"{url}: an HTML page, not a sitemap", entry=False)
        kind = KIND_TEXT
    else:
        _parse_text(data, collector)
        kind = KIND_TEXT
    if not data:
        collector.error(f"{url}: empty body", entry=False)
    return collector.result(kind)


def parse_w3c_datetime(text: str) -> float | None:
    """Parses a ``<lastmod>`` in W3C Datetime form to seconds since the epoch.

    A date alone means its midnight UTC, a year or month alone their first day. Returns None
    when ``text`` (surrounding whitespace ignored) is not a valid W3C datetime.
    """
    match = _W3C_DATETIME.fullmatch(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    offset = timedelta(0)
    if zone and zone not in "Zz":
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        offset = -offset if zone[0] == "-" else offset
    try:
        moment = datetime(
            int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
            int(second or 0), int((fraction or "0")[:6].ljust(6, "0")), timezone(offset))
        return moment.timestamp()
    except (ValueError, OverflowError):  # out-of-range fields, or an offset of 24h or more
        return None


def parse_priority(text: str) -> float | None:
    """Parses a ``<priority>`` value; None unless it is a number from 0.0 to 1.0."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


class _Stop(Exception):
    """Ends parsing early: a limit was reached (and recorded)."""


class _Rejected(Exception):
    """Ends parsing: the document is unsafe or not a sitemap; the message says why."""


class _Collector:
    """Validates entries, enforces the limits (raising _Stop), keeps the errors: those about
    single entries up to MAX_ERRORS, then only counted; those about the document always."""

    def __init__(self) -> None:
        self.entries: list[SitemapEntry] = []
        self.errors: list[str] = []
        self.entry_errors = 0
        self.invalid = 0
        self.truncated = False

    def error(self, message: str, *, entry: bool = True) -> None:
        self.entry_errors += entry
        if not entry or self.entry_errors <= MAX_ERRORS:
            self.errors.append(message)

    def result(self, kind: str) -> Sitemap:
        more = self.entry_errors - MAX_ERRORS
        errors = (*self.errors, f"{more} more entry errors") if more > 0 else tuple(self.errors)
        return Sitemap(kind, tuple(self.entries), errors, self.truncated)

    def add(self, fields: dict[str, str]) -> None:
        loc = fields.get("loc", "").strip()
        if not _is_http_url(loc):
            self.invalid += 1
            self.error(f"invalid <loc> {loc[:100]!r}" if loc else "entry without <loc>")
            if self.invalid >= MAX_INVALID_ENTRIES:
                self.error(f"{self.invalid} invalid entries; stopped reading", entry=False)
                raise _Stop
            return
        if len(self.entries) >= MAX_ENTRIES:
            self.truncated = True
            self.error(f"more than {MAX_ENTRIES} entries; the rest ignored", entry=False)
            raise _Stop
        lastmod = parse_w3c_datetime(fields["lastmod"]) if "lastmod" in fields else None
        if lastmod is None and "lastmod" in fields:
            self.error(f"invalid <lastmod> {fields['lastmod'][:40]!r} for {loc[:100]}")
        priority = parse_priority(fields["priority"]) if "priority" in fields else None
        changefreq = fields.get("changefreq", "").strip().lower()
        self.entries.append(SitemapEntry(
            loc, lastmod, priority, changefreq if changefreq in CHANGEFREQS else None))


class _XmlHandlers:
    """Expat callbacks that feed ``<url>``/``<sitemap>`` entries to a _Collector."""

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.kind: str | None = None
        self.entry_tag = ""
        self.depth = 0
        self.entry_prefix: str | None = None  # set while inside an entry element
        self.fields: dict[str, str] = {}
        self.field: str | None = None
        self.text: list[str] = []
        self.text_chars = 0

    def start(self, name: str, _attrs: object) -> None:
        self.depth += 1
        prefix, _, local = name.rpartition(":")
        if self.depth == 1:
            if local not in _ROOTS:
                raise _Rejected(f"not a sitemap: root element <{name[:50]}>")
            self.kind, self.entry_tag = _ROOTS[local]
        elif self.depth == 2 and local == self.entry_tag:
            self.entry_prefix, self.fields = prefix, {}
        elif self.depth == 3 and prefix == self.entry_prefix and local in _FIELDS:
            self.field, self.text, self.text_chars = local, [], 0

    def chars(self, data: str) -> None:
        if self.field is not None and self.text_chars <= _MAX_FIELD_CHARS:
            self.text.append(data)
            self.text_chars += len(data)

    def end(self, _name: str) -> None:
        if self.depth == 3 and self.field is not None:
            self.fields.setdefault(self.field, "".join(self.text))
            self.field = None
        elif self.depth == 2 and self.entry_prefix is not None:
            self.entry_prefix = None
            self.collector.add(self.fields)
        self.depth -= 1

    @staticmethod
    def reject_dtd(name: str, *_args: object) -> None:
        raise _Rejected(f"DOCTYPE or ENTITY declaration {name[:50]!r} rejected: no DTD allowed")


def _parse_xml(data: bytes, collector: _Collector, *, complete: bool) -> str:
    """Feeds ``data`` to expat in chunks (so a limit stops it early); returns the kind."""
    handlers = _XmlHandlers(collector)
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.StartElementHandler = handlers.start
    parser.EndElementHandler = handlers.end
    parser.CharacterDataHandler = handlers.chars
    parser.StartDoctypeDeclHandler = parser.EntityDeclHandler = handlers.reject_dtd
    try:
        for start in range(0, len(data), _XML_CHUNK):
            parser.Parse(data[start:start + _XML_CHUNK], False)
        if complete:  # a body cut at the size limit ends mid-document: not an error of its own
            parser.Parse(b"", True)
    except _Stop:
        pass
    except _Rejected as exc:
        collector.error(str(exc), entry=False)
    except (expat.ExpatError, ValueError, LookupError) as exc:
        # ExpatError: malformed XML; LookupError/ValueError: an unusable declared encoding.
        collector.error(f"XML error: {exc}", entry=False)
    return handlers.kind or KIND_URLSET


def _parse_text(data: bytes, collector: _Collector) -> None:
    """Reads one URL per line; a regex skips runs of blank lines without a Python loop."""
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        for match in _TEXT_LINE.finditer(data, start):
            try:
                line = match.group().decode("utf-8")
            except UnicodeDecodeError:
                line = ""  # not UTF-8, as the protocol requires: counted as invalid
            collector.add({"loc": line})
    except _Stop:
        pass


def _decompressed(body: bytes, collector: _Collector) -> tuple[bytes, bool]:
    """Undoes gzip (by magic bytes); returns at most MAX_SITEMAP_BYTES and whether there were
    more. Concatenated gzip members are read as one stream."""
    if not body.startswith(_GZIP_MAGIC):
        return body[:MAX_SITEMAP_BYTES], len(body) > MAX_SITEMAP_BYTES
    out = bytearray()
    inflater, pending = zlib.decompressobj(wbits=_GZIP_WBITS), body
    try:
        while len(out) <= MAX_SITEMAP_BYTES:
            chunk = inflater.decompress(pending, MAX_SITEMAP_BYTES + 1 - len(out))
            stalled = not chunk and len(inflater.unconsumed_tail) == len(pending)
            out += chunk
            pending = inflater.unconsumed_tail
            if inflater.eof:
                pending = inflater.unused_data
                if not pending.startswith(_GZIP_MAGIC):
                    break  # padding or garbage after the last member
                inflater = zlib.decompressobj(wbits=_GZIP_WBITS)
            elif stalled:  # all input read and the stream not ended
                raise zlib.error("truncated gzip stream")
    except zlib.error as exc:
        collector.error(f"gzip error after {len(out)} bytes: {exc}", entry=False)
    if len(out) > MAX_SITEMAP_BYTES:
        return bytes(out[:MAX_SITEMAP_BYTES]), True
    return bytes(out), False


def _is_http_url(loc: str) -> bool:
    """An absolute http(s) URL with a host, no control characters and not too long."""
    if (len(loc) > MAX_LOC_LENGTH or not loc[:8].lower().startswith(("http://", "https://"))
            or _CONTROL.search(loc)):
        return False
    try:
        parts = urlsplit(loc)
        return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False
