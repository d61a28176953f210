"""The end-to-end benchmark's pure parts: the access log, the server-side figures, the test
bed's robots.txt and nginx configuration, the summary and its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.e2e_report import Regime, markdown, summarize
from benchmarks.server_metrics import crawl_metrics, pages_over_time
from benchmarks.testbed import (
    LOG_FORMAT,
    HostedSite,
    LoggedRequest,
    Site,
    nginx_conf,
    parse_access_log,
)

A = "127.0.0.11:8080"
B = "127.0.0.12:8080"


def req(path: str, start: float, end: float, authority: str = A, status: int = 200
        ) -> LoggedRequest:
    return LoggedRequest(authority, path, status, 100, start, end, "bot/1")


def test_access_log_lines_become_requests_with_start_and_end():
    text = ('1700000000.250 0.050 127.0.0.11:8080 200 5120 "GET /a/b.html?x=1 HTTP/1.1" '
            '"beam-crawler/0.1 (+x)"\n'
            'garbage line\n'
            '1700000001.000 0.000 127.0.0.12:8080 404 0 "GET /robots.txt HTTP/1.1" "-"\n')
    got = parse_access_log(text)
    assert [(r.authority, r.path, r.status, r.bytes) for r in got] == [
        (A, "/a/b.html?x=1", 200, 5120), (B, "/robots.txt", 404, 0)]
    assert got[0].start == pytest.approx(1700000000.2) and got[0].end == 1700000000.25
    assert got[0].user_agent == "beam-crawler/0.1 (+x)"


def test_the_log_format_has_what_the_parser_reads():
    for variable in ("$msec", "$request_time", "$server_addr:$server_port", "$status",
                     '"$request"', '"$http_user_agent"'):
        assert variable in LOG_FORMAT


def test_duplicates_disallowed_robots_first_and_gaps_per_host():
    robots = {A: "User-agent: *\nDisallow: /private/\n", B: "User-agent: *\nDisallow:\n"}
    log = [req("/robots.txt", 0.0, 0.0), req("/a", 0.5, 0.6), req("/a", 1.0, 1.1),
           req("/private/x", 2.0, 2.1), req("/b", 0.2, 0.3, authority=B),
           req("/robots.txt", 0.4, 0.4, authority=B), req("/missing", 0.9, 0.9, B, status=404)]
    m = crawl_metrics(log, robots, "bot")
    hosts = {h.authority: h for h in m.hosts}
    assert hosts[A].duplicates == 1 and hosts[A].disallowed == 1 and hosts[A].robots_first
    assert hosts[B].robots_first is False and hosts[B].pages == 1  # a 404 is not a page
    assert m.pages == 4 and m.duplicates == 1 and m.disallowed == 1 and not m.robots_first
    assert m.min_gap == pytest.approx(0.2) and m.max_concurrent == 1
    assert m.crawl_seconds == pytest.approx(2.1) and m.pages_per_s == pytest.approx(4 / 2.1)


def test_disallow_rules_are_matched_for_the_crawlers_own_token():
    robots = {A: "User-agent: bot\nDisallow: /x\n\nUser-agent: *\nDisallow:\n"}
    log = [req("/robots.txt", 0, 0), req("/x", 1, 1)]
    assert crawl_metrics(log, robots, "bot").disallowed == 1
    assert crawl_metrics(log, robots, "otherbot").disallowed == 0


def test_concurrency_is_judged_at_the_logs_millisecond_resolution():
    back_to_back = [req("/robots.txt", 0.0, 0.0), req("/a", 0.0, 0.0), req("/b", 0.0, 0.001),
                    req("/c", 0.001, 0.030), req("/d", 0.029, 0.060)]
    assert crawl_metrics(back_to_back, {}, "bot").max_concurrent == 1
    overlapping = [req("/a", 0.0, 0.050), req("/b", 0.010, 0.040), req("/c", 0.020, 0.045)]
    assert crawl_metrics(overlapping, {}, "bot").max_concurrent == 3


def test_pages_over_time_is_cumulative_from_the_launch():
    log = [req("/robots.txt", 10.0, 10.0), req("/a", 10.1, 10.2), req("/b", 10.6, 10.7),
           req("/c", 11.0, 11.4)]
    assert pages_over_time(log, origin=10.0, step=0.5) == [
        (0.0, 0), (0.5, 1), (1.0, 2), (1.5, 3)]
    assert pages_over_time([], origin=0.0) == [(0.0, 0)]


def hosted(tmp_path: Path, **kw) -> HostedSite:
    root = tmp_path / "site"
    (root / "private").mkdir(parents=True)
    for name in ("a.html", "b.html", "private/c.html"):
        (root / name).write_text("<html></html>")
    return HostedSite(Site("s", "", root, "/a.html", **kw), "127.0.0.11", 8080)


def test_robots_txt_asks_for_the_crawl_delay_only_in_the_polite_regime(tmp_path):
    site = hosted(tmp_path, disallow=("/private/",), crawl_delay_in_polite_regime=True,
                  sitemap_pages=10)
    polite, fast = site.robots_txt(0.25), site.robots_txt(None)
    assert "Crawl-delay: 0.25" in polite and "Crawl-delay" not in fast
    assert "Disallow: /private/" in fast
    assert "Sitemap: http://127.0.0.11:8080/sitemap.xml" in fast
    assert hosted(tmp_path / "2").robots_txt(None) == "User-agent: *\nDisallow:\n"


def test_the_sitemap_lists_only_allowed_pages(tmp_path):
    xml = hosted(tmp_path, disallow=("/private/",), sitemap_pages=10).sitemap_xml()
    assert "http://127.0.0.11:8080/a.html" in xml and "b.html" in xml and "private" not in xml


def test_nginx_config_serves_each_site_with_its_robots_and_the_ms_log(tmp_path):
    site = hosted(tmp_path, sitemap_pages=5)
    conf = nginx_conf([site], tmp_path / "run")
    assert f"listen {site.authority};" in conf and f"root {site.site.root};" in conf
    assert f"alias {tmp_path}/run/s.robots.txt;" in conf
    assert f"alias {tmp_path}/run/s.sitemap.xml;" in conf
    assert "log_format bench" in conf and f"access_log {tmp_path}/run/access.log bench;" in conf
    assert "gzip on;" in conf and "gzip_vary on;" in conf
    gzip_types = next(line for line in conf.splitlines() if "gzip_types" in line)
    assert {"text/plain", "text/xml", "application/xml"} <= set(gzip_types.strip(" ;").split())


def run(crawler: str, regime: str, pages: int, crawl_s: float, cpu_s: float, gap: float
        ) -> dict:
    return {"crawler": crawler, "regime": regime,
            "usage": {"wall_s": crawl_s + 1, "cpu_s": cpu_s, "peak_rss_mb": 100.0,
                      "exit_code": 0, "timed_out": False},
            "stack_cpu_s": 0.0, "cpu_per_page_ms": 1000 * cpu_s / pages,
            "metrics": {"pages": pages, "crawl_seconds": crawl_s, "pages_per_s": pages / crawl_s,
                        "duplicates": 0, "disallowed": 0, "max_concurrent": 1, "min_gap": gap,
                        "robots_first": True},
            "timeline": [(0.0, 0), (1.0, pages)]}


def test_summary_gives_medians_ranges_ratios_and_the_share_of_the_bound():
    polite = Regime("polite", 0.2, 1, 100, 60)
    runs = [run("scrapy", "polite", 90, 10.0, 9.0, 0.5),
            run("scrapy", "polite", 80, 10.0, 8.0, 0.5),
            run("scrapy", "polite", 100, 10.0, 10.0, 0.49),
            run("ours", "polite", 95, 10.0, 4.75, 0.51), run("ours", "polite", 95, 10.0, 4.75, 0.5),
            run("ours", "polite", 98, 10.0, 4.9, 0.5)]
    s = summarize(runs, [polite], hosts=2)["polite"]
    assert s["scrapy"]["pages_per_s"] == {"median": 9.0, "min": 8.0, "max": 10.0}
    assert s["ours"]["pages_per_s"]["median"] == 9.5
    assert s["ours"]["percent_of_bound"] == 95.0  # of 2 hosts / 0.2 s = 10 pages/s
    assert s["ratio_pages_per_s"] == pytest.approx(9.5 / 9.0, abs=1e-3)
    assert s["ratio_cpu_per_page"] == pytest.approx(50 / 100, abs=1e-3)
    assert s["scrapy"]["min_gap"] == 0.49 and s["regime"]["bound_pages_per_s"] == 10.0
    table = markdown({"polite": s}, {"date": "d", "machine": "m", "repeat": 3, "sites": ["x"]})
    assert "| pages/s while crawling | 9.0 (8.0..10.0) | 9.5 (9.5..9.8) | 1.06x |" in table
    assert "| % of H/d | 90.0% | 95.0% | |" in table


def test_the_runners_sit_side_by_side_with_ratios_to_scrapy_and_to_the_direct_runner():
    polite = Regime("polite", 0.2, 1, 100, 60)
    runs = [run("scrapy", "polite", 90, 10.0, 9.0, 0.5), run("ours", "polite", 100, 10.0, 5.0, 0.5),
            run("ours-prism", "polite", 100, 5.0, 10.0, 0.5),
            run("ours-flink", "polite", 50, 10.0, 2.5, 0.5)]
    runs[2]["usage"]["peak_group_rss_mb"] = 300.0  # Prism's process counted with the crawler's
    s = summarize(runs, [polite], hosts=2)["polite"]
    assert s["vs_scrapy"]["ours-prism"]["pages_per_s"] == pytest.approx(20 / 9, abs=1e-3)
    assert s["vs_direct"]["ours-prism"] == {"pages_per_s": 2.0, "cpu_per_page": 2.0,
                                            "peak_group_rss": 3.0}
    assert s["vs_direct"]["ours-flink"]["pages_per_s"] == 0.5
    assert s["ours"]["peak_group_rss_mb"]["median"] == 100.0  # no group figure: the process's
    table = markdown({"polite": s}, {"date": "d", "machine": "m", "repeat": 1, "sites": ["x"]})
    assert ("| | Scrapy | ours (DirectRunner) | ours (Prism) | ours (Flink) | "
            "DirectRunner / Prism / Flink vs Scrapy |") in table
    assert ("| pages/s while crawling | 9.0 (9.0..9.0) | 10.0 (10.0..10.0) | 20.0 (20.0..20.0) | "
            "5.0 (5.0..5.0) | 1.11x / 2.22x / 0.56x |") in table
    assert "ours (Prism): pages/s 2.00x, CPU/page 2.00x, peak RSS with the runner 3.00x" in table
