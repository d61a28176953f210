"""Server-side politeness checks (pipeline.demo.log) over hand-made request logs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipeline.demo.log import (
    PolitenessReport,
    max_concurrency,
    min_start_gap,
    politeness_report,
)


@dataclass(frozen=True)
class Hit:
    path: str
    start: float
    end: float


def _log(*spans: tuple[str, float, float]) -> list[Hit]:
    return [Hit(*span) for span in spans]


# --- max_concurrency ---------------------------------------------------------------------------


def test_no_requests_means_no_concurrency():
    assert max_concurrency([]) == 0


def test_sequential_requests_have_concurrency_one():
    assert max_concurrency(_log(("/a", 0, 1), ("/b", 2, 3), ("/c", 4, 4.5))) == 1


def test_a_request_starting_as_another_ends_does_not_overlap():
    assert max_concurrency(_log(("/a", 0, 1), ("/b", 1, 2), ("/c", 2, 3))) == 1


def test_overlapping_requests_are_counted():
    log = _log(("/a", 0, 10), ("/b", 1, 3), ("/c", 2, 4), ("/d", 5, 6))
    assert max_concurrency(log) == 3


def test_identical_spans_overlap():
    assert max_concurrency(_log(("/a", 1, 2), ("/a", 1, 2))) == 2


def test_order_of_the_log_does_not_matter():
    log = _log(("/a", 0, 10), ("/b", 1, 3), ("/c", 2, 4))
    assert max_concurrency(list(reversed(log))) == max_concurrency(log) == 3


# --- min_start_gap -----------------------------------------------------------------------------


@pytest.mark.parametrize("log", [[], _log(("/a", 0, 1))])
def test_min_gap_needs_two_requests(log):
    assert min_start_gap(log) is None


def test_min_gap_is_the_smallest_gap_between_consecutive_starts():
    log = _log(("/c", 5.0, 5.1), ("/a", 0.0, 0.1), ("/b", 1.25, 1.3), ("/d", 7.0, 7.2))
    assert min_start_gap(log) == pytest.approx(1.25)


def test_simultaneous_starts_have_gap_zero():
    assert min_start_gap(_log(("/a", 3, 4), ("/b", 3, 5))) == 0


# --- politeness_report -------------------------------------------------------------------------


def test_polite_log():
    log = _log(("/robots.txt", 0, 0.1), ("/", 1, 1.2), ("/a", 2, 2.1), ("/b", 3.5, 3.6))
    assert politeness_report(log) == PolitenessReport(
        requests=4, max_concurrent=1, min_gap=1.0, robots_first=True, duplicates=0)


def test_robots_first_looks_at_the_earliest_start_not_the_log_order():
    log = _log(("/", 1, 1.2), ("/robots.txt", 0, 0.1))
    assert politeness_report(log).robots_first is True


def test_robots_not_first():
    log = _log(("/", 0, 0.2), ("/robots.txt", 1, 1.1), ("/a", 2, 2.1))
    assert politeness_report(log).robots_first is False


def test_no_robots_request_at_all():
    assert politeness_report(_log(("/", 0, 1))).robots_first is False


def test_empty_log():
    assert politeness_report([]) == PolitenessReport(
        requests=0, max_concurrent=0, min_gap=None, robots_first=False, duplicates=0)


def test_duplicates_count_repeated_paths_but_not_robots_txt():
    log = _log(("/robots.txt", 0, 0.1), ("/a", 1, 1.1), ("/a", 2, 2.1), ("/b", 3, 3.1),
               ("/a", 4, 4.1), ("/robots.txt", 5, 5.1), ("/b", 6, 6.1))
    report = politeness_report(log)
    assert report.duplicates == 3  # /a twice more, /b once more
    assert report.requests == 7


def test_impolite_log_is_visible_in_the_report():
    log = _log(("/robots.txt", 0, 0.5), ("/a", 0.2, 0.6), ("/b", 0.25, 0.7))
    report = politeness_report(log)
    assert report.max_concurrent == 3
    assert report.min_gap == pytest.approx(0.05)


def test_zero_length_requests_count_as_open():
    assert max_concurrency(_log(("/a", 1.0, 1.0))) == 1
    assert max_concurrency(_log(("/long", 0.0, 10.0), ("/instant", 5.0, 5.0))) == 2
