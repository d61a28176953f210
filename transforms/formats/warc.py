"""WARC/1.1 records for fetched pages: writing, reading back one record, and file naming.

Pure functions and a small in-memory builder over the ``warcio`` library, with no Beam import
and no I/O: the WARC-writing transform uploads what :class:`WarcFileBuilder` produces, and the
inspection commands read a record back with :func:`read_record` from the (file, offset, length)
kept in the webtable.

Each record is its own gzip member, so a reader can seek to an offset and decompress one
record without touching the rest of the file. Payloads are stored exactly as the server sent
them (content-encoding intact, transfer-encoding removed), which is what the WARC standard
asks of a ``response`` record and what makes the payload digest reproducible.

A page whose payload is byte-identical to an earlier capture gets a ``revisit`` record instead
(WARC 1.1 section 6.7.2, identical-payload-digest profile, as Heritrix writes them): the new
fetch's HTTP status line and headers, no payload, and ``WARC-Refers-To-Target-URI`` /
``WARC-Refers-To-Date`` naming the original, whose date is :func:`capture_date` of its fetch.
"""

from __future__ import annotations

import io
import posixpath
import secrets
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import BinaryIO

from warcio.archiveiterator import WARCIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from transforms.core.digests import digest_of
from transforms.core.records import FetchResult, Revisit

WARC_VERSION = "1.1"
GZIP_LEVEL = 6  # zlib's default, as the gzip tool uses
WARC_FORMAT = "WARC File Format 1.1"
WARC_CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
# Hop-by-hop framing that no longer describes the stored (de-chunked) payload.
DROPPED_HTTP_HEADERS = frozenset({"transfer-encoding"})

_READ_CHUNK = 1 << 16


@dataclass(frozen=True)
class WarcRecordView:
    """One WARC record as read back from a file.

    Attributes:
        record_type: the WARC-Type (``response``, ``warcinfo``, ...).
        warc_headers: the WARC header fields by name (a repeated field keeps its last value).
        target_uri: the WARC-Target-URI, or None (e.g. for warcinfo).
        http_status: the HTTP status code of a response or revisit record, else None.
        http_headers: the HTTP header fields in stored order, else empty.
        payload: the payload bytes exactly as stored: still content-encoded if the server
            compressed them; for a record without HTTP headers, the whole block; b"" for a
            revisit.
    """

    record_type: str
    warc_headers: dict[str, str]
    target_uri: str | None
    http_status: int | None
    http_headers: tuple[tuple[str, str], ...]
    payload: bytes


def format_warc_date(timestamp: float) -> str:
    """Formats a Unix time as a WARC 1.1 date: ISO 8601 UTC with microseconds.

    Args:
        timestamp: seconds since the epoch.

    Returns:
        e.g. ``2024-05-01T12:30:00.250000Z``.
    """
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def capture_date(result: FetchResult) -> str:
    """The WARC-Date of the record written for ``result`` (response, resource or revisit).

    A later revisit's ``WARC-Refers-To-Date`` must equal the original record's WARC-Date
    character for character (replay tools join on it), so dedup takes it from here.
    """
    return format_warc_date(result.fetched_at)


def warc_filename(prefix: str, shard: int, seq: int, now: float, *, token: str | None = None
                  ) -> str:
    """Names a new WARC file, partitioned by UTC day.

    Args:
        prefix: the directory (e.g. ``gs://bucket/warc``); a trailing slash is ignored.
        shard: the writer's shard number, zero-padded to 3 digits.
        seq: the writer's file sequence number, zero-padded to 6 digits.
        now: the Unix time the file is started.
        token: 8 characters that keep names unique across workers that share a shard and
            sequence number (e.g. after a restart); random hex when None.

    Returns:
        ``{prefix}/{YYYY}/{MM}/{DD}/crawl-{YYYYMMDDhhmmss}-{shard:03d}-{seq:06d}-{token}.warc.gz``.
    """
    stamp = time.gmtime(now)
    token = token if token is not None else secrets.token_hex(4)
    name = (f"{time.strftime('%Y/%m/%d', stamp)}/crawl-{time.strftime('%Y%m%d%H%M%S', stamp)}"
            f"-{shard:03d}-{seq:06d}-{token}.warc.gz")
    prefix = prefix.rstrip("/")
    return f"{prefix}/{name}" if prefix else name


