"""A runner-portable Pub/Sub source: ``PullFromPubSub``.

Beam's Python ``ReadFromPubSub`` is a native source that only Dataflow and the DirectRunner can
run. This one is an ordinary splittable DoFn, so it runs wherever Python SDFs do (Flink, Prism,
Spark, Dataflow):

    Impulse -> reader ids 0..readers-1 -> _PullMessagesFn (one endless restriction per reader)

Each ``process`` call claims one position of an endless offset range, pulls up to
``max_messages`` from the subscription (a bounded wait, never an open-ended block), emits them as
``PubsubMessage`` and defers the rest of the restriction (at once after a full pull, after
``poll_seconds`` after an empty one). The runner commits the bundle's output with its next
checkpoint and only then calls the bundle finalizer, which acknowledges the bundle's messages:
at-least-once delivery. A crash before the checkpoint leaves the messages unacknowledged and
Pub/Sub redelivers them; the frontier's seen-URL filter makes the redelivered URLs no-ops.

Timeline of one message:
    pulled (ack deadline D) -> emitted -> bundle ends -> lease kept alive every D/2 s
    -> runner checkpoint completes -> bundle finalized -> acknowledged

Acknowledging is idempotent (acking an id twice, or an expired id, is harmless), and a
message whose bundle is never finalized stops being extended after ``max_lease_seconds`` and is
redelivered.

With ``pipeline_acks`` (Prism: it keeps state in memory and finalizes each bundle right after
it, with no durable checkpoint in between, so a finalizer ack would lose a killed run's
messages) the reader never acknowledges: each message carries its ack id as the
``crawler-ack-id`` attribute, its lease is kept (``transforms.stores.pubsub.subscription_leases``)
and ``transforms.acks`` acknowledges it once its URLs' rows are written, as on the DirectRunner.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.metrics import Metrics
from apache_beam.transforms.core import RestrictionProvider
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Duration, Timestamp

from transforms import METRICS_NAMESPACE
from transforms.formats.messages import ACK_ID_ATTRIBUTE
from transforms.stores.pubsub import (
    AckLeases,
    PulledMessage,
    PullSize,
    leases_for,
    pull_messages,
    subscription_leases,
)

_LOG = logging.getLogger(__name__)
ENDLESS = 2**62  # positions of the endless restriction: one per pull


def to_beam_message(m: PulledMessage, with_ack_id: bool = False) -> PubsubMessage:
    """The same shape ``ReadFromPubSub(with_attributes=True)`` produces; ``with_ack_id`` adds
    the ack id as the ``ACK_ID_ATTRIBUTE`` (the pipeline then acknowledges, transforms.acks)."""
    attributes = dict(m.attributes, **{ACK_ID_ATTRIBUTE: m.ack_id}) if with_ack_id else m.attributes
    return PubsubMessage(m.data, attributes, message_id=m.message_id,
                         publish_time=Timestamp.of(m.publish_time))


class _EndlessRestrictionProvider(RestrictionProvider):
    """An endless offset range per reader: one position per pull."""

    def initial_restriction(self, element: int) -> OffsetRange:
        return OffsetRange(0, ENDLESS)

    def create_tracker(self, restriction: OffsetRange) -> OffsetRestrictionTracker:
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element: int, restriction: OffsetRange) -> int:
        return 1

    def truncate(self, element: int, restriction: OffsetRange) -> None:
        return None  # on drain, stop pulling


class _PullMessagesFn(beam.DoFn):
    """Pulls, emits, and acknowledges after the runner's checkpoint, or with ``pipeline_acks``
    leaves acknowledgement to the pipeline (see the module docstring)."""

    def __init__(self, subscription: str, max_messages: int, poll_seconds: float,
                 wait_seconds: float, ack_deadline_seconds: int,
                 pipeline_acks: bool = False) -> None:
        self._subscription = subscription
        self._pipeline_acks = pipeline_acks
        self._max_messages = max_messages
        self._poll = poll_seconds
        self._wait = wait_seconds
        self._deadline = ack_deadline_seconds
        self._subscriber: Any = None
        self._leases: AckLeases | None = None
        self._pulled = Metrics.counter(METRICS_NAMESPACE, "pubsub_pulled")
        self._batch = Metrics.distribution(METRICS_NAMESPACE, "pubsub_pull_batch_size")

    def setup(self) -> None:
        from google.cloud import pubsub_v1

        self._subscriber = pubsub_v1.SubscriberClient()
        self._pull_size = PullSize(self._max_messages)
        if self._pipeline_acks:  # the process-wide keeper that AcknowledgeMessages acks through
            self._leases = subscription_leases(self._subscription)
        else:
            self._leases = leases_for(self._subscription, lambda: AckLeases(
                pubsub_v1.SubscriberClient(), self._subscription, self._deadline))

    def teardown(self) -> None:
        """Closes this reader's client; the process-wide lease keeper stays, as other readers
        and finalizers of the process share it."""
        if self._subscriber is not None:
            subscriber, self._subscriber = self._subscriber, None
            subscriber.close()

    def _pull(self) -> list[PulledMessage]:
        """One pull. A pull cut off because the worker tears this reader down (a cancelled job
        closes the client under it) returns nothing: its messages were never delivered."""
        from google.api_core import exceptions

        subscriber = self._subscriber
        try:
            return pull_messages(subscriber, self._subscription, self._pull_size, self._wait)
        except (exceptions.Cancelled, ValueError):
            if self._subscriber is None:  # closed by teardown meanwhile
                return []
            raise

    @beam.DoFn.unbounded_per_element()
    def process(
        self,
        reader: int,
        bundle_finalizer=beam.DoFn.BundleFinalizerParam,
        tracker=beam.DoFn.RestrictionParam(_EndlessRestrictionProvider()),
        watermark=beam.DoFn.WatermarkEstimatorParam(
            ManualWatermarkEstimator.default_provider()),
    ) -> Iterator[TimestampedValue]:
        position = tracker.current_restriction().start
        if not tracker.try_claim(position):
            return
        assert self._leases is not None
        messages = self._pull()
        now = Timestamp.now()
        if messages:
            ack_ids = [m.ack_id for m in messages]
            leases = self._leases
            if self._pipeline_acks:  # transforms.acks acknowledges once the URLs are recorded
                leases.hold(ack_ids, set_deadline=True)
            else:
                leases.hold(ack_ids)
                bundle_finalizer.register(lambda: leases.ack(ack_ids))
            self._pulled.inc(len(messages))
            self._batch.update(len(messages))
            for m in messages:
                yield TimestampedValue(to_beam_message(m, with_ack_id=self._pipeline_acks), now)
        current = watermark.current_watermark()
        if current is None or now > current:
            watermark.set_watermark(now)
        tracker.defer_remainder(Duration(seconds=0 if messages else self._poll))


class PullFromPubSub(beam.PTransform):
    """Reads ``PubsubMessage``s (data and attributes) from a subscription on any runner.

    Args:
        subscription: ``projects/P/subscriptions/S``.
        readers: Concurrent pullers (each an SDF restriction a runner can place anywhere).
        max_messages: Most messages per pull.
        poll_seconds: Pause after an empty pull.
        wait_seconds: Longest a pull waits for messages.
        ack_deadline_seconds: Ack deadline the lease keeper renews while a bundle is open.
        pipeline_acks: Do not acknowledge after the bundle: attach the ack id
            (``ACK_ID_ATTRIBUTE``) and leave acknowledgement to ``transforms.acks``.
    """

    def __init__(self, subscription: str, readers: int = 1, max_messages: int = 500,
                 poll_seconds: float = 0.2, wait_seconds: float = 1.0,
                 ack_deadline_seconds: int = 60, pipeline_acks: bool = False) -> None:
        super().__init__()
        if readers < 1 or max_messages < 1 or poll_seconds < 0 or wait_seconds <= 0:
            raise ValueError("readers and max_messages must be >= 1, poll_seconds >= 0 and "
                             "wait_seconds > 0")
        self._subscription = subscription
        self._readers = readers
        self._fn = _PullMessagesFn(subscription, max_messages, poll_seconds, wait_seconds,
                                   ack_deadline_seconds, pipeline_acks)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (pbegin
                | "Readers" >> beam.Create(list(range(self._readers)))
                | "Pull" >> beam.ParDo(self._fn))
