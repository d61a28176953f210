"""Retry decisions, Retry-After, jittered backoff and host-owned backoff."""

import calendar
import random

import pytest

from transforms.core import retry
from transforms.core.retry import HostBackoff

NOW = float(calendar.timegm((2024, 5, 1, 12, 0, 0, 0, 0, 0)))  # Wed, 01 May 2024 12:00:00 GMT


# --- classification -------------------------------------------------------------------------

@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_transient_statuses(status):
    assert retry.is_transient(status, None)


@pytest.mark.parametrize("status", [200, 301, 304, 400, 401, 403, 404, 408, 410, 451, 501, 505])
def test_final_statuses(status):
    assert not retry.is_transient(status, None)


@pytest.mark.parametrize("error", ["timeout", "connection", "disconnected", "payload"])
def test_transient_errors(error):
    assert retry.is_transient(None, error)


@pytest.mark.parametrize("error", ["invalid_url", "protocol", "client", "internal",
                                   "too_many_redirects", "bad_redirect", None])
def test_final_errors(error):
    assert not retry.is_transient(None, error)


def test_a_final_4xx_stays_final_even_if_its_body_broke():
    assert not retry.is_transient(404, "payload")
    assert retry.is_transient(200, "payload")
    assert retry.is_transient(429, "payload")


def test_should_retry_allows_three_attempts_in_all():
    assert retry.MAX_ATTEMPTS == 3
    assert retry.should_retry(1, 503, None)
    assert retry.should_retry(2, None, "timeout")
    assert not retry.should_retry(3, 503, None)
    assert not retry.should_retry(1, 404, None)
    assert retry.should_retry(4, 503, None, max_attempts=5)


# --- Retry-After ----------------------------------------------------------------------------

def test_retry_after_delta_seconds():
    assert retry.parse_retry_after("120", NOW) == 120.0
    assert retry.parse_retry_after(" 0 ", NOW) == 0.0
    assert retry.parse_retry_after("-5", NOW) == 0.0


def test_retry_after_http_date():
    assert retry.parse_retry_after("Wed, 01 May 2024 12:01:30 GMT", NOW) == 90.0
    assert retry.parse_retry_after("Wednesday, 01-May-24 12:00:10 GMT", NOW) == 10.0
    assert retry.parse_retry_after("Wed, 01 May 2024 11:00:00 GMT", NOW) == 0.0


def test_retry_after_is_capped_at_a_day():
    assert retry.parse_retry_after("99999999999999", NOW) == retry.MAX_RETRY_AFTER == 86_400
    assert retry.parse_retry_after("Fri, 31 Dec 2100 00:00:00 GMT", NOW) == 86_400


@pytest.mark.parametrize("value", [None, "", "soon", "1.5", "12s", "Wed, 32 May 2024 12:00 GMT"])
def test_retry_after_garbage_is_none(value):
    assert retry.parse_retry_after(value, NOW) is None


# --- per-URL delay --------------------------------------------------------------------------

@pytest.mark.parametrize(("attempt", "window"), [(1, 2.0), (2, 4.0), (3, 8.0), (10, 1024.0)])
def test_full_jitter_stays_inside_the_exponential_window(attempt, window):
    rng = random.Random(7)
    delays = [retry.retry_delay(attempt, 2.0, None, rng) for _ in range(500)]
    assert all(0.0 <= d <= window for d in delays)
    # Full jitter spreads over the whole window, not just its top.
    assert min(delays) < window * 0.1 and max(delays) > window * 0.9


def test_the_window_is_capped():
    rng = random.Random(1)
    delays = [retry.retry_delay(50, 2.0, None, rng, cap=60.0) for _ in range(200)]
    assert all(0.0 <= d <= 60.0 for d in delays) and max(delays) > 50.0
    assert retry.retry_delay(10_000, 1.0, None, rng) <= 3600.0  # no overflow


def test_retry_after_is_a_lower_bound():
    rng = random.Random(3)
    assert all(retry.retry_delay(1, 1.0, 30.0, rng) == 30.0 for _ in range(50))
    # Above the cap too: the server asked for it.
    assert retry.retry_delay(1, 1.0, 7200.0, rng, cap=60.0) == 7200.0
    # A short Retry-After does not cut a longer jittered delay.
    delays = [retry.retry_delay(5, 10.0, 1.0, rng) for _ in range(200)]
    assert all(d >= 1.0 for d in delays) and max(delays) > 100.0


