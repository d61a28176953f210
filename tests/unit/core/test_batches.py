"""Client batches as plain Python (``transforms.core.batches``): checking a submission,
counting outcomes once, milestones, notification bodies and signatures, webhook retries and
the fair ranks that interleave batches in a host's queue."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json

import pytest

from transforms.core.batches import (
    CACHED,
    INVALID,
    MAX_BATCH_URLS,
    BatchError,
    BatchSpec,
    BatchTally,
    fair_ranks,
    milestones_reached,
    notification_body,
    prepare_batch,
    retry_delay,
    signature,
    transitions_due,
    verify_signature,
)

SPEC = BatchSpec("orders-1", "acme")


def tally_of(total: int, done: int, at: float = 0.0) -> BatchTally:
    tally = BatchTally(total)
    for i in range(done):
        tally.add(f"https://a.example/{i}", "fetched", at + i)
    return tally


# -- prepare_batch -------------------------------------------------------------------------------


def test_urls_are_canonicalized_and_repeats_after_canonicalization_kept_once_in_order():
    batch = prepare_batch(SPEC, ["HTTP://Example.COM:80/a/../b?x=1#frag",
                                 "https://other.example",
                                 "http://example.com/b?x=1",  # the first one, canonical
                                 " http://EXAMPLE.com/b?x=1 "])
    assert batch.urls == ("http://example.com/b?x=1", "https://other.example/")
    assert batch.invalid == ()
    assert (batch.sent, len(batch.urls), batch.total) == (4, 2, 2)


def test_invalid_urls_are_recorded_once_each_with_their_reason_and_counted_in_the_total():
    batch = prepare_batch(SPEC, ["https://ok.example/", "not a url", "ftp://x.example/",
                                 "not a url", "", "", "http://"])
    assert batch.urls == ("https://ok.example/",)
    reasons = dict(batch.invalid)
    assert list(reasons) == ["not a url", "ftp://x.example/", "''", "http://"]
    assert "relative" in reasons["not a url"]
    assert "unsupported_scheme" in reasons["ftp://x.example/"]
    assert reasons["''"] == "empty URL"  # a blank URL is shown as sent (its repr)
    assert "no_host" in reasons["http://"]
    assert (batch.sent, len(batch.urls), len(batch.invalid), batch.total) == (7, 1, 4, 5)


def test_the_pipeline_canonicalizer_is_the_one_used():
    batch = prepare_batch(SPEC, ["https://a.example/x?sid=1"],
                          canonicalize=lambda u: u.split("?")[0])
    assert batch.urls == ("https://a.example/x",)


def test_exactly_the_maximum_is_accepted_and_one_more_is_refused_with_the_limit_named():
    urls = [f"https://a.example/{i}" for i in range(MAX_BATCH_URLS)]
    assert MAX_BATCH_URLS == 10_000
    batch = prepare_batch(SPEC, urls)
    assert (batch.sent, batch.total) == (10_000, 10_000)
    with pytest.raises(BatchError, match="10,000") as refused:
        prepare_batch(SPEC, [*urls, "https://a.example/one-more"])
    assert "10,001" in str(refused.value)


def test_an_empty_batch_is_refused():
    with pytest.raises(BatchError, match="at least one URL"):
        prepare_batch(SPEC, [])


@pytest.mark.parametrize("spec, words", [
    (BatchSpec("", "acme"), "batch id"),
    (BatchSpec("-starts-with-dash", "acme"), "batch id"),
    (BatchSpec("has space", "acme"), "batch id"),
    (BatchSpec("x" * 129, "acme"), "batch id"),
    (BatchSpec("ok", "ACME"), "client"),
    (BatchSpec("ok", ""), "client"),
    (BatchSpec("ok", "a/b"), "client"),
    (BatchSpec("ok", "acme", cache_hours=-1), "cache hours"),
    (BatchSpec("ok", "acme", cache_hours=24 * 365 + 1), "cache hours"),
    (BatchSpec("ok", "acme", milestone_step=-5), "milestone step"),
    (BatchSpec("ok", "acme", milestone_step=101), "milestone step"),
    (BatchSpec("ok", "acme", notify="ftp://hooks.example/"), "notify"),
    (BatchSpec("ok", "acme", notify="hooks.example/crawl"), "notify"),
])
def test_a_bad_spec_is_refused_before_any_url_is_looked_at(spec, words):
    with pytest.raises(BatchError, match=words):
        prepare_batch(spec, ["https://a.example/"])


def test_a_good_spec_at_its_limits_is_accepted():
    spec = BatchSpec("A" + "x" * 127, "a" * 63, cache_hours=0, milestone_step=0,
                     notify="https://hooks.example/crawl")
    assert prepare_batch(spec, ["https://a.example/"]).spec == spec
    assert prepare_batch(BatchSpec("b.1_2-3", "c_d-1", cache_hours=8760, milestone_step=100),
                         ["https://a.example/"]).total == 1


# -- BatchTally ----------------------------------------------------------------------------------


def test_a_url_is_counted_once_whatever_outcome_is_delivered_again():
    tally = BatchTally(3)
    assert tally.add("https://a.example/1", "fetched", 10.0)
    assert not tally.add("https://a.example/1", "fetched", 11.0)  # a redelivery
    assert not tally.add("https://a.example/1", "error", 12.0)  # a different late outcome
    assert tally.add("https://a.example/2", CACHED, 13.0)
    assert tally.finished == 2 and tally.outcomes == {"fetched": 1, CACHED: 1}
    assert tally.percent() == 66.6 and not tally.complete
    assert (tally.first_at, tally.last_at) == (10.0, 13.0)
    assert tally.add("https://a.example/3", INVALID, 14.0)
    assert tally.complete and tally.percent() == 100.0
    assert tally.eta_seconds(100.0) == 0.0


def test_an_empty_tally_is_done():
    tally = BatchTally(0)
    assert tally.complete and tally.percent() == 100.0


def test_eta_is_the_remaining_urls_at_the_batch_own_rate():
    tally = BatchTally(10)
    assert tally.eta_seconds(0.0) is None  # no outcome yet
    tally.add("https://a.example/0", "fetched", 100.0)
    assert tally.eta_seconds(101.0) is None  # one outcome: no rate yet
    for i in range(1, 5):
        tally.add(f"https://a.example/{i}", "fetched", 100.0 + 2 * i)  # one per 2 s
    # 5 done, 4 intervals over 8 s -> 0.5 URL/s; 5 left -> 10 s
    assert tally.eta_seconds(108.0) == pytest.approx(10.0)
    # nothing more for 8 s: the rate falls to 4 / 16 s, so 20 s are left
    assert tally.eta_seconds(116.0) == pytest.approx(20.0)


# -- milestones and transitions ------------------------------------------------------------------


def test_milestones_are_the_multiples_of_the_step_below_100():
    assert milestones_reached(0.0, 25) == []
    assert milestones_reached(24.9, 25) == []
    assert milestones_reached(50.0, 25) == [25, 50]
    assert milestones_reached(100.0, 25) == [25, 50, 75]
    assert milestones_reached(100.0, 0) == []


def test_percent_rounds_down_so_a_milestone_is_never_announced_early():
    tally = BatchTally(10_000)
    for i in range(2_499):
        tally.add(f"https://a.example/{i}", "fetched", 1.0)
    assert tally.percent() == 24.9 and transitions_due(tally, 25, []) == []
    for i in range(2_499, 9_999):
        tally.add(f"https://a.example/{i}", "fetched", 1.0)
    assert tally.percent() == 99.9 and not tally.complete


def test_transitions_go_out_once_each_in_order_then_done():
    total = 8
    sent: list[str] = []
    announced: list[list[str]] = []
    tally = BatchTally(total)
    for i in range(total):
        tally.add(f"https://a.example/{i}", "fetched", float(i))
        due = transitions_due(tally, 25, sent)
        sent += due
        announced.append(due)
    assert announced == [[], ["25%"], [], ["50%"], [], ["75%"], [], ["done"]]
    assert transitions_due(tally, 25, sent) == []


def test_a_step_of_zero_announces_only_done():
    assert transitions_due(tally_of(4, 3), 0, []) == []
    assert transitions_due(tally_of(4, 4), 0, []) == ["done"]


def test_a_jump_gives_the_milestones_passed_in_order_and_completion_gives_done_alone():
    assert transitions_due(tally_of(4, 0), 25, []) == []
    assert transitions_due(tally_of(4, 3), 25, []) == ["25%", "50%", "75%"]
    assert transitions_due(tally_of(4, 4), 25, []) == ["done"]
    assert transitions_due(tally_of(4, 4), 25, ["25%", "50%"]) == ["done"]
    assert transitions_due(tally_of(4, 4), 25, ["done"]) == []


# -- notifications -------------------------------------------------------------------------------


def test_a_notification_names_its_transition_in_its_idempotency_key():
    tally = BatchTally(4)
    tally.add("https://a.example/1", "fetched", 1.0)
    tally.add("https://a.example/2", CACHED, 2.0)
    body = notification_body(SPEC, tally, "50%", 3.14159)
    assert body["idempotency_key"] == "orders-1:50%"
    assert (body["batch_id"], body["client"], body["transition"]) == ("orders-1", "acme", "50%")
    assert body["state"] == "running"
    assert (body["total"], body["finished"], body["percent"]) == (4, 2, 50.0)
    assert body["outcomes"] == {CACHED: 1, "fetched": 1}
    assert body["at"] == 3.142 and "results" not in body
    json.dumps(body)  # the body is sent as JSON as it is


def test_the_done_notification_says_done_and_where_the_results_are():
    tally = tally_of(2, 2)
    body = notification_body(SPEC, tally, "done", 9.0, results={"table": "batches"})
    assert body["idempotency_key"] == "orders-1:done"
    assert body["state"] == "done" and body["results"] == {"table": "batches"}


def test_the_signature_is_hmac_sha256_of_the_raw_body():
    secret, body = "s3cret", b'{"batch_id":"orders-1","transition":"done"}'
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert signature(secret, body) == "sha256=" + expected
    assert verify_signature(secret, body, "sha256=" + expected)


def test_a_tampered_body_a_wrong_secret_or_no_header_fails_verification():
    secret, body = "s3cret", b'{"percent":50.0}'
    header = signature(secret, body)
    assert not verify_signature(secret, b'{"percent":75.0}', header)
    assert not verify_signature("other", body, header)
    assert not verify_signature(secret, body, None)
    assert not verify_signature(secret, body, "")
    assert not verify_signature(secret, body, header.removeprefix("sha256="))


def test_a_header_with_non_ascii_characters_fails_verification_without_raising():
    body = b"{}"
    assert not verify_signature("s3cret", body, "sha256=\u00e9" + "0" * 63)
    assert not verify_signature("s3cret", body, signature("s3cret", body) + "\u00e9")


def test_webhook_retries_double_from_the_base_up_to_the_cap():
    assert [retry_delay(a) for a in range(1, 6)] == [2.0, 4.0, 8.0, 16.0, 32.0]
    assert retry_delay(0) == 2.0
    assert retry_delay(20) == 300.0
    assert retry_delay(3, base=1.0, cap=3.0) == 3.0


# -- fair ranks ----------------------------------------------------------------------------------


def test_two_flows_with_backlog_alternate():
    tags: dict[str, float] = {}
    a, tags["a/1"] = fair_ranks(5, "a/1", tags, 0.0)
    b, tags["b/1"] = fair_ranks(5, "b/1", tags, 0.0)
    queue = sorted([(r, "a") for r in a] + [(r + 1e-9, "b") for r in b])
    assert [flow for _, flow in queue] == ["a", "b"] * 5
    assert a == pytest.approx([0.01, 0.02, 0.03, 0.04, 0.05])
    assert tags["a/1"] == pytest.approx(0.05)


def test_a_flow_continues_after_its_own_previous_rank():
    tags = {"a/1": 0.05}
    more, tag = fair_ranks(2, "a/1", tags, 0.01)
    assert more == pytest.approx([0.06, 0.07]) and tag == pytest.approx(0.07)


def test_a_late_flow_starts_at_the_virtual_clock_not_behind_the_backlog():
    tags: dict[str, float] = {}
    backlog, tags["a/1"] = fair_ranks(300, "a/1", tags, 0.0)
    vclock = backlog[19]  # 20 of A's URLs leased so far
    late, _ = fair_ranks(3, "b/1", tags, vclock)
    assert late == pytest.approx([vclock + 0.01, vclock + 0.02, vclock + 0.03])
    ahead_of_b = sum(1 for r in backlog if r < late[-1])
    assert ahead_of_b <= 20 + 3  # B does not wait for A's 280 others
    # an old tag below the clock does not put a returning flow in the past either
    again, _ = fair_ranks(1, "b/1", {"b/1": 0.01}, vclock)
    assert again[0] == pytest.approx(vclock + 0.01)


def test_a_share_of_two_advances_twice_as_fast():
    _, tag_one = fair_ranks(4, "a/1", {}, 1.0)
    two, tag_two = fair_ranks(4, "a/2", {}, 1.0, share=2)
    assert tag_one - 1.0 == pytest.approx(0.04) and tag_two - 1.0 == pytest.approx(0.08)
    assert [b - a for a, b in itertools.pairwise(two)] == pytest.approx([0.02] * 3)
    assert fair_ranks(2, "a/3", {}, 0.0, share=0)[0] == pytest.approx([0.01, 0.02])
