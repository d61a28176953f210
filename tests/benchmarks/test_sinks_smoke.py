"""The sink microbenchmark runs against the emulators (tiny corpus, one repetition)."""

from __future__ import annotations

import json

from benchmarks.sinks import main


def test_the_sink_benchmark_writes_warcs_and_rows_and_reports_rates(tmp_path, capsys):
    out = tmp_path / "sinks.json"
    results = main(["--quick", "--out", str(out)])
    written = json.loads(out.read_text())
    assert written["pages"] == results["pages"] == 50
    assert 0 < written["warc_gzip_mb"] < written["page_mb"]
    for key in ("warc_build_mb_per_s", "warc_to_gcs_mb_per_s", "bigtable_rows_per_s"):
        assert written[key]["median"] > 0, key
    assert written["cells_per_row"] >= 10
    assert "rows to the Bigtable emulator" in capsys.readouterr().out
