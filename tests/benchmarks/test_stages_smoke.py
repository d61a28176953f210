"""The per-stage benchmark harness runs (tiny corpus, one repetition) and writes its figures."""

from __future__ import annotations

import json

from benchmarks.stages import main, messy_variant
from transforms.core.urls import canonicalize_url


def test_the_stage_benchmark_runs_and_writes_positive_figures(tmp_path, capsys):
    out = tmp_path / "stages.json"
    results = main(["--quick", "--out", str(out)])
    written = json.loads(out.read_text())
    assert written["pages"] == results["pages"] > 0 and written["unique_links"] > 0
    for key in ("extract_pages_per_s", "canonical_urls_per_s", "canonical_messy_urls_per_s",
                "w3lib_canonical_urls_per_s", "robots_decisions_per_s", "per_link_us",
                "extract_content_pages_per_s", "extract_stage_pages_per_s", "signature_ms",
                "text_words"):
        assert written[key]["median"] > 0, key
    signature = written["signature_ms"]
    assert 0 < signature["median"] <= signature["max"] and 0 < signature["mean"]
    printed = capsys.readouterr().out
    assert "link extraction, pages/s" in printed and "ours / w3lib" in printed
    assert "extract stage + content, pages/s" in printed and "MinHash signature" in printed


def test_messy_variants_canonicalize_back_to_the_link():
    for url in ("http://docs.local/a/b.html", "https://demo.local/x?page=2"):
        variant = messy_variant(url)
        assert variant != url and canonicalize_url(variant) == url