def build_warcinfo_record(filename: str, software: str, extra: dict[str, str] | None = None,
                          *, warc_date: str | None = None) -> bytes:
    """Builds the warcinfo record that opens a WARC file, as one gzip member.

    Args:
        filename: the file's name, recorded as WARC-Filename.
        software: the crawler's name and version.
        extra: further ``name: value`` fields (e.g. ``operator``, ``robots``); they override the
            standard fields of the same name.
        warc_date: the WARC-Date to record; the current time when None.

    Returns:
        The gzip-compressed record.
    """
    return _gzip_member(lambda w: _write_warcinfo(w, filename, software, extra, warc_date))


def build_response_record(result: FetchResult, *, warc_date: str | None = None) -> bytes:
    """Builds the WARC ``response`` record of a fetched page, as one gzip member (a ``resource``
    record, the payload alone, for a protocol without HTTP framing such as FTP).

    The HTTP block is the status line ``HTTP/{version} {status} {reason}``, the response headers
    as received except Transfer-Encoding, and the body exactly as sent. When the server gave no
    reason phrase (HTTP/2 has none) the standard phrase for the status is written, so that the
    block parses as an HTTP/1 response in every WARC reader. A truncated body is marked with
    ``WARC-Truncated: length``.

    Args:
        result: a fetch with a response and a stored body.
        warc_date: the WARC-Date to record; ``result.fetched_at`` when None.

    Returns:
        The gzip-compressed record.

    Raises:
        ValueError: if the result has no status or no body.
    """
    return _gzip_member(lambda w: _write_response(w, result, warc_date))


def build_revisit_record(result: FetchResult, revisit: Revisit, *,
                         warc_date: str | None = None) -> bytes:
    """Builds the WARC ``revisit`` record of a fetch whose payload equals an earlier capture's.

    The block is the new fetch's HTTP status line and headers (as for a response) and no
    payload: the headers give indexes the status. Without HTTP framing the block is empty.

    Args:
        result: the new fetch (its body, if any, is not written).
        revisit: the original's URI, WARC-Date and payload digest.
        warc_date: the WARC-Date to record; :func:`capture_date` of ``result`` when None.

    Returns:
        The gzip-compressed record.

    Raises:
        ValueError: if the result has no status or the revisit no payload digest.
    """
    return _gzip_member(lambda w: _write_revisit(w, result, revisit, warc_date))


class WarcFileBuilder:
    """Accumulates one WARC file in memory: a warcinfo record, then response/revisit records.

    Each record is a separate gzip member; :meth:`add` returns where it lies so the webtable can
    point at it.
    """

    def __init__(self, filename: str, software: str, extra: dict[str, str] | None = None, *,
                 warc_date: str | None = None) -> None:
        """Starts the file with its warcinfo record.

        Args:
            filename: the file's path or URI; its last component is recorded as WARC-Filename.
            software: the crawler's name and version.
            extra: further warcinfo fields.
            warc_date: the warcinfo's WARC-Date; the current time when None.
        """
        self.filename = filename
        self._out = io.BytesIO()
        self._count = 0
        self._out.write(build_warcinfo_record(posixpath.basename(filename), software, extra,
                                              warc_date=warc_date))

    def add(self, result: FetchResult, *, revisit: Revisit | None = None,
            warc_date: str | None = None) -> tuple[int, int]:
        """Appends the record of a fetch: a response (see :func:`build_response_record`), or a
        revisit when ``revisit`` is set (see :func:`build_revisit_record`).

        Args:
            result: a fetch with a response (and a stored body, unless a revisit).
            revisit: the earlier capture with the identical payload, or None.
            warc_date: the WARC-Date to record; :func:`capture_date` of ``result`` when None.

        Returns:
            (offset, length) of the record's gzip member within the file.

        Raises:
            ValueError: if the record cannot be built; the file is left unchanged.
        """
        record = (build_response_record(result, warc_date=warc_date) if revisit is None
                  else build_revisit_record(result, revisit, warc_date=warc_date))
        offset = self._out.tell()
        self._out.write(record)
        self._count += 1
        return offset, len(record)

    def getvalue(self) -> bytes:
        """The file's bytes so far."""
        return self._out.getvalue()

    @property
    def size(self) -> int:
        """The file's size in bytes so far."""
        return self._out.tell()

    @property
    def count(self) -> int:
        """The number of records added (the warcinfo record is not counted)."""
        return self._count


