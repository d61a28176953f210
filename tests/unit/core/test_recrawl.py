"""Recrawl decisions: validators, cache lifetimes, the adaptive interval and fetch history."""

import calendar
from dataclasses import dataclass

import pytest

from transforms.core import recrawl
from transforms.core.recrawl import FetchHistory, Validators

HOUR = 3600.0
DAY = 24 * HOUR
# Sun, 06 Nov 1994 08:49:37 GMT, the RFC 9110 example date.
T_1994 = float(calendar.timegm((1994, 11, 6, 8, 49, 37, 0, 0, 0)))


@dataclass(frozen=True)
class Bounds:
    default_interval: float = DAY
    min_interval: float = HOUR
    max_interval: float = 30 * DAY


BOUNDS = Bounds()


# --- HTTP dates -----------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    "Sun, 06 Nov 1994 08:49:37 GMT",  # IMF-fixdate
    "Sunday, 06-Nov-94 08:49:37 GMT",  # RFC 850
    "Sun Nov  6 08:49:37 1994",  # asctime
    "  sun, 06 nov 1994 08:49:37 gmt  ",
    "Sun, 6 Nov 1994 08:49:37 GMT",
])
def test_the_three_http_date_forms_parse(value):
    assert recrawl.parse_http_date(value) == T_1994


def test_two_digit_years_pivot_at_1970():
    assert recrawl.parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT") == 0.0
    assert recrawl.parse_http_date("Wednesday, 01-Jan-25 00:00:00 GMT") == float(
        calendar.timegm((2025, 1, 1, 0, 0, 0, 0, 0, 0)))


@pytest.mark.parametrize("value", [
    None, "", "0", "-1", "tomorrow", "Sun, 31 Feb 2024 00:00:00 GMT",
    "Sun, 06 Foo 1994 08:49:37 GMT",
    "Sun, 06 Nov 1994 25:00:00 GMT", "2024-01-01T00:00:00Z",
])
def test_invalid_http_dates_are_none(value):
    assert recrawl.parse_http_date(value) is None


def test_a_leap_second_reads_as_59():
    assert recrawl.parse_http_date("Sun, 06 Nov 1994 08:49:60 GMT") == T_1994 + 22


# --- validators -----------------------------------------------------------------------------

def test_validators_are_read_case_insensitively():
    headers = (("ETag", '"abc"'), ("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT"))
    assert recrawl.validators_from_headers(headers) == Validators(
        '"abc"', "Sun, 06 Nov 1994 08:49:37 GMT")


def test_missing_or_empty_validators_are_none_and_weak_etags_are_kept():
    assert recrawl.validators_from_headers(()) == Validators(None, None)
    assert recrawl.validators_from_headers((("etag", " "), ("ETAG", 'W/"x"'))).etag == 'W/"x"'


def test_conditional_headers():
    assert recrawl.conditional_headers(Validators(None, None)) == {}
    assert recrawl.conditional_headers(Validators('"e"', None)) == {"If-None-Match": '"e"'}
    assert recrawl.conditional_headers(Validators(None, "D")) == {"If-Modified-Since": "D"}
    assert recrawl.conditional_headers(Validators('"e"', "D")) == {
        "If-None-Match": '"e"', "If-Modified-Since": "D"}


# --- cache lifetime -------------------------------------------------------------------------

def _cc(*values):
    return tuple(("Cache-Control", v) for v in values)


def test_max_age_is_the_lifetime():
    assert recrawl.parse_cache_lifetime(_cc("public, max-age=600"), now=0) == 600
    assert recrawl.parse_cache_lifetime(_cc('max-age="90"'), now=0) == 90
    assert recrawl.parse_cache_lifetime(_cc("MAX-AGE = 5"), now=0) == 5


def test_s_maxage_is_ignored():
    assert recrawl.parse_cache_lifetime(_cc("s-maxage=600"), now=0) is None
    assert recrawl.parse_cache_lifetime(_cc("s-maxage=600, max-age=60"), now=0) == 60


@pytest.mark.parametrize("value", ["no-store", "no-cache", "max-age=600, no-cache",
                                   "no-store, max-age=600", "private, no-cache, must-revalidate"])
def test_no_store_and_no_cache_mean_as_soon_as_allowed(value):
    assert recrawl.parse_cache_lifetime(_cc(value), now=0) == 0.0


