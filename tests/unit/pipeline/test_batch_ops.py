"""Submitting client batches and reading their status (pipeline.ops.batches), and the
``crawler submit`` / ``crawler batch`` command lines (pipeline.cli.batches).

The batches table is the memory store; the rows a test needs are written with the pipeline's
own row formats (transforms.formats.batch_rows), as the intake and the counting would."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from pipeline.cli.batches import url_lines
from pipeline.cli.main import build_parser, main
from pipeline.ops.batches import (
    BatchIdTaken,
    batch_status,
    format_duration,
    format_list,
    format_status,
    list_batches,
    submit_batch,
)
from tests.unit.pipeline.publishing import Published
from transforms.core.batches import MAX_BATCH_URLS, BatchError, BatchSpec, prepare_batch
from transforms.core.records import BatchEvent
from transforms.formats.batch_messages import decode_batch
from transforms.formats.batch_rows import (
    hook_row,
    notified_row,
    outcome_rows,
    record_row,
    state_row,
)
from transforms.formats.schema import BATCHES_TABLE
from transforms.stores.memory import MemoryFrontierStore, memory_store

T0 = 1_780_000_000.0


@pytest.fixture
def store() -> MemoryFrontierStore:
    return memory_store(f"batch-ops-{uuid.uuid4().hex}")


def _spec(batch_id: str = "orders-1", client: str = "acme", **options: Any) -> BatchSpec:
    return BatchSpec(batch_id, client, **options)


def _record(store: MemoryFrontierStore, spec: BatchSpec, urls: list[str], at: float) -> None:
    """What the pipeline's intake writes for a batch."""
    store.write_rows(BATCHES_TABLE, [record_row(prepare_batch(spec, urls), at)])


def _outcomes(store: MemoryFrontierStore, batch_id: str,
              events: list[tuple[str, str, float]]) -> None:
    store.write_rows(BATCHES_TABLE, outcome_rows(
        BatchEvent(batch_id, url, outcome, at) for url, outcome, at in events))


# --- submit_batch ------------------------------------------------------------------------------


def test_a_new_batch_is_published_once_with_its_sizes(store):
    publish = Published()
    urls = ["https://example.com/a", "HTTPS://EXAMPLE.com/a", "https://example.com/b",
            "not a url", "mailto:x@example.com"]
    result = submit_batch(_spec(priority=3, notify="https://hooks.example/x"), urls,
                          publish=publish, store=store)
    assert (result.batch_id, result.client, result.existing) == ("orders-1", "acme", False)
    assert (result.sent, result.unique, result.invalid) == (5, 2, 2)
    ((data, attributes),) = publish.messages
    assert attributes["kind"] == "batch" and attributes["batch"] == "orders-1"
    spec, sent_urls = decode_batch(data)
    assert (spec.client, spec.priority, spec.notify) == ("acme", 3, "https://hooks.example/x")
    # the canonical URLs once each, then the invalid ones as sent (the pipeline records them)
    assert sent_urls == ["https://example.com/a", "https://example.com/b", "not a url",
                         "mailto:x@example.com"]


def test_the_same_batch_id_again_creates_nothing_new(store):
    publish = Published()
    urls = ["https://example.com/a", "https://example.com/b"]
    submit_batch(_spec(), urls, publish=publish, store=store)
    _record(store, _spec(), urls, T0)  # the intake took it in
    again = submit_batch(_spec(), [*urls, "https://example.com/c"], publish=publish,
                         store=store)
    assert again.existing and again.batch_id == "orders-1"
    assert (again.unique, again.invalid) == (2, 0)  # the recorded batch's sizes
    assert len(publish.messages) == 1


def test_another_clients_batch_id_is_refused(store):
    _record(store, _spec(client="globex"), ["https://example.com/a"], T0)
    publish = Published()
    with pytest.raises(BatchIdTaken, match="another client"):
        submit_batch(_spec(client="acme"), ["https://example.com/a"], publish=publish,
                     store=store)
    assert publish.messages == []


def test_ten_thousand_urls_are_accepted(store):
    publish = Published()
    urls = [f"https://example.com/page/{i}" for i in range(MAX_BATCH_URLS)]
    result = submit_batch(_spec(), urls, publish=publish, store=store)
    assert (result.sent, result.unique, result.invalid) == (10_000, 10_000, 0)
    assert len(decode_batch(publish.messages[0][0])[1]) == 10_000


def test_ten_thousand_and_one_urls_are_refused_naming_the_limit(store):
    publish = Published()
    urls = [f"https://example.com/page/{i}" for i in range(MAX_BATCH_URLS + 1)]
    with pytest.raises(BatchError, match="at most 10,000 URLs"):
        submit_batch(_spec(), urls, publish=publish, store=store)
    assert publish.messages == []


