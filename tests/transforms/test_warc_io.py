"""``WriteWarc`` on Beam's TestPipeline: records that read back exactly, bodies dropped, and
revisit records for pages the dedup stage marked as payload duplicates."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, is_not_empty

from tests.transforms.results import fetch_result
from transforms.core.digests import payload_digest
from transforms.core.records import ParsedPage, Revisit
from transforms.formats.warc import capture_date, format_warc_date, read_record
from transforms.warc_io import WriteWarc


def test_write_warc_writes_records_that_read_back_exactly(tmp_path: Path):
    bodies = [b"<html>one</html>", b"<html>\x00binary\xff</html>", b"\r\n"]
    pages = [ParsedPage(fetch_result(f"http://site.example/{i}", body=b), f"t{i}", (), f"sum{i}")
             for i, b in enumerate(bodies)]
    with TestPipeline() as p:
        stored = (p | beam.Create(pages)
                  | WriteWarc(str(tmp_path / "warc"), roll_bytes=1, roll_seconds=60, shards=2))
        located = stored | beam.Map(lambda s: json.dumps(
            [s.page.fetch.request.url, s.location.file, s.location.offset,
             s.page.fetch.body is None]))
        assert_that(located, is_not_empty())
        located | beam.io.WriteToText(str(tmp_path / "out"))
    lines = [json.loads(line) for f in tmp_path.glob("out*") for line in f.read_text().split("\n")
             if line]
    assert len(lines) == 3
    for url, path, offset, body_dropped in lines:
        assert body_dropped
        record = read_record(Path(path).read_bytes(), offset)
        assert record.target_uri == url
        assert record.payload == bodies[int(url.rsplit("/", 1)[1])]


def test_a_page_with_revisit_set_is_written_as_a_revisit_record(tmp_path: Path):
    body = b"<html>the same payload</html>"
    original = fetch_result("http://site.example/a", body=body)
    mirror = fetch_result("http://mirror.example/a", body=body, fetched_at=1_700_000_100.5,
                          headers=(("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")))
    revisit = Revisit(original.final_url, capture_date(original), payload_digest(body))
    pages = [ParsedPage(original, "a", (), "sum"),
             ParsedPage(mirror, "a", (), "sum", duplicate_of=original.final_url,
                        duplicate_kind="payload", revisit=revisit)]
    with TestPipeline() as p:
        stored = (p | beam.Create(pages)
                  # roll_bytes=0: every page is flushed at once (a revisit adds no bytes).
                  | WriteWarc(str(tmp_path / "warc"), roll_bytes=0, roll_seconds=60, shards=1))
        located = stored | beam.Map(lambda s: json.dumps(
            [s.page.fetch.request.url, s.location.file, s.location.offset, s.location.length,
             s.page.fetch.body is None, s.page.revisit is not None]))
        located | beam.io.WriteToText(str(tmp_path / "out"))
    rows = {row[0]: row for f in tmp_path.glob("out*") for line in f.read_text().split("\n")
            if line for row in [json.loads(line)]}
    assert set(rows) == {original.final_url, mirror.final_url}
    _, path, offset, length, body_dropped, has_revisit = rows[mirror.final_url]
    assert body_dropped and has_revisit
    data = Path(path).read_bytes()
    record = read_record(data[offset:offset + length], 0)
    assert record.record_type == "revisit"
    assert record.payload == b""
    assert record.http_status == 200
    assert record.http_headers == (("Content-Type", "text/html"),)
    assert record.warc_headers["WARC-Date"] == format_warc_date(1_700_000_100.5)
    assert record.warc_headers["WARC-Refers-To-Target-URI"] == original.final_url
    assert record.warc_headers["WARC-Refers-To-Date"] == format_warc_date(1_700_000_000.0)
    assert record.warc_headers["WARC-Payload-Digest"] == payload_digest(body)
    _, first_path, first_offset, *_ = rows[original.final_url]
    first = read_record(Path(first_path).read_bytes(), first_offset)
    assert (first.record_type, first.payload) == ("response", body)