def test_qualified_no_cache_does_not_apply_to_the_whole_response():
    headers = _cc('no-cache="Set-Cookie, X-Foo", max-age=300')
    assert recrawl.parse_cache_lifetime(headers, now=0) == 300


def test_cache_control_lines_combine_and_the_first_max_age_wins():
    assert recrawl.parse_cache_lifetime(_cc("public", "max-age=10", "max-age=99"), now=0) == 10
    assert recrawl.parse_cache_lifetime(_cc("max-age=10, max-age=99"), now=0) == 10


@pytest.mark.parametrize("value", ["max-age=-5", "max-age=abc", "max-age=1.5", "max-age",
                                   "max-age=", "max-age=60 extra", ",,,", "=oops"])
def test_malformed_max_age_is_ignored(value):
    assert recrawl.parse_cache_lifetime(_cc(value), now=0) is None


def test_malformed_directives_do_not_hide_good_ones():
    assert recrawl.parse_cache_lifetime(_cc('"junk" x, max-age=7'), now=0) == 7


def test_huge_max_age_is_capped():
    assert recrawl.parse_cache_lifetime(_cc("max-age=99999999999999999999"), now=0) == 2**31


def test_expires_counts_from_date_when_present():
    headers = (("Expires", "Sun, 06 Nov 1994 09:49:37 GMT"),
               ("Date", "Sun, 06 Nov 1994 08:49:37 GMT"))
    # The server's clock is what matters, not ours (here a day ahead).
    assert recrawl.parse_cache_lifetime(headers, now=T_1994 + DAY) == HOUR


def test_expires_counts_from_now_without_a_valid_date():
    expires = ("Expires", "Sun, 06 Nov 1994 09:49:37 GMT")
    assert recrawl.parse_cache_lifetime((expires,), now=T_1994 + 600) == HOUR - 600
    assert recrawl.parse_cache_lifetime((expires, ("Date", "junk")), now=T_1994) == HOUR


def test_past_expires_is_zero_and_invalid_expires_is_ignored():
    past = (("Expires", "Sun, 06 Nov 1994 08:49:37 GMT"),)
    assert recrawl.parse_cache_lifetime(past, now=T_1994 + 10) == 0.0
    assert recrawl.parse_cache_lifetime((("Expires", "0"),), now=T_1994) is None
    assert recrawl.parse_cache_lifetime((), now=T_1994) is None


def test_max_age_overrides_expires():
    headers = (("Expires", "Sun, 06 Nov 1994 09:49:37 GMT"), *_cc("max-age=60"))
    assert recrawl.parse_cache_lifetime(headers, now=T_1994) == 60


# --- interval -------------------------------------------------------------------------------

def test_first_fetch_without_hints_uses_the_default():
    assert recrawl.next_interval(None, None, None, BOUNDS) == DAY


def test_change_halves_and_no_change_stretches():
    assert recrawl.next_interval(8 * HOUR, True, None, BOUNDS) == 4 * HOUR
    assert recrawl.next_interval(8 * HOUR, False, None, BOUNDS) == 12 * HOUR
    assert recrawl.next_interval(8 * HOUR, None, None, BOUNDS) == 8 * HOUR


def test_interval_is_clamped_to_the_bounds():
    assert recrawl.next_interval(HOUR, True, None, BOUNDS) == HOUR
    assert recrawl.next_interval(29 * DAY, False, None, BOUNDS) == 30 * DAY


def test_a_lifetime_is_the_first_estimate():
    assert recrawl.next_interval(None, None, 2 * HOUR, BOUNDS) == 2 * HOUR
    assert recrawl.next_interval(None, None, 7 * DAY, BOUNDS) == 7 * DAY
    # no-cache on a first fetch: as soon as the policy allows.
    assert recrawl.next_interval(None, None, 0.0, BOUNDS) == HOUR
    # A year of max-age is still bounded by the policy.
    assert recrawl.next_interval(None, None, 365 * DAY, BOUNDS) == 30 * DAY


