"""``AcknowledgeMessages``: acknowledges a Pub/Sub message once every part of it is recorded.

Where the runner does not acknowledge by itself after a durable checkpoint (the DirectRunner,
whose native read ``pipeline.local.pubsub_read`` makes leave acknowledgement to the pipeline), each
message's parts travel with an ``AckToken`` (``transforms.ingest``) to the step that makes them
durable: the frontier's table writes for its URLs, the dead-letter sink for its bad ones. Those
steps emit the token only after their writes returned. Here a token of a one-part message is
acknowledged at once; the parts of a message split over several keys are collected in state
keyed by ack id, and the message is acknowledged with its last part.

    pulled (not acknowledged; its ack deadline kept extended) -> URLs admitted -> index and
    ``queued`` rows written -> token -> acknowledged

A crash anywhere before the acknowledgement leaves the message to be delivered again after
its ack deadline; the URLs it carries are then known (seen filter, rows) or admitted again, so
nothing is lost and nothing is fetched twice. Acknowledging an id twice is harmless.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.userstate import BagStateSpec

from transforms import METRICS_NAMESPACE
from transforms.core.records import AckToken
from transforms.stores.pubsub import subscription_leases

PARTS_TAG = "parts"
class _AckWholeMessagesFn(beam.DoFn):
    """Acknowledges one-part messages (in one call per bundle); passes the others on."""

    def __init__(self, subscription: str) -> None:
        self._subscription = subscription

    def setup(self) -> None:
        self._leases = subscription_leases(self._subscription)
        self._acked = Metrics.counter(METRICS_NAMESPACE, "messages_acknowledged")

    def start_bundle(self) -> None:
        self._ids: list[str] = []

    def process(self, token: AckToken) -> Iterator[Any]:
        if token.parts <= 1:
            self._ids.append(token.ack_id)
        else:
            yield beam.pvalue.TaggedOutput(PARTS_TAG, (token.ack_id, token))

    def finish_bundle(self) -> None:
        if self._ids:
            self._acked.inc(self._leases.ack(self._ids))
        self._ids = []


class _CollectPartsFn(beam.DoFn):
    """Keyed by ack id: acknowledges the message when all its parts have arrived."""

    PARTS = BagStateSpec("parts", VarIntCoder())

    def __init__(self, subscription: str) -> None:
        self._subscription = subscription

    def setup(self) -> None:
        self._leases = subscription_leases(self._subscription)
        self._acked = Metrics.counter(METRICS_NAMESPACE, "messages_acknowledged")

    def process(self, element: tuple[str, AckToken],
                parts=beam.DoFn.StateParam(PARTS)) -> None:
        ack_id, token = element
        parts.add(token.part)
        if len(set(parts.read())) >= token.parts:
            self._acked.inc(self._leases.ack([ack_id]))
            parts.clear()


class AcknowledgeMessages(beam.PTransform):
    """AckTokens -> acknowledged messages of ``subscription`` (nothing comes out)."""

    def __init__(self, subscription: str) -> None:
        super().__init__()
        self._subscription = subscription

    def expand(self, tokens: beam.PCollection) -> beam.pvalue.PDone:
        split = tokens | "AckWholeMessages" >> beam.ParDo(
            _AckWholeMessagesFn(self._subscription)).with_outputs(PARTS_TAG, main="done")
        _ = (split[PARTS_TAG]
             # A typed key: keyed state needs a deterministic key coder (UTF-8 for str).
             | "KeyByAckId" >> beam.Map(lambda kv: kv).with_output_types(tuple[str, Any])
             | "CollectParts" >> beam.ParDo(_CollectPartsFn(self._subscription)))
        return beam.pvalue.PDone(tokens.pipeline)
