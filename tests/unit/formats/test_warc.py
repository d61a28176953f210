"""Tests for transforms.formats.warc: records round-trip through warcio byte for byte."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import re

import pytest
from warcio.archiveiterator import ArchiveIterator

from transforms.core.digests import payload_digest
from transforms.core.records import CrawlRequest, FetchResult
from transforms.formats.warc import (
    GZIP_LEVEL,
    WarcFileBuilder,
    build_response_record,
    build_warcinfo_record,
    format_warc_date,
    read_record,
    warc_filename,
)

FETCHED_AT = 1714566600.25  # 2024-05-01T12:30:00.25Z
HTML = b"<!doctype html><html><head><title>Hello</title></head><body>caf\xc3\xa9</body></html>"


def make_result(url: str, body: bytes | None, *, status: int | None = 200, reason: str = "OK",
                headers: tuple[tuple[str, str], ...] = (), http_version: str = "1.1",
                truncated: bool = False) -> FetchResult:
    return FetchResult(
        request=CrawlRequest(url=url),
        host="example.com",
        fetched_at=FETCHED_AT,
        final_url=url,
        status=status,
        content_type=dict((k.lower(), v) for k, v in headers).get("content-type"),
        http_version=http_version,
        reason=reason,
        headers=headers,
        body=body,
        content_length=len(body or b""),
        truncated=truncated,
    )


HTML_RESULT = make_result("https://example.com/", HTML, headers=(
    ("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(HTML))),
    ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")))
BINARY_BODY = bytes(range(256)) * 4 + b"\x00\x00\r\n\r\nWARC/1.1\r\n\x00"
BINARY_RESULT = make_result("https://example.com/blob.bin", BINARY_BODY, headers=(
    ("Content-Type", "application/octet-stream"),))
EMPTY_RESULT = make_result("https://example.com/empty", b"", status=204, reason="No Content")
GZIPPED_BODY = gzip.compress(b"<html>" + b"compressible " * 500 + b"</html>", mtime=0)
GZIPPED_RESULT = make_result("https://example.com/gz", GZIPPED_BODY, headers=(
    ("Content-Type", "text/html"), ("Content-Encoding", "gzip"),
    ("Content-Length", str(len(GZIPPED_BODY)))))
CHUNKED_BODY = b"<html>" + b"sent in chunks " * 200 + b"</html>"
CHUNKED_RESULT = make_result("https://example.com/chunked", CHUNKED_BODY, headers=(
    ("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"), ("Vary", "Accept")))
HTTP2_RESULT = make_result("https://example.com/h2", HTML, reason="", http_version="2",
                           headers=(("content-type", "text/html"), (":status", "200")))
ALL_RESULTS = (HTML_RESULT, BINARY_RESULT, EMPTY_RESULT, GZIPPED_RESULT, CHUNKED_RESULT,
               HTTP2_RESULT)


@pytest.fixture(name="warc")
def warc_fixture() -> tuple[bytes, list[tuple[int, int]]]:
    builder = WarcFileBuilder("gs://bucket/warc/2024/05/01/test.warc.gz", "beam-crawler/0.1",
                              {"operator": "tests"})
    locations = [builder.add(result) for result in ALL_RESULTS]
    assert builder.count == len(ALL_RESULTS)
    assert builder.size == len(builder.getvalue())
    return builder.getvalue(), locations


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def test_round_trip_gives_exactly_the_stored_bodies(warc):
    data, locations = warc
    for result, (offset, _) in zip(ALL_RESULTS, locations, strict=True):
        view = read_record(data, offset)
        assert view.record_type == "response"
        assert view.target_uri == result.final_url
        assert view.http_status == result.status
        assert view.payload == result.body


def test_content_encoded_payload_stays_compressed(warc):
    data, locations = warc
    view = read_record(data, locations[ALL_RESULTS.index(GZIPPED_RESULT)][0])
    assert view.payload == GZIPPED_BODY
    assert gzip.decompress(view.payload).startswith(b"<html>compressible")
    assert ("Content-Encoding", "gzip") in view.http_headers


def test_transfer_encoding_is_dropped_and_other_headers_kept(warc):
    data, locations = warc
    chunked = read_record(data, locations[ALL_RESULTS.index(CHUNKED_RESULT)][0])
    assert [name for name, _ in chunked.http_headers] == ["Content-Type", "Vary"]
    html = read_record(data, locations[0][0])
    assert html.http_headers == HTML_RESULT.headers  # repeated Set-Cookie kept, in order


def test_read_record_from_a_seekable_file(warc, tmp_path):
    data, locations = warc
    path = tmp_path / "test.warc.gz"
    path.write_bytes(data)
    with path.open("rb") as file:
        for result, (offset, _) in reversed(list(zip(ALL_RESULTS, locations, strict=True))):
            assert read_record(file, offset).payload == result.body


def test_each_record_is_an_independent_gzip_member(warc):
    data, locations = warc
    first_offset = locations[0][0]
    assert gzip.decompress(data[:first_offset]).startswith(b"WARC/1.1\r\nWARC-Type: warcinfo")
    end = first_offset
    for result, (offset, length) in zip(ALL_RESULTS, locations, strict=True):
        assert offset == end  # members are contiguous
        member = gzip.decompress(data[offset:offset + length])
        assert member.startswith(b"WARC/1.1\r\n")
        assert f"WARC-Target-URI: {result.final_url}\r\n".encode() in member
        assert member.endswith(result.body + b"\r\n\r\n")
        end = offset + length
    assert end == len(data)


def test_records_are_compressed_at_the_default_level_not_warcios_level_9():
    record = build_response_record(make_result("http://a.test/", HTML * 200))
    # gzip header byte 8 (XFL) is 2 for zlib level 9, 4 for level 1, 0 for levels 2..8
    assert record[:2] == b"\x1f\x8b" and record[8] == 0 and GZIP_LEVEL == 6
    assert gzip.decompress(record).endswith(HTML * 200 + b"\r\n\r\n")


def test_archive_iterator_reads_whole_file_and_digests_verify(warc):
    data, locations = warc
    iterator = ArchiveIterator(io.BytesIO(data), check_digests="raise")
    seen = []
    for record in iterator:
        while record.raw_stream.read(4096):  # digests are checked when the record is read out
            pass
        assert record.digest_checker.passed is not False
        seen.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI"),
                     record.rec_headers.get_header("WARC-Payload-Digest"),
                     record.digest_checker.passed,
                     (iterator.get_record_offset(), iterator.get_record_length())))
    assert seen[0][:2] == ("warcinfo", None)
    assert seen[1:] == [
        ("response", result.final_url, sha1_b32(result.body), True, location)
        for result, location in zip(ALL_RESULTS, locations, strict=True)]


def test_content_stream_would_decode_so_read_record_does_not_use_it(warc):
    data, locations = warc
    stream = io.BytesIO(data)
    stream.seek(locations[ALL_RESULTS.index(GZIPPED_RESULT)][0])
    record = next(iter(ArchiveIterator(stream)))
    assert record.content_stream().read().startswith(b"<html>compressible")


def test_response_record_headers():
    record = gzip.decompress(build_response_record(HTML_RESULT))
    head, _, _ = record.partition(b"\r\n\r\n")
    fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    assert fields["WARC-Type"] == "response"
    assert fields["WARC-Date"] == "2024-05-01T12:30:00.250000Z"
    assert fields["WARC-Target-URI"] == "https://example.com/"
    assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", fields["WARC-Record-ID"])
    assert fields["WARC-Payload-Digest"] == sha1_b32(HTML)
    assert fields["Content-Type"] == "application/http; msgtype=response"
    block = record[len(head) + 4:-4]
    assert int(fields["Content-Length"]) == len(block)
    assert fields["WARC-Block-Digest"] == sha1_b32(block)
    assert block.startswith(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n")
    assert "WARC-Truncated" not in fields


def test_an_ftp_retrieval_is_a_resource_record_of_the_payload_alone():
    body = b"<html><body>from ftp</body></html>"
    result = make_result("ftp://files.example/doc.html", body, reason="")
    result = FetchResult(**{**result.__dict__, "content_type": "text/html"})
    data = build_response_record(result)
    record = gzip.decompress(data)
    head, _, _ = record.partition(b"\r\n\r\n")
    fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    assert fields["WARC-Type"] == "resource"
    assert fields["Content-Type"] == "text/html"
    assert fields["WARC-Target-URI"] == "ftp://files.example/doc.html"
    view = read_record(data, 0)
    assert (view.record_type, view.http_status, view.payload) == ("resource", None, body)


def test_response_record_ids_are_unique_and_date_can_be_given():
    first = gzip.decompress(build_response_record(HTML_RESULT, warc_date="2020-01-02T03:04:05Z"))
    second = gzip.decompress(build_response_record(HTML_RESULT))
    assert b"WARC-Date: 2020-01-02T03:04:05Z\r\n" in first
    ids = [re.search(rb"WARC-Record-ID: (\S+)", r).group(1) for r in (first, second)]
    assert ids[0] != ids[1]


def test_http2_status_line_gets_a_standard_reason_and_no_pseudo_headers():
    record = gzip.decompress(build_response_record(HTTP2_RESULT))
    assert b"\r\n\r\nHTTP/2 200 OK\r\ncontent-type: text/html\r\n\r\n" in record
    assert b":status" not in record


def test_unknown_status_without_reason_keeps_bare_code():
    result = make_result("https://example.com/x", b"x", status=299, reason="")
    view = read_record(build_response_record(result), 0)
    assert view.http_status == 299


def test_header_values_cannot_inject_lines():
    result = make_result("https://example.com/x", b"x", headers=(
        ("X-Evil", "a\r\nWARC-Type: metadata"),))
    view = read_record(build_response_record(result), 0)
    assert view.http_headers == (("X-Evil", "a  WARC-Type: metadata"),)
    assert view.record_type == "response"


def test_truncated_body_is_marked():
    result = make_result("https://example.com/big", b"partial", truncated=True)
    view = read_record(build_response_record(result), 0)
    assert view.warc_headers["WARC-Truncated"] == "length"
    assert view.payload == b"partial"


def test_response_without_body_or_status_is_refused():
    builder = WarcFileBuilder("x.warc.gz", "beam-crawler/0.1")
    size = builder.size
    with pytest.raises(ValueError):
        builder.add(make_result("https://example.com/x", None))
    with pytest.raises(ValueError):
        build_response_record(make_result("https://example.com/x", b"", status=None))
    assert builder.size == size
    assert builder.count == 0


def test_warcinfo_record():
    data = build_warcinfo_record("crawl-1.warc.gz", "beam-crawler/0.1",
                                 {"operator": "ops@example.com", "isPartOf": "test\r\nx: y"},
                                 warc_date="2024-05-01T00:00:00Z")
    view = read_record(data, 0)
    assert view.record_type == "warcinfo"
    assert view.warc_headers["WARC-Filename"] == "crawl-1.warc.gz"
    assert view.warc_headers["WARC-Date"] == "2024-05-01T00:00:00Z"
    assert view.warc_headers["Content-Type"] == "application/warc-fields"
    assert view.target_uri is None
    assert view.http_status is None
    lines = view.payload.decode().splitlines()
    assert "software: beam-crawler/0.1" in lines
    assert "format: WARC File Format 1.1" in lines
    assert "operator: ops@example.com" in lines
    assert "isPartOf: test  x: y" in lines


def test_builder_records_file_basename_in_warcinfo():
    builder = WarcFileBuilder("gs://bucket/warc/2024/05/01/crawl-x.warc.gz", "c/1")
    view = read_record(builder.getvalue(), 0)
    assert view.warc_headers["WARC-Filename"] == "crawl-x.warc.gz"


def test_read_record_at_a_bad_offset_raises_value_error(warc):
    data, locations = warc
    with pytest.raises(ValueError):
        read_record(data, locations[0][0] + 3)
    with pytest.raises(ValueError):
        read_record(data, len(data))


def test_payload_digest_matches_warc_payload_digest():
    assert payload_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
    for result in ALL_RESULTS:
        record = gzip.decompress(build_response_record(result))
        digest = re.search(rb"WARC-Payload-Digest: (\S+)", record).group(1).decode()
        assert payload_digest(result.body) == digest


def test_the_digest_computed_at_fetch_is_written_and_warcio_verifies_both_digests():
    import dataclasses

    from warcio.archiveiterator import ArchiveIterator

    from transforms.core.digests import with_digest

    for result in ALL_RESULTS:
        fetched = with_digest(result)
        data = build_response_record(fetched)
        records = list(ArchiveIterator(io.BytesIO(data), check_digests="raise"))
        assert records[0].rec_headers.get_header("WARC-Payload-Digest") == \
            fetched.payload_digest
    # The writer trusts the digest it is given (it does not hash the payload again): a wrong
    # one is written as it is, and the check catches it.
    wrong = dataclasses.replace(with_digest(ALL_RESULTS[0]), payload_digest="sha1:" + "A" * 32)
    with pytest.raises(Exception, match="digest"):
        list(ArchiveIterator(io.BytesIO(build_response_record(wrong)), check_digests="raise"))


def test_format_warc_date():
    assert format_warc_date(0) == "1970-01-01T00:00:00.000000Z"
    assert format_warc_date(FETCHED_AT) == "2024-05-01T12:30:00.250000Z"


def test_warc_filename_layout():
    name = warc_filename("gs://bucket/warc/", 7, 42, FETCHED_AT, token="0123abcd")
    assert name == "gs://bucket/warc/2024/05/01/crawl-20240501123000-007-000042-0123abcd.warc.gz"
    assert warc_filename("", 1, 2, 0, token="ffffffff") == (
        "1970/01/01/crawl-19700101000000-001-000002-ffffffff.warc.gz")


def test_warc_filename_random_part_avoids_collisions():
    names = {warc_filename("warc", 0, 0, FETCHED_AT) for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert re.fullmatch(r"warc/2024/05/01/crawl-20240501123000-000-000000-[0-9a-f]{8}"
                            r"\.warc\.gz", name)
