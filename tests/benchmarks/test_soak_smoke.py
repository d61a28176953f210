"""The soak benchmark: its figures, its test bed, and a smoke soak (5,000 pages on the
DirectRunner) whose memory slope and peak would fail the suite if memory grew with the crawl
again as it did (the trap crawl of the memory issue grew 250 KB per page). The bounds are far
looser than ``make bench-soak``'s 20 KB/page: in the first few thousand pages the bounded
caches are still filling (contents seen, the duplicate stages' recent rows, seen filters) and
the backlog's sawtooth is as large as the trend, so a short run measures 30-50 KB/page."""

from __future__ import annotations

import gzip
import json
import os
import urllib.request
from pathlib import Path

import pytest

from benchmarks.soak import Sample, group_rss_mb, main, slope_kb_per_page
from benchmarks.soak_site import SoakSite

SMOKE_PAGES = 5_000
SMOKE_WARMUP = 1_500
SMOKE_MAX_SLOPE_KB = 100.0
SMOKE_MAX_PEAK_MB = 800.0


def test_the_slope_is_the_least_squares_fit_past_the_warmup():
    samples = [Sample(t, pages, rss, 0.0) for t, pages, rss in
               [(0, 0, 50.0), (5, 1000, 400.0), (10, 2000, 110.0), (15, 3000, 120.0),
                (20, 4000, 130.0)]]
    # 10 MB per 1,000 pages past the warm-up (the spike before it is left out)
    assert slope_kb_per_page(samples, warmup=2000) == pytest.approx(10 * 1024 / 1000)
    assert slope_kb_per_page(samples, warmup=5000) is None


def test_the_resident_set_of_this_process_group_is_counted():
    python, jvm = group_rss_mb(os.getpgrp())
    assert python > 10 and jvm >= 0


def test_the_soak_site_serves_generated_pages_traps_dead_links_and_faults():
    with SoakSite(hosts=2, pages_per_host=50, large_body_bytes=1 << 20) as site:
        seeds = site.seed_urls()
        assert len(seeds) == 4
        page = urllib.request.urlopen(seeds[0], timeout=5).read().decode()
        assert 'href="/p/1"' in page and "?sid=" in page and "/cal/" in page
        assert site.dead_url(0).split("/")[2] in page
        with pytest.raises(OSError):
            urllib.request.urlopen(site.dead_url(0), timeout=2)
        large = urllib.request.urlopen(f"{site.faults_base}/large/1", timeout=10).read()
        assert len(large) == 1 << 20
        request = urllib.request.Request(f"{site.faults_base}/bomb",
                                         headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.headers["Content-Encoding"] == "gzip"
            head = gzip.GzipFile(fileobj=answer).read(1 << 16)
        assert head == bytes(1 << 16)
        assert site.fetches() == 3


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_a_smoke_soak_keeps_memory_flat(tmp_path: Path):
    code = main(["--pages", str(SMOKE_PAGES), "--warmup", str(SMOKE_WARMUP), "--interval", "2",
                 "--hosts", "3", "--pages-per-host", "3000", "--out-dir", str(tmp_path),
                 "--timeout", "420", "--max-slope-kb", str(SMOKE_MAX_SLOPE_KB),
                 "--max-peak-mb", str(SMOKE_MAX_PEAK_MB)])
    result = json.loads((tmp_path / "soak.json").read_text())
    assert result["pages"] >= SMOKE_PAGES * 0.95, result["pages"]
    assert (tmp_path / "soak.png").stat().st_size > 0
    assert code == 0, (result["slope_kb_per_page"], result["peak_rss_mb"])
