"""``WriteRows`` on Beam's TestPipeline, into the in-memory store: rows first, then the index
entries they settle, then the acknowledgements that waited for them."""

from __future__ import annotations

import dataclasses
import json
import uuid

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from tests.transforms.results import fetch_result
from transforms.core.records import AckToken, CrawlRequest, HostStats, UrlOutcome
from transforms.formats.index import IndexEntry
from transforms.formats.row_writes import RowWrite, fetch_write
from transforms.formats.rowkeys import row_key
from transforms.formats.rows import host_row, outcome_row
from transforms.formats.schema import BATCHES_TABLE, HOSTS_TABLE, WEBTABLE
from transforms.frontier.store import StoreBatch
from transforms.storage import WriteRows
from transforms.stores.memory import MemoryStoreSpec, memory_store


def test_webtable_rows_are_written_then_their_index_entries_deleted_then_tokens_released():
    name = f"storage-{uuid.uuid4().hex}"
    store = memory_store(name)
    url = "http://site.example/page"
    entry = IndexEntry("site.example", 1.0, CrawlRequest(url), 0.0, 1)
    store.write(StoreBatch(index_puts=[entry]))
    assert store.index_urls("site.example") == [url]
    result = fetch_result(url, body=None, status=404, outcome="not_stored",
                          index_key=entry.row_key)
    writes = [fetch_write(result)._replace(tokens=(AckToken("m1", 0, 1),)),
              RowWrite(outcome_row(UrlOutcome(CrawlRequest("http://site.example/q"),
                                              "site.example", "queued", 5.0)))]
    with TestPipeline() as p:
        written = p | beam.Create(writes) | WriteRows(MemoryStoreSpec(name), WEBTABLE,
                                                      webtable=True)
        assert_that(written.tokens, equal_to([AckToken("m1", 0, 1)]))
        assert_that(written.batch_events, equal_to([]), label="NoBatchEvents")
    assert store.status(url) == "not_stored" and store.status("http://site.example/q") == "queued"
    assert store.index_urls("site.example") == []  # settled once the row was written


def test_rows_of_another_table_go_there_and_nothing_waits_on_them():
    name = f"storage-{uuid.uuid4().hex}"
    stats = HostStats(host="site.example", updated_at=1.0, fetched=3, errors=0, bytes=10,
                      robots_blocked=0, dedup_dropped=0, filtered=0, budget_exceeded=0,
                      accepted=3, queued=0, lease_active=False, delay=1.0,
                      robots_status="parsed", last_error="")
    with TestPipeline() as p:
        written = p | beam.Create([host_row(stats)]) | WriteRows(MemoryStoreSpec(name),
                                                                 HOSTS_TABLE)
        assert_that(written.tokens, equal_to([]))
    assert memory_store(name).latest(memory_store(name).hosts, "site.example")["h"][
        "fetched"] == "3"


def test_a_batch_urls_outcome_is_written_with_its_row_and_then_comes_out_as_an_event():
    name = f"storage-{uuid.uuid4().hex}"
    store = memory_store(name)
    url = "http://site.example/b"
    request = CrawlRequest(url, batches=("batch-1", "batch-2"), client="acme")
    result = dataclasses.replace(fetch_result(url, body=None, status=404, outcome="not_stored"),
                                 request=request)
    with TestPipeline() as p:
        written = p | beam.Create([fetch_write(result)]) | WriteRows(
            MemoryStoreSpec(name), WEBTABLE, webtable=True)
        assert_that(written.batch_events | beam.FlatMap(lambda kv: [
            (kv[0], e.url, e.outcome, e.http_status) for e in kv[1]]),
                    equal_to([("batch-1", url, "not_stored", 404),
                              ("batch-2", url, "not_stored", 404)]))
    assert store.latest(store.webtable, row_key(url))["b"] == {"batch-1": "not_stored",
                                                                "batch-2": "not_stored"}
    cells = store.read_row(BATCHES_TABLE, "batch-1")
    assert cells is not None and json.loads(cells["u"][url])["o"] == "not_stored"
