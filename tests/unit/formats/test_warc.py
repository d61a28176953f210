"""Tests for transforms.formats.warc: records round-trip through warcio byte for byte, and
revisit records for identical payloads are accepted by ``warcio check`` and ``cdxj-indexer``."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from transforms.core.digests import payload_digest
from transforms.core.records import CrawlRequest, FetchResult, Revisit
from transforms.formats.warc import (
    GZIP_LEVEL,
    REVISIT_PROFILE,
    WarcFileBuilder,
    build_response_record,
    build_revisit_record,
    build_warcinfo_record,
    capture_date,
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


# --- revisit records -------------------------------------------------------------------------

LATER = FETCHED_AT + 3600.123456
MIRROR_RESULT = FetchResult(**{**HTML_RESULT.__dict__, "final_url": "https://mirror.example/",
                               "request": CrawlRequest(url="https://mirror.example/"),
                               "fetched_at": LATER, "headers": (
    ("Content-Type", "text/html; charset=utf-8"), ("Transfer-Encoding", "chunked"),
    ("ETag", '"v2"'))})


def revisit_of(original: FetchResult) -> Revisit:
    """What the dedup stage records for a later page with ``original``'s payload."""
    return Revisit(original.final_url, capture_date(original), payload_digest(original.body or b""))


def header_fields(record: bytes) -> tuple[str, dict[str, str], bytes]:
    """(version line, WARC header fields, block) of one decompressed record."""
    head, _, rest = record.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert rest.endswith(b"\r\n\r\n")  # the two CRLFs that close every record
    return lines[0], fields, rest[:-4]


@pytest.fixture(name="revisit_file")
def revisit_file_fixture(tmp_path: Path) -> tuple[Path, list[tuple[int, int]]]:
    builder = WarcFileBuilder("dedup.warc.gz", "beam-crawler/0.1")
    locations = [builder.add(HTML_RESULT),
                 builder.add(MIRROR_RESULT, revisit=revisit_of(HTML_RESULT))]
    path = tmp_path / "dedup.warc.gz"
    path.write_bytes(builder.getvalue())
    return path, locations


@pytest.mark.parametrize("fetched_at", [FETCHED_AT, LATER, 1_700_000_000.0, 1.999999])
def test_every_capture_record_is_dated_by_capture_date(fetched_at):
    result = FetchResult(**{**HTML_RESULT.__dict__, "fetched_at": fetched_at})
    ftp = FetchResult(**{**result.__dict__, "final_url": "ftp://files.example/a"})
    expected = format_warc_date(fetched_at)
    assert capture_date(result) == expected
    for data in (build_response_record(result), build_response_record(ftp),
                 build_revisit_record(result, revisit_of(HTML_RESULT))):
        assert read_record(data, 0).warc_headers["WARC-Date"] == expected


def test_revisit_record_headers_follow_the_warc_1_1_identical_payload_profile():
    record = gzip.decompress(build_revisit_record(MIRROR_RESULT, revisit_of(HTML_RESULT)))
    version, fields, block = header_fields(record)
    assert version == "WARC/1.1"
    assert fields["WARC-Type"] == "revisit"
    assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", fields["WARC-Record-ID"])
    assert fields["WARC-Date"] == format_warc_date(LATER)
    assert fields["WARC-Target-URI"] == "https://mirror.example/"
    assert fields["WARC-Profile"] == REVISIT_PROFILE
    assert REVISIT_PROFILE == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    assert fields["WARC-Refers-To-Target-URI"] == "https://example.com/"
    assert fields["WARC-Refers-To-Date"] == "2024-05-01T12:30:00.250000Z"
    assert fields["WARC-Payload-Digest"] == sha1_b32(HTML)
    assert fields["Content-Type"] == "application/http; msgtype=response"
    assert "WARC-Truncated" not in fields
    # The block is the new fetch's status line and headers, with no payload after them.
    assert int(fields["Content-Length"]) == len(block)
    assert fields["WARC-Block-Digest"] == sha1_b32(block)
    assert block == (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                     b'ETag: "v2"\r\n\r\n')