def read_record(source: bytes | BinaryIO, offset: int) -> WarcRecordView:
    """Reads the WARC record whose gzip member starts at ``offset``.

    The payload comes from warcio's raw stream, not ``content_stream()``, which would undo
    chunking and content-encoding: what is returned is exactly what was stored.

    Args:
        source: the WARC file's bytes, or a seekable binary file object.
        offset: where the record's gzip member starts (as returned by
            :meth:`WarcFileBuilder.add`).

    Returns:
        The record's headers and payload.

    Raises:
        ValueError: if there is no readable WARC record at that offset.
    """
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    stream.seek(offset)
    iterator = WARCIterator(stream)  # WARC only: stray bytes can pass for an ARC header
    try:
        record = next(iter(iterator), None)
        # A blank first line parses as a record with no headers at all: not a record either.
        if record is None or not record.rec_headers.protocol.startswith("WARC/"):
            raise ValueError(f"no WARC record at offset {offset}")
        return _view(record)
    except ArchiveLoadFailed as error:
        raise ValueError(f"no readable WARC record at offset {offset}: {error}") from error
    finally:
        iterator.close()


def _gzip_member(write: Callable[[WARCWriter], None]) -> bytes:
    """One record as one gzip member, compressed at ``GZIP_LEVEL``: warcio writes the record
    uncompressed and we compress it (warcio's own gzip is fixed at level 9, which took 13.5% of
    the pipeline's CPU in the benchmark profile; level 6 is 1.7x faster for 0.7% more bytes on
    HTML)."""
    raw = io.BytesIO()
    write(WARCWriter(raw, gzip=False, warc_version=WARC_VERSION))
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
    return compressor.compress(raw.getbuffer()) + compressor.flush()


def _write_warcinfo(writer: WARCWriter, filename: str, software: str,
                    extra: dict[str, str] | None, warc_date: str | None) -> None:
    fields = {"software": software, "format": WARC_FORMAT, "conformsTo": WARC_CONFORMS_TO}
    fields.update(extra or {})
    # warc-fields are one "name: value" line each; a line break would forge another field.
    fields = {_one_line(name): _one_line(value) for name, value in fields.items()}
    record = writer.create_warcinfo_record(filename, fields)
    if warc_date is not None:
        record.rec_headers.replace_header("WARC-Date", warc_date)
    writer.write_record(record)


def _write_response(writer: WARCWriter, result: FetchResult, warc_date: str | None) -> None:
    if result.status is None or result.body is None:
        raise ValueError(f"no response body to store for {result.final_url}")
    # Field order as in most crawlers' WARCs; warcio adds the digests, Content-Type and
    # Content-Length after these.
    warc_headers = _common_headers("response", result, warc_date)
    if result.truncated:
        warc_headers["WARC-Truncated"] = "length"
    # The digest computed when the body arrived: warcio then hashes only the block.
    warc_headers["WARC-Payload-Digest"] = digest_of(result) or ""
    if not _is_http(result.final_url):
        # WARC 1.1 section 6.4: a retrieval without HTTP framing (FTP) is a ``resource``
        # record whose block is the payload itself, typed by its Content-Type.
        warc_headers["WARC-Type"] = "resource"
        record = writer.create_warc_record(
            result.final_url, "resource", payload=io.BytesIO(result.body),
            length=len(result.body), warc_headers_dict=warc_headers,
            warc_content_type=_one_line(result.content_type or "application/octet-stream"))
        writer.write_record(record)
        return
    record = writer.create_warc_record(
        result.final_url, "response", payload=io.BytesIO(result.body), length=len(result.body),
        warc_headers_dict=warc_headers, http_headers=_http_headers(result, result.status))
    writer.write_record(record)


