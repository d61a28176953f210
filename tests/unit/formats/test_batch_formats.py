"""The client batch message (``transforms.formats.batch_messages``) and the batches table's rows
(``transforms.formats.batch_rows``): written, merged as Bigtable merges cells, read back."""

from __future__ import annotations

import json

import pytest

from transforms.core.batches import BatchError, BatchSpec, prepare_batch
from transforms.core.records import BatchEvent, CrawlRequest
from transforms.formats.batch_messages import (
    BATCH_KIND,
    decode_batch,
    encode_batch,
    encode_prepared,
    is_batch,
)
from transforms.formats.batch_rows import (
    events_for,
    hook_row,
    notified_row,
    outcome_rows,
    read_record,
    record_row,
    state_row,
    with_batch_cells,
)
from transforms.formats.messages import (
    KIND_ATTRIBUTE,
    MAX_MESSAGE_BYTES,
    BadMessage,
    encode_requests,
)
from transforms.formats.rows import Row
from transforms.formats.schema import (
    BATCH_META_FAMILY,
    BATCH_NOTIFY_FAMILY,
    BATCH_URL_FAMILY,
    URL_BATCH_FAMILY,
)

SPEC = BatchSpec("orders-1", "acme", priority=3, cache_hours=24.0,
                 notify="https://hooks.example/crawl", milestone_step=10)
T0 = 1_764_000_000.0  # 2025-11-24, a whole second (the row times are ISO with milliseconds)


# -- the message ---------------------------------------------------------------------------------


def test_a_batch_message_round_trips_with_kind_batch():
    urls = ["https://a.example/1", "https://b.example/2"]
    body, attributes = encode_batch(SPEC, urls)
    assert attributes[KIND_ATTRIBUTE] == BATCH_KIND == "batch"
    assert (attributes["batch"], attributes["client"]) == ("orders-1", "acme")
    assert decode_batch(body) == (SPEC, urls)
    assert json.loads(body)["v"] == 1


def test_a_spec_with_defaults_round_trips_without_its_optional_fields():
    spec = BatchSpec("b-2", "acme")
    body, _ = encode_batch(spec, ["https://a.example/"])
    assert "cache_hours" not in json.loads(body)["batch"]
    assert decode_batch(body) == (spec, ["https://a.example/"])


def test_a_prepared_batch_sends_its_canonical_urls_and_its_invalid_ones_as_sent():
    batch = prepare_batch(SPEC, ["HTTP://A.example", "not a url", "https://a.example/"])
    spec, urls = decode_batch(encode_prepared(batch)[0])
    assert spec == SPEC and urls == ["http://a.example/", "https://a.example/", "not a url"]
    again = prepare_batch(spec, urls)
    assert (again.urls, again.invalid) == (batch.urls, batch.invalid)


def test_is_batch_by_attribute_or_by_body_and_not_for_crawl_messages():
    body, attributes = encode_batch(SPEC, ["https://a.example/"])
    assert is_batch(attributes, b"")
    assert is_batch(None, body) and is_batch({}, b"  " + body)
    crawl = encode_requests([CrawlRequest("https://a.example/", batches=("b1",), client="acme")])
    assert not is_batch({KIND_ATTRIBUTE: "crawl"}, crawl)
    assert not is_batch(None, b"https://a.example/batch\n")


def test_a_batch_without_a_client_is_a_bad_message():
    with pytest.raises(BadMessage, match="client"):
        decode_batch(b'{"v":1,"batch":{"id":"x"},"urls":["https://a.example/"]}')
    with pytest.raises(BadMessage, match="client"):
        decode_batch(b'{"v":1,"batch":{"id":"x","client":7},"urls":[]}')


@pytest.mark.parametrize("data", [
    b"not json",
    b"\xff\xfe",
    b'{"v":1,"urls":["https://a.example/"]}',
    b'{"v":1,"batch":{"client":"acme"}}',
    b'{"v":1,"batch":{"client":"acme"},"urls":[1,2]}',
    b'{"v":1,"batch":{"client":"acme","priority":"high"},"urls":[]}',
])
def test_malformed_batch_messages_are_bad_messages(data):
    with pytest.raises(BadMessage):
        decode_batch(data)


