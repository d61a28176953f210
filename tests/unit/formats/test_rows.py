"""Webtable, hosts and dead-letter rows (transforms.formats.rows) and their Bigtable mutation
(transforms.stores.bigtable.to_mutation_entry)."""

from __future__ import annotations

import hashlib
import itertools
from datetime import UTC, datetime

import pytest

from transforms.core.records import (
    OUTCOME_ERROR,
    OUTCOME_FETCHED,
    OUTCOME_FILTERED,
    OUTCOME_NOT_STORED,
    OUTCOME_QUEUED,
    OUTCOME_REDIRECT,
    OUTCOME_ROBOTS_BLOCKED,
    CrawlRequest,
    DeadLetter,
    FetchResult,
    HostStats,
    ParsedPage,
    StoredPage,
    UrlOutcome,
    WarcLocation,
)
from transforms.formats.rowkeys import row_key
from transforms.formats.rows import (
    MAX_DEAD_LETTER_PAYLOAD,
    Row,
    dead_letter_row,
    host_row,
    iso,
    outcome_row,
    stored_page_row,
    unstored_result_row,
)
from transforms.formats.schema import (
    CONTENT_FAMILY,
    DEADLETTER_FAMILY,
    FETCH_FAMILY,
    HOST_FAMILY,
    PARSE_FAMILY,
    SCHEDULE_FAMILY,
    TABLE_FAMILIES,
    WEBTABLE,
)
from transforms.stores.bigtable import to_mutation_entry

# 2024-03-01T12:34:56.789Z
AT = datetime(2024, 3, 1, 12, 34, 56, 789000, tzinfo=UTC).timestamp()
AT_ISO = "2024-03-01T12:34:56.789Z"
URL = "https://www.example.com/a/b?q=1"
PARENT = "https://www.example.com/"
WEBTABLE_FAMILIES = {f.name for f in TABLE_FAMILIES[WEBTABLE]}


def _request(url: str = URL, **kwargs) -> CrawlRequest:
    return CrawlRequest(url, **{"depth": 2, "priority": 7, "discovered_from": PARENT, **kwargs})


def _fetch(**kwargs) -> FetchResult:
    fields = {"request": _request(), "host": "www.example.com", "fetched_at": AT,
              "final_url": URL, "status": 200, "content_type": "text/html; charset=utf-8",
              "content_length": 1234, "elapsed": 0.2506}
    fields.update(kwargs)
    return FetchResult(**fields)


def _stored(title: str | None = "Hello", **fetch_kwargs) -> StoredPage:
    page = ParsedPage(_fetch(**fetch_kwargs), title, ("https://a.example/", "https://b.example/"),
                      "sha1:abc")
    return StoredPage(page, WarcLocation("gs://bucket/warc/f-0001.warc.gz", 4096, 812))


def _is_decimal(text: str) -> bool:
    return text.isdigit() or (text.startswith("-") and text[1:].isdigit())


# --- iso ---------------------------------------------------------------------------------------


def test_iso_is_utc_with_milliseconds_and_z():
    assert iso(AT) == AT_ISO
    assert iso(0) == "1970-01-01T00:00:00.000Z"


def test_iso_round_trips_through_fromisoformat():
    parsed = datetime.fromisoformat(iso(AT).replace("Z", "+00:00"))
    assert parsed == datetime.fromtimestamp(AT, UTC)


# --- stored pages ------------------------------------------------------------------------------


def test_stored_page_row_key_is_the_row_key_of_the_requested_url():
    row = stored_page_row(_stored())
    assert row.key == row_key(URL) == "com.example.www:https/a/b?q=1"
    assert row.at == AT


def test_stored_page_row_key_follows_the_request_not_the_final_url():
    row = stored_page_row(_stored(final_url="https://www.example.com/elsewhere"))
    assert row.key == row_key(URL)
    assert row.cells[FETCH_FAMILY]["final_url"] == "https://www.example.com/elsewhere"


