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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.metrics import Metrics
from apache_beam.transforms.core import RestrictionProvider
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Duration, Timestamp

_LOG = logging.getLogger(__name__)
_NAMESPACE = "pubsub_source"
ENDLESS = 2**62  # positions of the endless restriction: one per pull
ACK_CHUNK = 1000  # ack ids per acknowledge / modify_ack_deadline call


@dataclass(frozen=True)
class PulledMessage:
    """One received message: its ack id and its content."""

    ack_id: str
    data: bytes
    attributes: dict[str, str]
    message_id: str
    publish_time: float  # seconds since the epoch


class Subscriber(Protocol):
    """The part of ``pubsub_v1.SubscriberClient`` the source uses (tests pass the real one)."""

    def pull(self, request: dict[str, Any], timeout: float, retry: Any) -> Any: ...

    def acknowledge(self, request: dict[str, Any]) -> Any: ...

    def modify_ack_deadline(self, request: dict[str, Any]) -> Any: ...


def _chunks(items: Sequence[str], size: int = ACK_CHUNK) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


class AckLeases:
    """The messages of one subscription that were pulled but not yet acknowledged.

    A background thread extends their ack deadline every ``deadline / 2`` seconds until they are
    acknowledged or have been held for ``max_lease_seconds``. One instance per subscription and
    worker process (``leases_for``), shared by every reader and finalizer in the process.
    """

    def __init__(self, subscriber: Subscriber, subscription: str, deadline_seconds: int = 60,
                 max_lease_seconds: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._subscriber = subscriber
        self._subscription = subscription
        self._deadline = deadline_seconds
        self._max_lease = max_lease_seconds
        self._clock = clock
        self._pending: dict[str, float] = {}  # ack id -> when it was pulled
        self.acked_total = 0  # in this process, for logs and tests (Metrics may be unreadable)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.acked = Metrics.counter(_NAMESPACE, "acked")
        self.ack_errors = Metrics.counter(_NAMESPACE, "ack_errors")
        self.extended = Metrics.counter(_NAMESPACE, "lease_extensions")
        self.expired = Metrics.counter(_NAMESPACE, "leases_given_up")

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def hold(self, ack_ids: Iterable[str], set_deadline: bool = False) -> None:
        """Starts keeping ``ack_ids`` leased; starts the extender thread on first use.

        With ``set_deadline`` their deadline is set to this keeper's at once (rather than at
        the next extension), so messages of a process that dies are delivered again that soon
        after, whatever the subscription's own ack deadline.
        """
        now = self._clock()
        ids = list(ack_ids)
        with self._lock:
            for ack_id in ids:
                self._pending.setdefault(ack_id, now)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="pubsub-ack-leases",
                                                daemon=True)
                self._thread.start()
        if set_deadline:
            self._modify(ids)

    def ack(self, ack_ids: Sequence[str]) -> int:
        """Acknowledges ``ack_ids``; returns how many were acknowledged. Errors are counted and
        logged, never raised: an unacknowledged message is redelivered, which is safe."""
        done = 0
        for chunk in _chunks(ack_ids):
            try:
                self._subscriber.acknowledge(
                    request={"subscription": self._subscription, "ack_ids": chunk})
                done += len(chunk)
            except Exception as exc:  # a failed ack only means redelivery
                self.ack_errors.inc(len(chunk))
                _LOG.warning("acknowledge of %d messages on %s failed: %s", len(chunk),
                             self._subscription, exc)
        with self._lock:
            for ack_id in ack_ids:
                self._pending.pop(ack_id, None)
        self.acked.inc(done)
        with self._lock:
            self.acked_total += done
        return done

    def extend_once(self) -> int:
        """Extends every held lease once, drops the ones held too long; returns how many."""
        now = self._clock()
        with self._lock:
            stale = [a for a, t in self._pending.items() if now - t > self._max_lease]
            for ack_id in stale:
                del self._pending[ack_id]
            live = list(self._pending)
        if stale:
            self.expired.inc(len(stale))
            _LOG.warning("gave up the lease of %d messages on %s after %.0f s; Pub/Sub will "
                         "redeliver them", len(stale), self._subscription, self._max_lease)
        self._modify(live)
        self.extended.inc(len(live))
        return len(live)

    def _modify(self, ack_ids: Sequence[str]) -> None:
        for chunk in _chunks(ack_ids):
            try:
                self._subscriber.modify_ack_deadline(request={
                    "subscription": self._subscription, "ack_ids": chunk,
                    "ack_deadline_seconds": self._deadline})
            except Exception as exc:
                _LOG.warning("extending %d leases on %s failed: %s", len(chunk),
                             self._subscription, exc)

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(max(1.0, self._deadline / 2)):
            if self.pending:
                self.extend_once()


_LEASES: dict[str, AckLeases] = {}
_LEASES_LOCK = threading.Lock()


def leases_for(subscription: str, factory: Callable[[], AckLeases]) -> AckLeases:
    """The process-wide ``AckLeases`` of ``subscription``."""
    with _LEASES_LOCK:
        leases = _LEASES.get(subscription)
        if leases is None:
            leases = _LEASES[subscription] = factory()
        return leases


def lease_stats(subscription: str) -> tuple[int, int] | None:
    """(acknowledged, still held) for ``subscription`` in this process; None if never read."""
    with _LEASES_LOCK:
        leases = _LEASES.get(subscription)
    return None if leases is None else (leases.acked_total, leases.pending)