def test_a_client_name_the_spec_refuses_is_a_batch_error():
    with pytest.raises(BatchError, match="client"):
        decode_batch(b'{"v":1,"batch":{"client":"Not Valid"},"urls":["https://a.example/"]}')


def test_the_default_id_is_stable_for_the_same_body_and_differs_for_another():
    body = b'{"v":1,"batch":{"client":"acme"},"urls":["https://a.example/"]}'
    first, _ = decode_batch(body)
    again, _ = decode_batch(body)  # a redelivery is the same batch
    other, _ = decode_batch(body.replace(b"/\"]", b"/x\"]"))
    assert first.batch_id == again.batch_id and first.batch_id.startswith("b-")
    assert other.batch_id != first.batch_id
    assert first.milestone_step == 25 and first.cache_hours is None


def test_a_batch_too_big_for_one_message_is_refused():
    long_url = "https://a.example/" + "x" * 1000
    urls = [f"{long_url}/{i}" for i in range(MAX_MESSAGE_BYTES // 1000 + 10)]
    with pytest.raises(BadMessage, match="split it"):
        encode_batch(SPEC, urls)


# -- the batches table ---------------------------------------------------------------------------


def merged(rows: list[Row]) -> dict[str, dict[str, dict[str, str]]]:
    """Rows by key, merged as Bigtable keeps them: per column the cell with the newest
    timestamp (a later write wins a tie)."""
    tables: dict[str, dict[str, dict[str, tuple[float, str]]]] = {}
    for row in rows:
        stored = tables.setdefault(row.key, {})
        for family, columns in row.cells.items():
            for column, value in columns.items():
                old = stored.setdefault(family, {}).get(column)
                if old is None or row.at >= old[0]:
                    stored[family][column] = (row.at, value)
    return {key: {f: {c: v for c, (_, v) in cols.items()} for f, cols in fams.items()}
            for key, fams in tables.items()}


A, B, C = "https://a.example/1", "https://a.example/2", "https://a.example/3"
REQUEST_A = CrawlRequest(A, batches=("orders-1",), client="acme", cache_hours=24.0)


def written_batch() -> dict[str, dict[str, dict[str, str]]]:
    batch = prepare_batch(SPEC, [A, B, C, "not a url", A])
    rows = [record_row(batch, T0)]
    rows += outcome_rows([BatchEvent("orders-1", "not a url", "invalid", T0, detail="relative")])
    fetched = events_for(REQUEST_A, "fetched", T0 + 5, http_status=200, fetched_at=T0 + 4.5,
                         warc_file="gs://w/1.warc.gz", warc_offset=1234)
    rows += outcome_rows(fetched) + outcome_rows(fetched)  # a redelivery sets the same cell
    rows += outcome_rows(events_for(CrawlRequest(B, batches=("orders-1",), client="acme"),
                                    "fresh", T0 + 6))
    rows += [notified_row("orders-1", "50%", T0 + 7),
             hook_row("orders-1", "50%", [{"at": T0 + 7, "status": 500, "error": ""}], False,
                      T0 + 7),
             hook_row("orders-1", "50%", [{"at": T0 + 7, "status": 500, "error": ""},
                                          {"at": T0 + 9, "status": 200, "error": ""}], True,
                      T0 + 9)]
    rows.append(state_row("orders-1", "running", T0 + 7, {"fetched": 1, "cached": 1}))
    return merged(rows)


def test_a_batch_row_reads_back_as_its_record():
    cells = written_batch()
    assert list(cells) == ["orders-1"]
    record = read_record("orders-1", cells["orders-1"])
    assert record is not None
    assert record.spec == SPEC
    assert record.submitted_at == T0
    assert (record.sent, record.unique, record.invalid, record.total) == (5, 3, 1, 4)
    assert record.state == "running" and record.done_at is None
    assert set(record.urls) == {A, B, "not a url"}
    assert record.urls[A] == {"o": "fetched", "at": T0 + 5, "s": 200, "f": T0 + 4.5,
                              "w": "gs://w/1.warc.gz", "off": 1234}
    assert record.urls[B] == {"o": "cached", "at": T0 + 6}
    assert record.urls["not a url"] == {"o": "invalid", "at": T0, "d": "relative"}
    assert record.notified == {"50%": T0 + 7}
    hook = record.hooks["50%"]
    assert hook["ok"] is True
    assert [a["status"] for a in hook["attempts"]] == [500, 200]  # type: ignore[attr-defined]


def test_each_url_outcome_is_one_cell_of_the_batch_row():
    cells = written_batch()["orders-1"]
    assert set(cells[BATCH_URL_FAMILY]) == {A, B, "not a url"}  # C has no outcome yet
    assert json.loads(cells[BATCH_URL_FAMILY][A])["o"] == "fetched"


def test_a_tally_rebuilt_from_the_row_counts_each_url_once():
    record = read_record("orders-1", written_batch()["orders-1"])
    assert record is not None
    tally = record.tally()
    assert tally.total == 4 and tally.finished == 3
    assert tally.outcomes == {"invalid": 1, "fetched": 1, "cached": 1}
    assert tally.percent() == 75.0 and not tally.complete


def test_the_done_state_is_read_back_with_its_time():
    rows = [record_row(prepare_batch(SPEC, [A]), T0),
            state_row("orders-1", "done", T0 + 60, {"fetched": 1})]
    cells = merged(rows)["orders-1"]
    record = read_record("orders-1", cells)
    assert record is not None and record.state == "done" and record.done_at == T0 + 60
    assert json.loads(cells[BATCH_META_FAMILY]["outcomes"]) == {"fetched": 1}
    # an older state write arriving late does not undo it
    late = merged([*rows, state_row("orders-1", "running", T0 + 30, {})])["orders-1"]
    assert read_record("orders-1", late).state == "done"  # type: ignore[union-attr]


def test_a_row_without_a_record_is_no_batch():
    assert read_record("x", None) is None
    assert read_record("x", {}) is None
    only_outcomes = merged(outcome_rows([BatchEvent("x", A, "fetched", T0)]))["x"]
    assert read_record("x", only_outcomes) is None


def test_a_spec_without_options_reads_back_without_them():
    spec = BatchSpec("b-1", "acme")
    record = read_record("b-1", merged([record_row(prepare_batch(spec, [A]), T0)])["b-1"])
    assert record is not None and record.spec == spec


def test_the_notify_family_is_where_notifications_go():
    row = notified_row("orders-1", "done", T0)
    assert set(row.cells) == {BATCH_NOTIFY_FAMILY} and "sent:done" in row.cells[
        BATCH_NOTIFY_FAMILY]
    assert set(hook_row("orders-1", "done", [], True, T0).cells[BATCH_NOTIFY_FAMILY]) == {
        "hook:done"}


# -- the webtable side and the events ------------------------------------------------------------


def test_events_map_fresh_to_cached_one_per_batch():
    request = CrawlRequest(A, batches=("b1", "b2"), client="acme")
    events = events_for(request, "fresh", T0, http_status=200, fetched_at=T0 - 60,
                        detail="x" * 500)
    assert [(e.batch_id, e.url, e.outcome) for e in events] == [("b1", A, "cached"),
                                                                 ("b2", A, "cached")]
    assert events[0].http_status == 200 and events[0].fetched_at == T0 - 60
    assert len(events[0].detail) == 300
    assert [e.outcome for e in events_for(request, "robots_blocked", T0)] == [
        "robots_blocked"] * 2


def test_a_request_without_batches_has_no_events():
    assert events_for(CrawlRequest(A), "fetched", T0) == ()
    assert events_for(CrawlRequest(A, client="acme"), "fresh", T0) == ()


def test_the_webtable_row_gets_a_batch_cell_per_event():
    row = Row("a.example/1", {"f": {"outcome": "fetched"}}, T0)
    request = CrawlRequest(A, batches=("b1", "b2"), client="acme")
    out = with_batch_cells(row, events_for(request, "fresh", T0))
    assert out.cells[URL_BATCH_FAMILY] == {"b1": "cached", "b2": "cached"}
    assert out.cells["f"] == {"outcome": "fetched"} and (out.key, out.at) == (row.key, row.at)
    assert with_batch_cells(row, ()) == row