def test_stored_page_row_has_the_four_webtable_families():
    row = stored_page_row(_stored())
    assert set(row.cells) == {FETCH_FAMILY, CONTENT_FAMILY, PARSE_FAMILY, SCHEDULE_FAMILY}
    assert set(row.cells) <= WEBTABLE_FAMILIES


def test_stored_page_fetch_cells():
    f = stored_page_row(_stored()).cells[FETCH_FAMILY]
    assert f["outcome"] == OUTCOME_FETCHED
    assert f["status"] == "200"
    assert f["fetched_at"] == f["outcome_at"] == AT_ISO
    assert f["final_url"] == URL
    assert f["content_type"] == "text/html; charset=utf-8"
    assert f["length"] == "1234"
    assert f["elapsed_ms"] == "251"
    assert f["checksum"] == "sha1:abc"
    assert "error" not in f and "redirects" not in f and "truncated" not in f


def test_stored_page_outcome_is_fetched_whatever_the_result_said():
    row = stored_page_row(_stored(outcome=OUTCOME_NOT_STORED))
    assert row.cells[FETCH_FAMILY]["outcome"] == OUTCOME_FETCHED


def test_stored_page_content_parse_and_schedule_cells():
    cells = stored_page_row(_stored()).cells
    assert cells[CONTENT_FAMILY] == {"warc_file": "gs://bucket/warc/f-0001.warc.gz",
                                     "warc_offset": "4096", "warc_length": "812",
                                     "warc_type": "response"}
    assert cells[PARSE_FAMILY] == {"outlinks": "2", "title": "Hello", "noindex": "0",
                                   "nofollow": "0", "duplicate_of": "", "duplicate_kind": ""}
    assert cells[SCHEDULE_FAMILY] == {"depth": "2", "priority": "7", "host": "www.example.com",
                                      "discovered_from": PARENT}


def test_title_is_optional_but_an_empty_title_is_kept():
    assert "title" not in stored_page_row(_stored(title=None)).cells[PARSE_FAMILY]
    assert stored_page_row(_stored(title="")).cells[PARSE_FAMILY]["title"] == ""


def test_truncated_body_is_marked():
    f = stored_page_row(_stored(truncated=True)).cells[FETCH_FAMILY]
    assert f["truncated"] == "1"


def test_every_cell_is_text():
    row = stored_page_row(_stored(redirects=("http://www.example.com/a/b?q=1",)))
    for columns in row.cells.values():
        for column, value in columns.items():
            assert isinstance(column, str) and isinstance(value, str)


# --- unstored fetches --------------------------------------------------------------------------


def test_unstored_result_row_has_fetch_and_schedule_only():
    row = unstored_result_row(_fetch(status=404, content_type="text/html",
                                     outcome=OUTCOME_NOT_STORED))
    assert row.key == row_key(URL)
    assert row.at == AT
    assert set(row.cells) == {FETCH_FAMILY, SCHEDULE_FAMILY}
    f = row.cells[FETCH_FAMILY]
    assert f["outcome"] == OUTCOME_NOT_STORED
    assert f["status"] == "404"
    assert f["outcome_at"] == f["fetched_at"] == AT_ISO


def test_error_without_response_has_error_cells_and_no_status():
    result = _fetch(status=None, content_type=None, content_length=0, error="timeout",
                    error_detail="read timed out after 20 s", outcome=OUTCOME_ERROR)
    f = unstored_result_row(result).cells[FETCH_FAMILY]
    assert f["outcome"] == OUTCOME_ERROR
    assert f["error"] == "timeout"
    assert f["error_detail"] == "read timed out after 20 s"
    assert "status" not in f and "content_type" not in f
    assert f["length"] == "0"


def test_error_without_detail_writes_an_empty_detail():
    f = unstored_result_row(_fetch(status=None, error="connect",
                                   outcome=OUTCOME_ERROR)).cells[FETCH_FAMILY]
    assert f["error"] == "connect"
    assert f["error_detail"] == ""


