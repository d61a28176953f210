"""The end-to-end benchmark, tiny: two generated hosts behind nginx, Scrapy and our crawler, both
regimes, one repetition. It proves the harness works (nginx, both crawlers, the log, the
figures, JSON, markdown and the PNG) and that both crawlers are polite by the server's log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.e2e import SMOKE_REGIMES, main
from benchmarks.testbed import find_nginx

pytestmark = pytest.mark.timeout(400)


def test_the_benchmark_compares_both_crawlers_and_writes_json_markdown_and_a_plot(tmp_path):
    assert find_nginx(), "nginx is installed by `make test` (python -m benchmarks.testbed)"
    out = tmp_path / "results"
    lines: list[str] = []
    result = main(["--smoke", "--repeat", "1", "--no-install", "--crawlers", "scrapy,ours",
                   "--out-dir", str(out), "--work-dir", str(tmp_path / "work")],
                  progress=lines.append)
    written = json.loads((out / "e2e.json").read_text())
    assert written["summary"] == json.loads(json.dumps(result["summary"]))
    assert len(written["runs"]) == 2 * len(SMOKE_REGIMES)
    for run in written["runs"]:
        m, who = run["metrics"], f"{run['crawler']} {run['regime']}"
        assert run["usage"]["exit_code"] == 0 and not run["usage"]["timed_out"], who
        assert m["pages"] >= 25, who  # at least one whole generated site
        assert m["disallowed"] == 0 and m["robots_first"] and m["max_concurrent"] == 1, who
        assert run["usage"]["cpu_s"] > 0 and run["usage"]["peak_rss_mb"] > 10, who
        assert run["timeline"][-1][1] == m["pages"], who
        if run["crawler"] == "ours":
            assert m["duplicates"] == 0 and run["stack_cpu_s"] > 0, who
    polite = written["summary"]["polite"]
    delay = polite["regime"]["delay"]
    assert polite["ours"]["min_gap"] >= delay - 0.002  # the log's ms resolution
    assert polite["ours"]["percent_of_bound"] > 0 and polite["ratio_pages_per_s"] > 0
    site = written["summary"]["site"]
    assert site["regime"]["scope"] == "host"
    assert 0.0 <= site["ours"]["idle_share"]["max"] < 1.0
    assert all(len(h["authority"]) for r in written["runs"] for h in r["metrics"]["hosts"])
    # The smoke sites link only to themselves: in scope, nothing takes the loop.
    assert all(text.startswith("- (no link") for text in site["ours"]["loop_latency"])
    table = (out / "e2e.md").read_text()
    assert "| pages/s while crawling |" in table and "idle share" in table
    assert (out / "e2e.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert any(line.startswith("polite #1 ours") for line in lines)
    assert not processes_mentioning(str(tmp_path / "work"))  # nginx and emulators stopped


def processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(args)
    return found


def test_the_benchmark_runs_our_crawler_on_prism_and_counts_its_processes(tmp_path):
    """``make bench`` compares the local runners: ours on Prism, measured like the others, with
    the Prism process it starts in its peak RSS."""
    out = tmp_path / "results"
    result = main(["--smoke", "--repeat", "1", "--no-install", "--regimes", "polite",
                   "--crawlers", "ours,ours-prism", "--out-dir", str(out),
                   "--work-dir", str(tmp_path / "work")], progress=lambda line: None)
    runs = {run["crawler"]: run for run in result["runs"]}
    assert set(runs) == {"ours", "ours-prism"}
    prism, direct = runs["ours-prism"], runs["ours"]
    for run in (prism, direct):
        m = run["metrics"]
        assert run["usage"]["exit_code"] == 0 and not run["usage"]["timed_out"], run["crawler"]
        assert m["pages"] >= 25 and m["duplicates"] == 0 and m["disallowed"] == 0
        assert m["robots_first"] and m["max_concurrent"] == 1
    # Prism is a separate process of the crawler's group (about 37 MB idle): the sampled group
    # counts it; the DirectRunner's crawler starts no process of its own group.
    assert prism["usage"]["peak_children_rss_mb"] > 20
    assert direct["usage"]["peak_children_rss_mb"] < 15  # at most a passing `ps`
    assert prism["usage"]["peak_group_rss_mb"] >= prism["usage"]["peak_rss_mb"]
    assert "Prism unavailable" not in (tmp_path / "work" / "polite-1-ours-prism" / "ours.log"
                                       ).read_text()
    polite = result["summary"]["polite"]
    assert set(polite["vs_direct"]) == {"ours-prism"}
    assert polite["vs_direct"]["ours-prism"]["pages_per_s"] > 0
    table = (out / "e2e.md").read_text()
    assert "| | ours (DirectRunner) | ours (Prism) |" in table
    assert "Against the DirectRunner" in table