@pytest.mark.parametrize("spec, urls", [
    (_spec(client="Not A Client"), ["https://example.com/"]),
    (_spec(batch_id="no spaces please"), ["https://example.com/"]),
    (_spec(milestone_step=101), ["https://example.com/"]),
    (_spec(), []),
])
def test_a_batch_that_cannot_be_accepted_raises_and_publishes_nothing(store, spec, urls):
    publish = Published()
    with pytest.raises(BatchError):
        submit_batch(spec, urls, publish=publish, store=store)
    assert publish.messages == []


def test_a_batch_too_large_for_one_message_is_a_batch_error(store):
    publish = Published()
    urls = [f"https://example.com/{i}/{'x' * 1000}" for i in range(MAX_BATCH_URLS)]
    with pytest.raises(BatchError, match="split it"):
        submit_batch(_spec(), urls, publish=publish, store=store)
    assert publish.messages == []


# --- batch_status ------------------------------------------------------------------------------


def test_status_counts_each_urls_outcome_once_with_progress_and_eta(store):
    urls = [f"https://example.com/{i}" for i in range(10)] + ["not a url"]
    _record(store, _spec(milestone_step=50), urls, T0)
    _outcomes(store, "orders-1", [
        ("not a url", "invalid", T0 + 1),
        ("https://example.com/0", "fetched", T0 + 1),
        ("https://example.com/1", "fetched", T0 + 3),
        ("https://example.com/1", "fetched", T0 + 3),  # a redelivery: the same cell
        ("https://example.com/2", "robots_blocked", T0 + 5),
        ("https://example.com/3", "cached", T0 + 5),
        ("https://example.com/4", "error", T0 + 9),
    ])
    store.write_rows(BATCHES_TABLE, [notified_row("orders-1", "50%", T0 + 9),
                                     hook_row("orders-1", "50%", [{"at": T0 + 9, "status": 500},
                                                                  {"at": T0 + 11,
                                                                   "status": 200}],
                                              True, T0 + 11)])
    doc = batch_status(store, "orders-1", now=T0 + 9)
    assert doc is not None
    assert (doc["batch_id"], doc["client"], doc["state"]) == ("orders-1", "acme", "running")
    assert (doc["sent"], doc["unique"], doc["invalid"], doc["total"]) == (11, 10, 1, 11)
    assert doc["outcomes"] == {"cached": 1, "error": 1, "fetched": 2, "invalid": 1,
                               "robots_blocked": 1}
    assert (doc["finished"], doc["percent"]) == (6, 54.5)
    # 5 more outcomes in 8 s after the first: 5 left at the same rate take 8 s
    assert doc["eta_seconds"] == 8.0
    assert doc["submitted_at"] == "2026-05-28T20:26:40.000Z" and doc["done_at"] is None
    assert doc["milestone_step"] == 50
    ((note,),) = [doc["notifications"]]
    assert note["transition"] == "50%" and note["sent_at"].startswith("2026-")
    assert note["webhook"]["ok"] is True and len(note["webhook"]["attempts"]) == 2
    json.dumps(doc)  # the API returns it as is


def test_a_done_batch_has_its_done_time_and_no_eta(store):
    _record(store, _spec(), ["https://example.com/a", "https://example.com/b"], T0)
    _outcomes(store, "orders-1", [("https://example.com/a", "fetched", T0 + 2),
                                  ("https://example.com/b", "not_found", T0 + 4)])
    store.write_rows(BATCHES_TABLE, [state_row("orders-1", "done", T0 + 4,
                                               {"fetched": 1, "not_found": 1})])
    doc = batch_status(store, "orders-1", now=T0 + 60)
    assert doc is not None
    assert (doc["state"], doc["percent"], doc["eta_seconds"]) == ("done", 100.0, 0.0)
    assert doc["done_at"] == "2026-05-28T20:26:44.000Z"


def test_status_of_an_unknown_batch_is_none(store):
    assert batch_status(store, "never-submitted", now=T0) is None


def test_an_eta_needs_two_outcomes(store):
    _record(store, _spec(), ["https://example.com/a", "https://example.com/b"], T0)
    _outcomes(store, "orders-1", [("https://example.com/a", "fetched", T0 + 2)])
    doc = batch_status(store, "orders-1", now=T0 + 3)
    assert doc is not None and doc["eta_seconds"] is None
    assert "ETA unknown yet" in format_status(doc)


# --- list_batches ------------------------------------------------------------------------------


def _three_batches(store: MemoryFrontierStore) -> None:
    urls = ["https://example.com/a", "https://example.com/b"]
    _record(store, _spec("old", "acme"), urls, T0)
    _record(store, _spec("new", "acme"), urls, T0 + 200)
    _record(store, _spec("theirs", "globex"), urls, T0 + 100)
    _outcomes(store, "old", [("https://example.com/a", "fetched", T0 + 1),
                             ("https://example.com/b", "error", T0 + 2)])
    store.write_rows(BATCHES_TABLE, [state_row("old", "done", T0 + 2,
                                               {"error": 1, "fetched": 1})])
    _outcomes(store, "new", [("https://example.com/a", "fetched", T0 + 201)])


