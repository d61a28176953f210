"""The pure parts of pipeline.local.driver: totals over hosts-table rows and the printed reports."""

from __future__ import annotations

import re
import time

from pipeline.local.driver import HostRow, Totals, format_progress, format_summary, totals_of
from transforms.core.records import HostStats
from transforms.formats.rows import host_row
from transforms.formats.schema import HOST_FAMILY


def _host(name: str, **values) -> HostRow:
    return HostRow(name, {k: str(v) for k, v in values.items()})


HOSTS = [
    _host("a.example", fetched=10, errors=1, bytes=1000, robots_blocked=2, queued=0,
          lease_active=0, delay=1.0, robots_status="parsed", robots_rules=0, crawl_delay=""),
    _host("b.example", fetched=30, errors=0, bytes=5000, dedup_dropped=4, queued=5,
          lease_active=1, delay=2.5, robots_status="parsed", robots_rules=3, crawl_delay=2.5),
    _host("127.0.0.2:8081", fetched=0, errors=3, filtered=7, accepted=9, queued=2,
          lease_active=0, robots_status="unavailable"),
]


# --- HostRow and totals_of ---------------------------------------------------------------------


def test_host_row_number_tolerates_missing_and_garbage_values():
    row = _host("h", fetched=3, delay="1.5", queued="n/a")
    assert row.number("fetched") == 3.0
    assert row.number("delay") == 1.5
    assert row.number("queued") == 0.0
    assert row.number("absent") == 0.0


def test_totals_sum_the_counters():
    t = totals_of(HOSTS)
    assert t["fetched"] == 40
    assert t["errors"] == 4
    assert t["bytes"] == 6000
    assert t["robots_blocked"] == 2
    assert t["dedup_dropped"] == 4
    assert t["filtered"] == 7
    assert t["accepted"] == 9
    assert t["queued"] == 7


def test_totals_count_hosts_leases_and_active_hosts():
    t = totals_of(HOSTS)
    assert t.hosts == 3
    assert t.leases == 1  # only b.example has a lease out
    assert t.active_hosts == 2  # b.example (lease, queue) and 127.0.0.2:8081 (queue)


def test_a_host_with_a_lease_but_empty_queue_is_active():
    t = totals_of([_host("h", lease_active=1, queued=0)])
    assert (t.active_hosts, t.leases) == (1, 1)


def test_unknown_counter_reads_as_zero():
    assert totals_of(HOSTS)["nonexistent"] == 0


def test_no_hosts():
    t = totals_of([])
    assert (t.hosts, t.active_hosts, t.leases, t["fetched"]) == (0, 0, 0, 0)
    assert t.idle


def test_idle_needs_an_empty_queue_and_no_lease():
    assert not totals_of(HOSTS).idle
    assert not totals_of([_host("h", queued=1)]).idle
    assert not totals_of([_host("h", lease_active=1)]).idle
    assert totals_of([_host("h", fetched=12, queued=0, lease_active=0)]).idle


def test_snapshot_changes_when_any_counter_changes():
    before = totals_of(HOSTS).snapshot()
    assert totals_of(HOSTS).snapshot() == before
    more = [*HOSTS[:2], _host("127.0.0.2:8081", errors=4, filtered=7, accepted=9, queued=2)]
    assert totals_of(more).snapshot() != before


def test_totals_read_rows_written_by_host_row():
    # The hosts table is written by transforms.formats.rows.host_row and read back here.
    stats = [HostStats("a.example", 1.0, fetched=5, queued=2, lease_active=True, delay=1.5),
             HostStats("b.example", 2.0, fetched=1, errors=2, lease_active=False)]
    rows = [HostRow(r.key, r.cells[HOST_FAMILY]) for r in map(host_row, stats)]
    t = totals_of(rows)
    assert (t["fetched"], t["errors"], t["queued"]) == (6, 2, 2)
    assert (t.hosts, t.leases, t.active_hosts) == (2, 1, 1)
    assert rows[0].number("delay") == 1.5


# --- format_progress ---------------------------------------------------------------------------


def test_progress_line_shows_the_figures():
    line = format_progress(totals_of(HOSTS), rate=12.34, elapsed=5.0)
    assert "\n" not in line
    assert re.search(r"pages\s+40\b", line)
    assert re.search(r"\b12\.3 pages/s", line)
    assert re.search(r"hosts active\s+2/3", line)
    assert re.search(r"queued\s+7\b", line)
    assert re.search(r"errors\s+4\b", line)
    assert re.search(r"robots-blocked\s+2\b", line)
    assert line.startswith("[   5.0s]")


def test_progress_line_of_an_empty_table():
    line = format_progress(Totals(), rate=0.0, elapsed=0.0)
    assert re.search(r"pages\s+0\b", line)
    assert "0.0 pages/s" in line


# --- format_summary ----------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_summary_has_reason_and_totals():
    text = format_summary(HOSTS, totals_of(HOSTS), elapsed=8.0, reason="reached --max_pages 40")
    lines = _lines(text)
    assert lines[0] == "Crawl stopped: reached --max_pages 40"
    assert re.search(r"pages fetched\s+40$", text, re.M)
    assert re.search(r"pages/s\s+5\.00$", text, re.M)
    assert re.search(r"bytes\s+6000$", text, re.M)
    assert re.search(r"errors\s+4$", text, re.M)
    assert re.search(r"robots-blocked\s+2$", text, re.M)
    assert re.search(r"dedup-dropped\s+4$", text, re.M)
    assert re.search(r"filtered \(policy\)\s+7$", text, re.M)
    assert re.search(r"still queued\s+7$", text, re.M)
    assert re.search(r"hosts\s+3$", text, re.M)
    assert re.search(r"wall time\s+8\.0 s$", text, re.M)


