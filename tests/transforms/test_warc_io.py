"""``WriteWarc`` on Beam's TestPipeline: records that read back exactly, bodies dropped."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, is_not_empty

from tests.transforms.results import fetch_result
from transforms.core.records import ParsedPage
from transforms.formats.warc import read_record
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