def test_redirect_hops_are_joined_with_spaces_and_target_recorded():
    hops = ("https://www.example.com/a/b?q=1", "https://www.example.com/c")
    result = _fetch(status=301, content_type=None, redirects=hops,
                    redirect_to="https://other.example/d", outcome=OUTCOME_REDIRECT)
    f = unstored_result_row(result).cells[FETCH_FAMILY]
    assert f["redirects"] == " ".join(hops)
    assert f["redirects"].split(" ") == list(hops)
    assert f["redirect_to"] == "https://other.example/d"
    assert f["outcome"] == OUTCOME_REDIRECT


def test_seed_has_no_discovered_from_cell():
    result = _fetch(request=CrawlRequest(URL), outcome=OUTCOME_NOT_STORED)
    s = unstored_result_row(result).cells[SCHEDULE_FAMILY]
    assert s == {"depth": "0", "priority": "0", "host": "www.example.com"}


def test_numbers_are_decimal_strings():
    row = unstored_result_row(_fetch(content_length=10 * 1024 * 1024, elapsed=12.3456,
                                     outcome=OUTCOME_NOT_STORED))
    f, s = row.cells[FETCH_FAMILY], row.cells[SCHEDULE_FAMILY]
    for value in (f["status"], f["length"], f["elapsed_ms"], s["depth"], s["priority"]):
        assert _is_decimal(value), value
    assert f["length"] == "10485760"
    assert f["elapsed_ms"] == "12346"


def test_row_key_keeps_an_explicit_port():
    url = "http://127.0.0.2:8081/x"
    result = _fetch(request=CrawlRequest(url), host="127.0.0.2:8081", final_url=url,
                    outcome=OUTCOME_NOT_STORED)
    assert unstored_result_row(result).key == row_key(url) == "127.0.0.2:http:8081/x"


# --- frontier outcomes -------------------------------------------------------------------------


def test_queued_outcome_records_first_seen():
    row = outcome_row(UrlOutcome(_request(), "www.example.com", OUTCOME_QUEUED, AT))
    assert row.key == row_key(URL)
    assert row.at == AT
    assert set(row.cells) == {FETCH_FAMILY, SCHEDULE_FAMILY}
    assert row.cells[FETCH_FAMILY] == {"outcome": OUTCOME_QUEUED, "outcome_at": AT_ISO,
                                       "detail": ""}
    assert row.cells[SCHEDULE_FAMILY] == {"depth": "2", "priority": "7",
                                          "host": "www.example.com",
                                          "discovered_from": PARENT, "first_seen": AT_ISO}


@pytest.mark.parametrize("outcome", [OUTCOME_ROBOTS_BLOCKED, OUTCOME_FILTERED])
def test_terminal_frontier_outcomes_do_not_touch_first_seen(outcome):
    row = outcome_row(UrlOutcome(_request(), "www.example.com", outcome, AT, "disallowed"))
    assert row.cells[FETCH_FAMILY] == {"outcome": outcome, "outcome_at": AT_ISO,
                                       "detail": "disallowed"}
    assert "first_seen" not in row.cells[SCHEDULE_FAMILY]


def test_detail_is_always_written_so_a_later_outcome_clears_it():
    row = outcome_row(UrlOutcome(_request(), "www.example.com", OUTCOME_ROBOTS_BLOCKED, AT))
    assert row.cells[FETCH_FAMILY]["detail"] == ""


def test_error_outcome_splits_the_error_name_off_the_detail():
    row = outcome_row(UrlOutcome(_request(), "www.example.com", OUTCOME_ERROR, AT,
                                 "robots_unavailable: 503 three times"))
    f = row.cells[FETCH_FAMILY]
    assert f["error"] == "robots_unavailable"
    assert f["error_detail"] == "robots_unavailable: 503 three times"
    assert f["detail"] == "robots_unavailable: 503 three times"


def test_error_outcome_without_colon_uses_the_whole_detail_as_error():
    f = outcome_row(UrlOutcome(_request(), "h", OUTCOME_ERROR, AT, "boom")).cells[FETCH_FAMILY]
    assert f["error"] == "boom"