class PullSize:
    """How many messages one pull asks for.

    A pull's answer travels in one gRPC message, which a client refuses past its receive
    limit: the client library lifts the limit on its channel to Pub/Sub, but its channel to
    the emulator keeps gRPC's default of 4 MiB, and 100 frontier messages of 1,000 URLs each
    are about 11 MB. The messages of a refused answer were leased all the same: Pub/Sub
    delivers them again only once their ack deadline has passed. So a pull asks for as many
    messages as fit ``ANSWER_BYTES`` at the average size of the messages answered so far (at
    most ``ceiling``; ``START`` before any came); a refused pull (``ResourceExhausted``) is
    asked again for a quarter as many, down to one.
    """

    ANSWER_BYTES = 3 * 1024 * 1024
    START = 4

    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError("a pull asks for at least one message")
        self.ceiling = ceiling
        self.current = min(ceiling, self.START)

    def shrink(self) -> bool:
        """After a refused pull: False when it asked for one message already."""
        if self.current == 1:
            return False
        self.current = max(1, self.current // 4)
        return True

    def answered(self, messages: int, size_bytes: int) -> None:
        """After an answer of ``messages`` messages of ``size_bytes`` bytes in all."""
        if messages:
            average = max(1, size_bytes // messages)
            self.current = max(1, min(self.ceiling, self.ANSWER_BYTES // average))


def pull_within_limits(pull: Callable[[int], Any], size: PullSize) -> Any:
    """``pull(n)`` with ``n = size.current``, asked again smaller while the answer is too big
    for the client (see ``PullSize``); returns the pull's answer (a ``PullResponse``).

    Raises:
        google.api_core.exceptions.ResourceExhausted: even one message is too big.
    """
    from google.api_core import exceptions as gexc

    while True:
        try:
            answer = pull(size.current)
        except gexc.ResourceExhausted:
            if not size.shrink():
                raise
            _LOG.info("pull answer too big; asking for %d messages at a time", size.current)
            continue
        received = answer.received_messages
        size.answered(len(received), sum(len(r.message.data) for r in received))
        return answer


def pull_messages(subscriber: Subscriber, subscription: str, max_messages: int | PullSize,
                  wait_seconds: float) -> list[PulledMessage]:
    """One pull of at most ``max_messages`` (a ``PullSize`` adapts to the client's receive
    limit), waiting at most ``wait_seconds``; [] when none."""
    from google.api_core import exceptions as gexc

    size = max_messages if isinstance(max_messages, PullSize) else PullSize(max_messages)
    try:
        response = pull_within_limits(lambda n: subscriber.pull(
            request={"subscription": subscription, "max_messages": n},
            timeout=wait_seconds, retry=None), size)
    except (gexc.DeadlineExceeded, gexc.ServiceUnavailable, gexc.RetryError):
        return []
    out = []
    for received in response.received_messages:
        m = received.message
        publish = m.publish_time.timestamp() if m.publish_time else time.time()
        out.append(PulledMessage(received.ack_id, bytes(m.data), dict(m.attributes),
                                 m.message_id, publish))
    return out


def to_beam_message(m: PulledMessage) -> PubsubMessage:
    """The same shape ``ReadFromPubSub(with_attributes=True)`` produces."""
    return PubsubMessage(m.data, m.attributes, message_id=m.message_id,
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
    """Pulls, emits, and acknowledges after the runner's checkpoint (see the module docstring)."""

    def __init__(self, subscription: str, max_messages: int, poll_seconds: float,
                 wait_seconds: float, ack_deadline_seconds: int) -> None:
        self._subscription = subscription
        self._max_messages = max_messages
        self._poll = poll_seconds
        self._wait = wait_seconds
        self._deadline = ack_deadline_seconds
        self._subscriber: Any = None
        self._leases: AckLeases | None = None
        self._pulled = Metrics.counter(_NAMESPACE, "pulled")
        self._batch = Metrics.distribution(_NAMESPACE, "pull_batch_size")

    def setup(self) -> None:
        from google.cloud import pubsub_v1

        self._subscriber = pubsub_v1.SubscriberClient()
        self._pull_size = PullSize(self._max_messages)
        self._leases = leases_for(self._subscription, lambda: AckLeases(
            pubsub_v1.SubscriberClient(), self._subscription, self._deadline))

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
        messages = pull_messages(self._subscriber, self._subscription, self._pull_size,
                                 self._wait)
        now = Timestamp.now()
        if messages:
            ack_ids = [m.ack_id for m in messages]
            self._leases.hold(ack_ids)
            leases = self._leases
            bundle_finalizer.register(lambda: leases.ack(ack_ids))
            self._pulled.inc(len(messages))
            self._batch.update(len(messages))
            for m in messages:
                yield TimestampedValue(to_beam_message(m), now)
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
    """

    def __init__(self, subscription: str, readers: int = 1, max_messages: int = 500,
                 poll_seconds: float = 0.2, wait_seconds: float = 1.0,
                 ack_deadline_seconds: int = 60) -> None:
        super().__init__()
        if readers < 1 or max_messages < 1 or poll_seconds < 0 or wait_seconds <= 0:
            raise ValueError("readers and max_messages must be >= 1, poll_seconds >= 0 and "
                             "wait_seconds > 0")
        self._subscription = subscription
        self._readers = readers
        self._fn = _PullMessagesFn(subscription, max_messages, poll_seconds, wait_seconds,
                                   ack_deadline_seconds)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (pbegin
                | "Readers" >> beam.Create(list(range(self._readers)))
                | "Pull" >> beam.ParDo(self._fn))