def test_revisit_needs_no_body_and_refers_to_the_given_digest_not_its_own():
    bodiless = MIRROR_RESULT.without_body()
    revisit = Revisit("https://example.com/", "2024-05-01T12:30:00.250000Z", "sha1:" + "B" * 32)
    view = read_record(build_revisit_record(bodiless, revisit), 0)
    assert view.warc_headers["WARC-Payload-Digest"] == "sha1:" + "B" * 32
    assert view.payload == b""


def test_read_record_reads_a_revisit_back(revisit_file):
    path, locations = revisit_file
    with path.open("rb") as stream:
        view = read_record(stream, locations[1][0])
    assert view.record_type == "revisit"
    assert view.target_uri == "https://mirror.example/"
    assert view.http_status == 200
    assert view.http_headers == (("Content-Type", "text/html; charset=utf-8"),
                                 ("ETag", '"v2"'))
    assert view.payload == b""
    assert view.warc_headers["WARC-Refers-To-Target-URI"] == "https://example.com/"
    original = read_record(path.read_bytes(), locations[0][0])
    assert view.warc_headers["WARC-Refers-To-Date"] == original.warc_headers["WARC-Date"]
    assert view.warc_headers["WARC-Payload-Digest"] == \
        original.warc_headers["WARC-Payload-Digest"]


def test_builder_locates_each_record_as_its_own_gzip_member(revisit_file):
    path, locations = revisit_file
    data = path.read_bytes()
    (first, first_length), (second, second_length) = locations
    assert first + first_length == second
    assert second + second_length == len(data)
    member = gzip.decompress(data[second:second + second_length])
    assert member.startswith(b"WARC/1.1\r\nWARC-Type: revisit\r\n")


def test_warcio_check_accepts_a_response_followed_by_its_revisit(revisit_file):
    path, _ = revisit_file
    checked = subprocess.run([str(Path(sys.executable).parent / "warcio"), "check", "-v",
                              str(path)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"response\s+digest pass", checked.stdout)
    assert re.search(r"revisit\s+digest present but not checked", checked.stdout)


def test_cdxj_indexer_lists_both_captures_with_one_digest(revisit_file):
    path, locations = revisit_file
    indexed = subprocess.run([str(Path(sys.executable).parent / "cdxj-indexer"), str(path)],
                             capture_output=True, text=True, check=True)
    lines = [line.split(" ", 2) for line in indexed.stdout.splitlines()]
    entries = {json.loads(fields)["url"]: (key, stamp, json.loads(fields))
               for key, stamp, fields in lines}
    assert set(entries) == {"https://example.com/", "https://mirror.example/"}
    _, stamp, original = entries["https://example.com/"]
    key, revisit_stamp, revisit = entries["https://mirror.example/"]
    assert (original["mime"], original["status"]) == ("text/html", "200")
    assert (revisit["mime"], revisit["status"]) == ("warc/revisit", "200")
    assert original["digest"] == revisit["digest"] == sha1_b32(HTML)
    assert (key, stamp, revisit_stamp) == ("example,mirror)/", "20240501123000",
                                           "20240501133000")
    assert [(int(original["offset"]), int(original["length"])),
            (int(revisit["offset"]), int(revisit["length"]))] == locations


def test_a_revisit_without_http_framing_has_an_empty_untyped_block():
    ftp = FetchResult(**{**MIRROR_RESULT.__dict__, "final_url": "ftp://files.example/a.html"})
    record = gzip.decompress(build_revisit_record(ftp, revisit_of(HTML_RESULT)))
    _, fields, block = header_fields(record)
    assert (fields["WARC-Type"], fields["Content-Length"], block) == ("revisit", "0", b"")
    assert "Content-Type" not in fields
    assert read_record(build_revisit_record(ftp, revisit_of(HTML_RESULT)), 0).payload == b""


def test_a_revisit_without_status_or_digest_is_refused_and_the_file_is_unchanged():
    builder = WarcFileBuilder("x.warc.gz", "beam-crawler/0.1")
    size = builder.size
    with pytest.raises(ValueError):
        builder.add(FetchResult(**{**MIRROR_RESULT.__dict__, "status": None}),
                    revisit=revisit_of(HTML_RESULT))
    with pytest.raises(ValueError):
        builder.add(MIRROR_RESULT, revisit=revisit_of(HTML_RESULT)._replace(payload_digest=""))
    assert (builder.size, builder.count) == (size, 0)