def test_summary_with_zero_elapsed_has_zero_rate():
    text = format_summary(HOSTS, totals_of(HOSTS), elapsed=0.0, reason="x")
    assert re.search(r"pages/s\s+0\.00$", text, re.M)


def _host_lines(text: str, names: list[str]) -> list[str]:
    return [line for line in _lines(text) if line.split() and line.split()[0] in names]


def test_summary_lists_hosts_by_pages_descending():
    text = format_summary(HOSTS, totals_of(HOSTS), elapsed=1.0, reason="idle")
    names = [h.host for h in HOSTS]
    rows = _host_lines(text, names)
    assert [r.split()[0] for r in rows] == ["b.example", "a.example", "127.0.0.2:8081"]
    b = rows[0].split()
    assert b == ["b.example", "30", "0", "0", "5", "2.50", "parsed", "3", "2.50"]
    a = rows[1].split()
    assert a == ["a.example", "10", "1", "2", "0", "1.00", "parsed", "0", "-"]
    other = rows[2].split()
    assert other == ["127.0.0.2:8081", "0", "3", "0", "2", "0.00", "unavailable", "-", "-"]


def test_summary_has_a_header_above_the_hosts():
    text = format_summary(HOSTS, totals_of(HOSTS), elapsed=1.0, reason="idle")
    header = next(line for line in _lines(text) if line.split()[:1] == ["host"])
    assert header.split() == ["host", "pages", "errors", "blocked", "queued", "delay", "robots",
                              "rules", "crawl-delay"]
    lines = _lines(text)
    assert set(lines[lines.index(header) + 1].strip()) == {"-"}
    assert "more hosts" not in text


def test_summary_cuts_the_host_list_at_the_limit():
    hosts = [_host(f"h{i:02d}.example", fetched=i) for i in range(25)]
    text = format_summary(hosts, totals_of(hosts), elapsed=1.0, reason="idle", limit=20)
    names = [h.host for h in hosts]
    shown = [line.split()[0] for line in _host_lines(text, names)]
    assert shown == [f"h{i:02d}.example" for i in range(24, 4, -1)]
    assert _lines(text)[-1].strip() == "... and 5 more hosts"


def test_summary_at_exactly_the_limit_has_no_more_line():
    hosts = [_host(f"h{i}", fetched=i) for i in range(3)]
    text = format_summary(hosts, totals_of(hosts), elapsed=1.0, reason="idle", limit=3)
    assert "more hosts" not in text


def test_summary_without_hosts():
    text = format_summary([], Totals(), elapsed=2.0, reason="pipeline finished")
    assert _lines(text)[0] == "Crawl stopped: pipeline finished"
    assert re.search(r"pages fetched\s+0$", text, re.M)
    assert "more hosts" not in text


def test_summary_shows_the_robots_rules_and_crawl_delay_each_host_read():
    # What the frontier writes (HostStats -> host_row) is what the summary shows per host.
    stats = [HostStats("polite.example", 1.0, fetched=3, robots_status="parsed", robots_rules=2,
                       crawl_delay=0.5),
             HostStats("plain.example", 1.0, fetched=2, robots_status="allow_all")]
    hosts = [HostRow(r.key, r.cells[HOST_FAMILY]) for r in map(host_row, stats)]
    rows = _host_lines(format_summary(hosts, totals_of(hosts), elapsed=1.0, reason="idle"),
                       ["polite.example", "plain.example"])
    assert rows[0].split()[-3:] == ["parsed", "2", "0.50"]
    assert rows[1].split()[-3:] == ["allow_all", "-", "-"]


def test_summary_shows_the_scope_and_the_loop_latency_over_every_host():
    hosts = [_host("a.example", fetched=5, out_of_scope=3, loop_latency="20:5,200:4"),
             _host("b.example", fetched=5, out_of_scope=1, loop_latency="1000:1"),
             _host("c.example", fetched=1)]
    text = format_summary(hosts, totals_of(hosts), elapsed=1.0, reason="idle", scope="host")
    assert re.search(r"scope\s+host \(4 links out of scope\)$", text, re.M)
    assert re.search(r"loop latency\s+p50 20 ms, p90 200 ms, p99 1000 ms \(10 links; upper "
                     r"bucket edges\)$", text, re.M)
    quiet = format_summary(HOSTS, totals_of(HOSTS), elapsed=1.0, reason="idle")
    assert re.search(r"scope\s+any \(0 links out of scope\)$", quiet, re.M)
    assert "no link came through the loop" in quiet


def _counters(monkeypatch, unsettled):
    from pipeline.local import driver

    monkeypatch.setattr(driver.fetch_service, "pause_leases", lambda: None)
    monkeypatch.setattr(driver.fetch_service, "leases_outstanding", lambda: 0)
    monkeypatch.setattr(driver.drain, "unsettled", unsettled)
    monkeypatch.setattr(driver, "unwritten_rows", lambda: 0)
    return driver


def test_the_drain_stops_waiting_once_nothing_has_moved_for_the_stuck_period(monkeypatch):
    driver = _counters(monkeypatch, lambda: 3)  # three results whose rows never come
    started = time.monotonic()
    assert driver._drain(timeout=30, settle=0.1, stuck=0.5) is False
    assert 0.5 <= time.monotonic() - started < 3


def test_the_drain_waits_while_rows_keep_coming_and_ends_when_all_are_written(monkeypatch):
    left = iter([9, 9, 8, 8, 7, 6, 6, 5, 4, 3, 2, 1] + [0] * 100)
    driver = _counters(monkeypatch, lambda: next(left))
    # Each value holds for 0.1 s (one poll) at most twice, less than ``stuck``: never cut short.
    assert driver._drain(timeout=30, settle=0.3, stuck=0.5) is True
