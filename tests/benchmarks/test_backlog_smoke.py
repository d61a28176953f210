"""The backlog benchmark runs (a few hundred pages): a first job builds a backlog far bigger
than the head, a second job on the same tables resumes it without fetching anything again."""

from __future__ import annotations

import json

import pytest

from benchmarks.backlog import LINKS, deciles, page
from benchmarks.backlog import main as backlog_main
from pipeline.demo.exchange import Hit

pytestmark = pytest.mark.integration


def test_every_generated_page_links_to_thirty_new_ones():
    html = page(7).decode()
    assert html.count("<a href=") == LINKS
    assert '/p/211"' in html and '/p/240"' in html and '/p/241"' not in html


def test_deciles_are_rates_over_tenths_of_the_pages():
    hits = [Hit("h", f"/p/{i}", "GET", float(i) / (1 if i < 50 else 2), 0.0, 200, 0)
            for i in range(100)]
    rates = deciles(hits)
    assert len(rates) == 10 and rates[0] == pytest.approx(1.0) and rates[-1] > rates[0]


def test_the_benchmark_grows_a_backlog_and_a_second_job_resumes_it(tmp_path, capsys):
    out = tmp_path / "backlog.json"
    r = backlog_main(["--smoke", "--resume-pages", "100", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(r))
    assert r["exit_codes"] == [0, 0]
    # Every page links to 30 new ones: the backlog is many times the head (2,000 URLs).
    assert r["pages"] >= 400 and r["backlog_at_end"] > max(4 * 2000, 20 * r["pages"])
    assert len(r["pages_per_s_by_decile"]) == 10 and r["last_to_first_decile"] > 0
    assert len(r["crawler_cpu_ms_per_page_by_decile"]) == 10
    assert all(ms > 0 for ms in r["crawler_cpu_ms_per_page_by_decile"])
    assert sum(r["emulators_cpu_ms_per_page_by_decile"]) > 0
    assert r["state_bytes_per_page"] > 0 and r["rss_mb"]["peak"] > 0
    resume = r["resume"]
    assert resume["pages"] > 0 and resume["first_request_after_s"] is not None
    assert resume["refetched"] == 0  # the second job fetches nothing the first one did
    assert "last decile / first" in capsys.readouterr().out
