"""``TakeInBatches``: client batch messages -> the batch's record, then its URLs to their keys.

Keyed by batch id, so the two deliveries of one batch (a client that submits the same id twice,
a Pub/Sub redelivery) meet in one key. For a batch id it has not seen (its state is empty and
the batches table has no record), the intake:

1. checks and normalizes the URLs (``transforms.core.batches.prepare_batch``, with the crawl's
   policy: the same code ``crawler submit`` and ``crawler api`` ran before they published);
2. writes the batch's record and its ``invalid`` outcomes to the batches table (blocking, before
   anything depends on the batch);
3. sends each URL, tagged with the batch id, the client and the cache time, to its frontier key,
   carrying a part of the message's acknowledgement (acknowledged once every key has recorded
   its URLs), and the ``invalid`` outcomes to ``transforms.batch_progress``.

A batch id that has a record already creates nothing new: its message is acknowledged and
counted (``batches_repeated``). The ``known`` flag in state saves the table read for the second
delivery of a batch this worker took in; a moved key or a new job reads the record instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.coders import BooleanCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

from transforms import METRICS_NAMESPACE
from transforms.core.batches import INVALID, BatchError, prepare_batch
from transforms.core.policy import Policy
from transforms.core.records import (
    AckToken,
    BatchEvent,
    BatchSubmission,
    CrawlRequest,
    DeadLetter,
    FrontierWork,
)
from transforms.core.url_keys import canonical_for_host, key_requests
from transforms.formats.batch_rows import outcome_rows, read_record, record_row
from transforms.frontier.store import StoreSpec

ACKS_TAG = "acks"
EVENTS_TAG = "events"
DEAD_LETTER_TAG = "dead_letter"


class _IntakeFn(beam.DoFn):
    KNOWN = ReadModifyWriteStateSpec("known", BooleanCoder())

    def __init__(self, store: StoreSpec, table: str, policy: Policy) -> None:
        self._spec, self._table, self._policy = store, table, policy

    def setup(self) -> None:
        self._store = self._spec.open()
        self._taken = Metrics.counter(METRICS_NAMESPACE, "batches_taken_in")
        self._repeated = Metrics.counter(METRICS_NAMESPACE, "batches_repeated")
        self._refused = Metrics.counter(METRICS_NAMESPACE, "batches_refused")
        self._urls = Metrics.counter(METRICS_NAMESPACE, "batch_urls_taken_in")

    def teardown(self) -> None:
        self._store.close()

    def process(self, element: tuple[str, BatchSubmission],
                known=beam.DoFn.StateParam(KNOWN)) -> Iterator[Any]:
        batch_id, submission = element
        if known.read() or read_record(
                batch_id, self._store.read_row(self._table, batch_id)) is not None:
            known.write(True)
            self._repeated.inc()
            for token in submission.tokens:
                yield beam.pvalue.TaggedOutput(ACKS_TAG, token)
            return
        now = time.time()
        policy = self._policy
        try:
            batch = prepare_batch(submission.spec, submission.urls,
                                  lambda url: canonical_for_host(url, policy)[0],
                                  submission.sent)
        except BatchError as exc:
            self._refused.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, DeadLetter(
                "batch", f"{batch_id}: {exc}", batch_id.encode(), now, submission.tokens))
            return
        spec = batch.spec
        requests = [CrawlRequest(url, priority=spec.priority, batches=(batch_id,),
                                 client=spec.client, cache_hours=spec.cache_hours)
                    for url in batch.urls]
        by_key, refused = key_requests(requests, policy)
        events = [BatchEvent(batch_id, url, INVALID, now, detail=reason[:300])
                  for url, reason in (*batch.invalid, *refused)]
        self._store.write_rows(self._table, [record_row(batch, now), *outcome_rows(events)])
        known.write(True)
        self._taken.inc()
        self._urls.inc(batch.total)
        for i, (key, key_requests_) in enumerate(by_key.items()):
            tokens = tuple(AckToken(t.ack_id, i, len(by_key)) for t in submission.tokens)
            yield key, FrontierWork(tuple(key_requests_), tokens)
        if not by_key:
            for token in submission.tokens:
                yield beam.pvalue.TaggedOutput(ACKS_TAG, token)
        if events:
            yield beam.pvalue.TaggedOutput(EVENTS_TAG, (batch_id, tuple(events)))


class IntakeOutputs(NamedTuple):
    requests: beam.PCollection  # (frontier key, FrontierWork) of the new batches' URLs
    events: beam.PCollection  # (batch id, (BatchEvent, ...)): the invalid URLs' outcomes
    acks: beam.PCollection  # AckToken of repeated batches and of batches with no valid URL
    dead_letters: beam.PCollection  # DeadLetter: batches that cannot be taken in


class TakeInBatches(beam.PTransform):
    """(batch id, BatchSubmission) -> the new batches' URLs for the frontier (see the module
    docstring); ``table`` is the batches table of ``store``."""

    def __init__(self, store: StoreSpec, table: str, policy: Policy) -> None:
        super().__init__()
        self._store, self._table, self._policy = store, table, policy

    def expand(self, batches: beam.PCollection) -> IntakeOutputs:
        outputs = batches | "RecordBatches" >> beam.ParDo(
            _IntakeFn(self._store, self._table, self._policy)).with_input_types(
                tuple[str, Any]).with_output_types(
                tuple[str, Any]).with_outputs(EVENTS_TAG, ACKS_TAG, DEAD_LETTER_TAG,
                                              main="requests")
        return IntakeOutputs(outputs.requests, outputs[EVENTS_TAG], outputs[ACKS_TAG],
                             outputs[DEAD_LETTER_TAG])