def test_a_lifetime_is_a_floor_once_there_is_history():
    assert recrawl.next_interval(4 * HOUR, True, 3 * HOUR, BOUNDS) == 3 * HOUR
    assert recrawl.next_interval(4 * HOUR, False, 3 * HOUR, BOUNDS) == 6 * HOUR
    # no-cache on every page does not pin them at the minimum: change evidence decides.
    assert recrawl.next_interval(4 * HOUR, False, 0.0, BOUNDS) == 6 * HOUR


def test_unusable_inputs_fall_back():
    assert recrawl.next_interval(0.0, None, None, BOUNDS) == DAY
    assert recrawl.next_interval(float("nan"), None, None, BOUNDS) == DAY
    assert recrawl.next_interval(-5.0, False, None, BOUNDS) == 1.5 * DAY
    assert recrawl.next_interval(None, None, float("inf"), BOUNDS) == DAY
    assert recrawl.next_interval(None, None, -1.0, BOUNDS) == DAY


def test_next_fetch_time_and_freshness():
    due = recrawl.next_fetch_time(1000.0, 60.0)
    assert due == 1060.0
    assert recrawl.is_fresh(due, now=1059.9)
    assert not recrawl.is_fresh(due, now=1060.0)
    assert not recrawl.is_fresh(None, now=0.0)


# --- history --------------------------------------------------------------------------------

def test_first_fetch_history():
    headers = (("ETag", '"v1"'), *_cc("max-age=7200"))
    h = recrawl.update_history(None, 100.0, 200, "c1", headers, BOUNDS)
    assert h == FetchHistory(fetched_at=100.0, checksum="c1", validators=Validators('"v1"', None),
                             interval=2 * HOUR, next_fetch_at=100.0 + 2 * HOUR)


def _first(now=0.0):
    headers = (("ETag", '"v1"'), ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"))
    return recrawl.update_history(None, now, 200, "c1", headers, BOUNDS)


def test_a_304_is_unchanged_and_keeps_checksum_and_validators():
    h1 = _first()
    h2 = recrawl.update_history(h1, DAY, 304, None, (), BOUNDS)
    assert h2.checksum == "c1"
    assert h2.validators == h1.validators
    assert h2.interval == 1.5 * DAY
    assert h2.next_fetch_at == DAY + 1.5 * DAY


def test_a_304_updates_the_validators_it_carries():
    h2 = recrawl.update_history(_first(), DAY, 304, None, (("ETag", '"v2"'),), BOUNDS)
    assert h2.validators == Validators('"v2"', "Sun, 06 Nov 1994 08:49:37 GMT")


def test_a_200_with_the_same_checksum_is_unchanged():
    h2 = recrawl.update_history(_first(), DAY, 200, "c1", (("ETag", '"v1"'),), BOUNDS)
    assert h2.interval == 1.5 * DAY
    # A full response replaces the validators: no Last-Modified any more.
    assert h2.validators == Validators('"v1"', None)


def test_a_200_with_a_new_checksum_is_changed():
    h2 = recrawl.update_history(_first(), DAY, 200, "c2", (), BOUNDS)
    assert (h2.checksum, h2.interval, h2.validators) == ("c2", DAY / 2, Validators(None, None))


def test_an_unknown_checksum_is_no_evidence():
    h2 = recrawl.update_history(_first(), DAY, 200, None, (), BOUNDS)
    assert h2.interval == DAY


def test_a_304_without_history_is_no_evidence():
    h = recrawl.update_history(None, 5.0, 304, None, (("ETag", '"x"'),), BOUNDS)
    assert (h.interval, h.checksum, h.validators.etag) == (DAY, None, '"x"')


def test_a_page_that_never_changes_drifts_to_the_maximum_and_one_that_always_does_to_the_minimum():
    stable = changing = None
    now = 0.0
    for i in range(20):
        stable = recrawl.update_history(stable, now, 200, "same", (), BOUNDS)
        changing = recrawl.update_history(changing, now, 200, f"c{i}", (), BOUNDS)
        now += HOUR
    assert stable is not None and changing is not None
    assert stable.interval == BOUNDS.max_interval
    assert changing.interval == BOUNDS.min_interval


def test_history_works_with_any_object_that_has_the_bounds():
    class PolicyBounds:
        default_interval = 100.0
        min_interval = 10.0
        max_interval = 1000.0

    assert recrawl.update_history(None, 0.0, 200, "c", (), PolicyBounds()).interval == 100.0