# --- hosts -------------------------------------------------------------------------------------


def test_host_row_is_keyed_by_host_and_holds_every_field():
    stats = HostStats("127.0.0.2:8081", AT, fetched=12, errors=1, bytes=34567, queued=3,
                      lease_active=True, delay=1.5, robots_status="ok", last_error="timeout")
    row = host_row(stats)
    assert row.key == "127.0.0.2:8081"
    assert row.at == AT
    assert set(row.cells) == {HOST_FAMILY}
    h = row.cells[HOST_FAMILY]
    assert h["host"] == "127.0.0.2:8081"
    assert h["updated_at"] == AT_ISO
    assert h["fetched"] == "12" and h["errors"] == "1" and h["bytes"] == "34567"
    assert h["queued"] == "3"
    assert h["delay"] == "1.5"
    assert h["robots_status"] == "ok"
    assert h["last_error"] == "timeout"
    assert h["lease_active"] == "1"


def test_host_row_booleans_are_one_and_zero():
    assert host_row(HostStats("h", AT, lease_active=True)).cells[HOST_FAMILY][
        "lease_active"] == "1"
    assert host_row(HostStats("h", AT, lease_active=False)).cells[HOST_FAMILY][
        "lease_active"] == "0"


def test_host_row_counters_are_decimal_strings():
    h = host_row(HostStats("h", AT)).cells[HOST_FAMILY]
    for name in ("fetched", "errors", "bytes", "robots_blocked", "dedup_dropped", "filtered",
                 "accepted", "queued"):
        assert h[name] == "0"


# --- dead letters ------------------------------------------------------------------------------


def test_dead_letter_key_is_stage_micros_and_payload_hash():
    payload = b'{"requests": 3}'
    row = dead_letter_row(DeadLetter("decode", "bad_message", payload, AT))
    stage, micros, digest = row.key.split("#")
    assert stage == "decode"
    assert len(micros) == 20 and micros.isdigit()
    assert int(micros) == round(AT * 1e6)
    assert digest == hashlib.sha1(payload).hexdigest()[:16]
    assert row.at == AT


def test_dead_letter_keys_sort_by_time_within_a_stage():
    keys = [dead_letter_row(DeadLetter("decode", "r", b"x", t)).key
            for t in (9.5, 10.0, 1_000_000_000.0, AT)]
    assert keys == sorted(keys)


def test_dead_letter_key_is_idempotent_and_distinguishes_payloads():
    a = dead_letter_row(DeadLetter("decode", "r", b"a", AT))
    assert a == dead_letter_row(DeadLetter("decode", "r", b"a", AT))
    assert a.key != dead_letter_row(DeadLetter("decode", "r", b"b", AT)).key


def test_dead_letter_cells():
    row = dead_letter_row(DeadLetter("fetch", "unexpected: KeyError", b"payload \xe2\x9c\x93",
                                     AT))
    assert row.cells == {DEADLETTER_FAMILY: {"stage": "fetch",
                                             "reason": "unexpected: KeyError",
                                             "payload": "payload \u2713", "at": AT_ISO}}


def test_dead_letter_payload_is_truncated_to_64_kib():
    assert MAX_DEAD_LETTER_PAYLOAD == 64 * 1024
    payload = b"a" * (MAX_DEAD_LETTER_PAYLOAD + 1000)
    row = dead_letter_row(DeadLetter("decode", "too_big", payload, AT))
    assert row.cells[DEADLETTER_FAMILY]["payload"] == "a" * MAX_DEAD_LETTER_PAYLOAD
    # The key hashes the whole payload, so two payloads that share their first 64 KiB differ.
    other = dead_letter_row(DeadLetter("decode", "too_big", payload + b"b", AT))
    assert other.key != row.key