def test_list_is_newest_first_with_counts(store):
    _three_batches(store)
    docs = list_batches(store)
    assert [d["batch_id"] for d in docs] == ["new", "theirs", "old"]
    by_id = {d["batch_id"]: d for d in docs}
    assert (by_id["old"]["state"], by_id["old"]["outcomes"]) == (
        "done", {"error": 1, "fetched": 1})
    assert (by_id["new"]["finished"], by_id["new"]["percent"]) == (1, 50.0)
    assert by_id["theirs"]["outcomes"] == {}


def test_list_of_one_client(store):
    _three_batches(store)
    assert [d["batch_id"] for d in list_batches(store, client="acme")] == ["new", "old"]
    assert list_batches(store, client="nobody") == []


# --- text --------------------------------------------------------------------------------------


def test_format_status_shows_state_counts_percent_and_eta(store):
    _record(store, _spec(), [f"https://example.com/{i}" for i in range(4)], T0)
    _outcomes(store, "orders-1", [("https://example.com/0", "fetched", T0),
                                  ("https://example.com/1", "not_found", T0 + 30)])
    store.write_rows(BATCHES_TABLE, [hook_row("orders-1", "50%", [{"status": 500}], False,
                                              T0 + 30)])
    doc = batch_status(store, "orders-1", now=T0 + 30)
    assert doc is not None
    text = format_status(doc)
    assert "batch orders-1 (client acme): running" in text
    assert "finished 2 of 4 (50.0%), ETA 1m 00s" in text
    assert "fetched" in text and "not_found" in text
    assert "webhook not delivered after 1 attempt" in text


def test_format_list(store):
    _three_batches(store)
    lines = format_list(list_batches(store)).splitlines()
    assert lines[0].split() == ["BATCH", "CLIENT", "STATE", "FINISHED", "TOTAL", "PERCENT",
                                "SUBMITTED"]
    assert lines[1].split()[:6] == ["new", "acme", "running", "1", "2", "50.0%"]
    assert format_list([]) == "no batches"


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.4, "59s"), (61, "1m 01s"),
                                           (3600, "1h 00m"), (7500, "2h 05m")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


# --- the command line --------------------------------------------------------------------------


def test_parse_submit():
    args = build_parser().parse_args([
        "submit", "--client", "acme", "--batch-id", "b1", "--priority", "2",
        "--cache-hours", "24", "--notify", "https://hooks.example/x", "--milestone-step", "10",
        "https://example.com/"])
    assert (args.client, args.batch_id, args.priority, args.cache_hours, args.notify,
            args.milestone_step, args.urls) == ("acme", "b1", 2, 24.0, "https://hooks.example/x",
                                                10, ["https://example.com/"])
    assert args.table == "batches"


def test_parse_batch_status_and_ls():
    args = build_parser().parse_args(["batch", "status", "b1", "--json"])
    assert (args.command, args.batch_command, args.batch_id, args.json) == (
        "batch", "status", "b1", True)
    args = build_parser().parse_args(["batch", "ls", "--client", "acme"])
    assert (args.batch_command, args.client, args.json) == ("ls", "acme", False)


def test_parse_api():
    args = build_parser().parse_args(["api", "--clients", "c.json", "--port", "9000"])
    assert (args.clients, args.host, args.port) == ("c.json", "127.0.0.1", 9000)


def test_url_lines_skip_blanks_and_comments():
    assert url_lines("# batch\nhttps://a.example/\n\n  https://b.example/  \n") == [
        "https://a.example/", "https://b.example/"]


@pytest.fixture
def offline_emulators(monkeypatch):
    """Client libraries aimed at a closed port: building them connects nowhere."""
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9")
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9")


@pytest.mark.filterwarnings("ignore:Connecting to Bigtable emulator:RuntimeWarning")
def test_submit_of_too_many_urls_exits_2_naming_the_limit(tmp_path, capsys,
                                                          offline_emulators):
    urls = tmp_path / "urls.txt"
    urls.write_text("\n".join(f"https://example.com/{i}" for i in range(MAX_BATCH_URLS + 1)))
    code = main(["--state-dir", str(tmp_path), "submit", "--client", "acme", "--project", "p",
                 "--file", str(urls)])
    assert code == 2
    assert "error: a batch has at most 10,000 URLs" in capsys.readouterr().err


def test_submit_with_urls_and_a_file_exits_2(tmp_path, capsys):
    code = main(["--state-dir", str(tmp_path), "submit", "--client", "acme",
                 "https://example.com/", "--file", "urls.txt"])
    assert code == 2
    assert "not both" in capsys.readouterr().err