def _write_revisit(writer: WARCWriter, result: FetchResult, revisit: Revisit,
                   warc_date: str | None) -> None:
    if result.status is None or not revisit.payload_digest:
        raise ValueError(f"no status or no payload digest for a revisit of {result.final_url}")
    warc_headers = _common_headers("revisit", result, warc_date)
    warc_headers.update({
        "WARC-Profile": REVISIT_PROFILE,
        "WARC-Refers-To-Target-URI": _one_line(revisit.refers_to_uri),
        "WARC-Refers-To-Date": _one_line(revisit.refers_to_date),
        # The original's digest, which is also this payload's: warcio keeps it as given.
        "WARC-Payload-Digest": _one_line(revisit.payload_digest),
    })
    http = _is_http(result.final_url)
    record = writer.create_warc_record(
        result.final_url, "revisit", warc_headers_dict=warc_headers,
        http_headers=_http_headers(result, result.status) if http else None)
    if not http:
        record.content_type = None  # an empty block: no Content-Type, not application/http
    writer.write_record(record)


def _common_headers(record_type: str, result: FetchResult, warc_date: str | None
                    ) -> dict[str, str]:
    """The fields every capture record starts with, in the order most crawlers write them."""
    return {
        "WARC-Type": record_type,
        "WARC-Record-ID": f"<urn:uuid:{uuid.uuid4()}>",
        "WARC-Date": warc_date if warc_date is not None else capture_date(result),
        "WARC-Target-URI": _one_line(result.final_url),
    }


def _http_headers(result: FetchResult, status: int) -> StatusAndHeaders:
    """The status line and headers as received, minus de-chunking and HTTP/2 pseudo-headers."""
    return StatusAndHeaders(
        _status_line(status, result.reason),
        [(_one_line(name), _one_line(value)) for name, value in result.headers
         if name.lower() not in DROPPED_HTTP_HEADERS and not name.startswith(":")],
        protocol=f"HTTP/{result.http_version}",
    )


def _is_http(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))


def _status_line(status: int, reason: str) -> str:
    """``{status} {reason}``, with the standard reason phrase when the server sent none."""
    reason = _one_line(reason).strip()
    if not reason:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:  # a status without a registered phrase, e.g. 299
            return str(status)
    return f"{status} {reason}"


def _one_line(text: str) -> str:
    """Replaces line breaks, which would end a header field early and forge the next one."""
    return text.replace("\r", " ").replace("\n", " ")


def _view(record: ArcWarcRecord) -> WarcRecordView:
    http_status = None
    http_headers: tuple[tuple[str, str], ...] = ()
    if record.http_headers is not None and record.http_headers.protocol.startswith("HTTP/"):
        code = record.http_headers.get_statuscode()
        http_status = int(code) if code.isdigit() else None
        http_headers = tuple((name, value) for name, value in record.http_headers.headers)
    chunks = []
    # The raw stream may return short reads (it is fed one decompressed block at a time).
    while chunk := record.raw_stream.read(_READ_CHUNK):
        chunks.append(chunk)
    return WarcRecordView(record_type=record.rec_type,
                          warc_headers=dict(record.rec_headers.headers),
                          target_uri=record.rec_headers.get_header("WARC-Target-URI"),
                          http_status=http_status, http_headers=http_headers,
                          payload=b"".join(chunks))