def test_dead_letter_binary_payload_never_raises():
    row = dead_letter_row(DeadLetter("decode", "r", b"\xff\xfe\x00ok", AT))
    assert row.cells[DEADLETTER_FAMILY]["payload"].endswith("\x00ok")
    # A cut in the middle of a multi-byte character becomes a replacement character.
    cut = b"a" * (MAX_DEAD_LETTER_PAYLOAD - 1) + "\u2713".encode()
    text = dead_letter_row(DeadLetter("decode", "r", cut, AT)).cells[DEADLETTER_FAMILY][
        "payload"]
    assert text.startswith("a" * (MAX_DEAD_LETTER_PAYLOAD - 1))
    assert "\u2713" not in text


# --- to_mutation_entry -------------------------------------------------------------------------


def _mutations(row: Row) -> list[tuple[str, bytes, bytes, int]]:
    pb = to_mutation_entry(row)._to_pb()
    return [(m.set_cell.family_name, m.set_cell.column_qualifier, m.set_cell.value,
             m.set_cell.timestamp_micros) for m in pb.mutations]


def test_mutation_key_is_the_utf8_row_key():
    row = stored_page_row(_stored())
    assert to_mutation_entry(row).row_key == row.key.encode("utf-8")


def test_mutation_sets_one_cell_per_column_at_the_event_time_in_milliseconds():
    row = Row("com.example:https/", {"f": {"status": "200", "outcome": "fetched"},
                                     "s": {"depth": "0"}}, AT)
    assert sorted(_mutations(row)) == sorted([
        ("f", b"status", b"200", 1_709_296_496_789_000),
        ("f", b"outcome", b"fetched", 1_709_296_496_789_000),
        ("s", b"depth", b"0", 1_709_296_496_789_000),
    ])


def test_mutation_timestamp_drops_sub_millisecond_digits():
    row = Row("k", {"f": {"a": "b"}}, 1_700_000_000.1239)
    ((_, _, _, micros),) = _mutations(row)
    assert micros == 1_700_000_000_123_000
    assert micros % 1000 == 0


def test_mutation_timestamps_agree_with_the_written_iso_times():
    for at in (AT, 1_700_000_000.0, 1_700_000_000.999, 1_712_345_678.5):
        ((_, _, _, micros),) = _mutations(Row("k", {"f": {"a": "b"}}, at))
        assert iso(micros / 1e6) == iso(at)


def test_mutation_encodes_values_as_utf8():
    row = Row("k", {PARSE_FAMILY: {"title": "Caf\u00e9 \u2713"}}, AT)
    ((family, column, value, _),) = _mutations(row)
    assert (family, column, value) == ("p", b"title", "Caf\u00e9 \u2713".encode())


def test_mutation_of_a_whole_stored_page_carries_every_cell():
    row = stored_page_row(_stored())
    expected = {(family, column.encode(), value.encode())
                for family, columns in row.cells.items() for column, value in columns.items()}
    mutations = _mutations(row)
    assert {(f, c, v) for f, c, v, _ in mutations} == expected
    assert len(mutations) == len(expected)


# --- mutation_chunks ---------------------------------------------------------------------------


def test_writes_are_split_under_bigtables_limit_of_mutations_per_call():
    from transforms.stores.bigtable import MAX_MUTATIONS_PER_CALL, mutation_chunks

    assert MAX_MUTATIONS_PER_CALL < 100_000  # MutateRows refuses more
    sizes = [14] * 7_680  # a bundle that admitted 7,680 URLs: 107,520 mutations
    chunks = mutation_chunks(sizes)
    assert chunks[0][0] == 0 and chunks[-1][1] == len(sizes)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(chunks))  # in order
    assert all(sum(sizes[s:e]) <= MAX_MUTATIONS_PER_CALL for s, e in chunks)
    assert mutation_chunks([3, 3, 3], limit=5) == [(0, 1), (1, 2), (2, 3)]
    assert mutation_chunks([9, 1], limit=5) == [(0, 1), (1, 2)]  # a big row goes alone
    assert mutation_chunks([]) == []