def test_seeded_delays_are_reproducible_and_attempt_zero_counts_as_one():
    a = [retry.retry_delay(i, 1.0, None, random.Random(42)) for i in range(1, 5)]
    b = [retry.retry_delay(i, 1.0, None, random.Random(42)) for i in range(1, 5)]
    assert a == b
    assert retry.retry_delay(0, 1.0, None, random.Random(42)) == a[0]


# --- host backoff ---------------------------------------------------------------------------

def test_which_failures_slow_the_host():
    for status in (429, 502, 503, 504):
        assert retry.slows_host(status, None)
    for error in ("timeout", "connection", "disconnected"):
        assert retry.slows_host(None, error)
    assert not retry.slows_host(500, None)
    assert not retry.slows_host(None, "payload")
    assert not retry.slows_host(404, None)


def test_a_fresh_host_is_not_slowed():
    hb = HostBackoff()
    assert retry.effective_delay(hb, 1.5, NOW) == 1.5


def test_a_failure_doubles_the_factor_and_sets_slow_until():
    rng = random.Random(5)
    hb = retry.on_failure(HostBackoff(), NOW, None, 10.0, rng)
    assert hb.consecutive_failures == 1 and hb.factor == 2.0
    assert NOW <= hb.slow_until <= NOW + 10.0
    assert retry.effective_delay(hb, 1.0, NOW) == max(2.0, hb.slow_until - NOW)


def test_retry_after_holds_the_whole_host():
    hb = retry.on_failure(HostBackoff(), NOW, 120.0, 1.0, random.Random(0))
    assert hb.slow_until == NOW + 120.0
    assert retry.effective_delay(hb, 1.0, NOW) == 120.0
    assert retry.effective_delay(hb, 1.0, NOW + 100.0) == 20.0
    assert retry.effective_delay(hb, 1.0, NOW + 500.0) == 2.0  # factor only, once it passed


def test_slow_until_never_moves_back():
    rng = random.Random(0)
    hb = retry.on_failure(HostBackoff(), NOW, 600.0, 1.0, rng)
    hb2 = retry.on_failure(hb, NOW + 1, None, 1.0, rng)
    assert hb2.slow_until == NOW + 600.0


def test_the_factor_is_capped():
    rng = random.Random(0)
    hb = HostBackoff()
    for i in range(20):
        hb = retry.on_failure(hb, NOW + i, None, 1.0, rng)
    assert hb.factor == retry.MAX_HOST_FACTOR == 32.0
    assert hb.consecutive_failures == 20


def test_recovery_takes_several_successes():
    hb = HostBackoff(consecutive_failures=4, slow_until=NOW - 1, factor=16.0)
    factors = []
    for _ in range(6):
        hb = retry.on_success(hb)
        factors.append(hb.factor)
    assert factors == [8.0, 4.0, 2.0, 1.0, 1.0, 1.0]
    assert hb.consecutive_failures == 0


def test_a_success_keeps_a_pause_the_server_asked_for():
    hb = retry.on_failure(HostBackoff(), NOW, 300.0, 1.0, random.Random(0))
    hb = retry.on_success(hb)
    assert hb.slow_until == NOW + 300.0
    assert retry.effective_delay(hb, 1.0, NOW + 10) == 290.0


def test_a_host_that_fails_five_times_then_recovers():
    """Delays grow while the host fails, then shrink back to the politeness delay."""
    rng = random.Random(2024)
    politeness, base = 1.0, 2.0
    hb, now = HostBackoff(), NOW
    delays = []
    for _ in range(5):
        hb = retry.on_failure(hb, now, None, base, rng)
        wait = retry.effective_delay(hb, politeness, now)
        delays.append(wait)
        now += wait
    assert hb.consecutive_failures == 5 and hb.factor == 32.0
    recovering = []
    for _ in range(6):
        hb = retry.on_success(hb)
        wait = retry.effective_delay(hb, politeness, now)
        recovering.append(wait)
        now += wait
    assert delays == sorted(delays) and delays[-1] == 32.0
    assert recovering == [16.0, 8.0, 4.0, 2.0, 1.0, 1.0]
    assert hb == HostBackoff(0, hb.slow_until, 1.0) and hb.slow_until < now


def test_a_pause_holds_the_host_without_changing_its_pace():
    hb = retry.HostBackoff(consecutive_failures=1, slow_until=50.0, factor=2.0)
    paused = retry.pause(hb, now=10.0, delay=60.0)
    assert (paused.slow_until, paused.factor, paused.consecutive_failures) == (70.0, 2.0, 1)
    assert retry.pause(hb, now=10.0, delay=5.0).slow_until == 50.0  # never moves back
    assert retry.pause(hb, now=100.0, delay=-1.0).slow_until == 100.0
