"""Pub/Sub through its blocking client, for the pipeline's sources and sinks (no Beam).

* pulling: :func:`pull_messages`, sized by :class:`PullSize` to fit the client's receive limit;
* holding: :class:`AckLeases` keeps pulled messages leased (their ack deadline extended on a
  thread of its own) until they are acknowledged, one per subscription and process
  (:func:`leases_for`, :func:`subscription_leases`);
* publishing: :class:`PubsubPublisher` publishes a batch and waits until Pub/Sub has it;
  :func:`shared_publisher` is the process's one publisher of a topic (runners set DoFns up
  and tear them down often: the DirectRunner does it for every bundle, and a client per
  bundle, with its channel and threads, was a tenth of a local crawl's CPU).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

_LOG = logging.getLogger(__name__)
ACK_CHUNK = 1000  # ack ids per acknowledge / modify_ack_deadline call
PUBLISH_TIMEOUT = 60.0  # seconds to wait for Pub/Sub to take a batch of messages
# Ack deadline of messages held by the pipeline: extended every half of it while held, and a
# killed run's messages come back this long after the kill.
ACK_DEADLINE_SECONDS = 10


def subscription_leases(subscription: str) -> AckLeases:
    """The process-wide ``AckLeases`` of ``subscription`` (shared with the reader)."""

    def factory() -> AckLeases:
        from google.cloud import pubsub_v1

        return AckLeases(pubsub_v1.SubscriberClient(), subscription, ACK_DEADLINE_SECONDS)

    return leases_for(subscription, factory)



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
        # Counts in this process, for logs and tests: the keeper runs on a thread of its own,
        # outside any bundle, where Beam metrics are not collected.
        self.acked_total = 0
        self.ack_errors = 0
        self.extensions = 0
        self.given_up = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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
                self.ack_errors += len(chunk)
                _LOG.warning("acknowledge of %d messages on %s failed: %s", len(chunk),
                             self._subscription, exc)
        with self._lock:
            for ack_id in ack_ids:
                self._pending.pop(ack_id, None)
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
            self.given_up += len(stale)
            _LOG.warning("gave up the lease of %d messages on %s after %.0f s; Pub/Sub will "
                         "redeliver them", len(stale), self._subscription, self._max_lease)
        self._modify(live)
        self.extensions += len(live)
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


class PubsubPublisher:
    """Publishes messages to a topic and waits until Pub/Sub has them all."""

    def __init__(self, topic: str) -> None:
        from google.cloud import pubsub_v1

        self._topic = topic
        self._client = pubsub_v1.PublisherClient()

    def __call__(self, messages: Sequence[tuple[bytes, dict[str, str]]]) -> None:
        futures = [self._client.publish(self._topic, data, **attributes)
                   for data, attributes in messages]
        for future in futures:
            future.result(timeout=PUBLISH_TIMEOUT)

    def close(self) -> None:
        """Sends what is batched and stops the client's threads."""
        self._client.stop()




_PUBLISHERS: dict[str, PubsubPublisher] = {}
_PUBLISHERS_LOCK = threading.Lock()


def shared_publisher(topic: str) -> PubsubPublisher:
    """The process-wide publisher of ``topic`` (thread-safe: the client is); it lives as long
    as the process, so its users do not close it."""
    with _PUBLISHERS_LOCK:
        publisher = _PUBLISHERS.get(topic)
        if publisher is None:
            publisher = _PUBLISHERS[topic] = PubsubPublisher(topic)
        return publisher
