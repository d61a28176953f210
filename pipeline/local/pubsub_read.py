"""The DirectRunner's Pub/Sub read, made at-least-once and non-blocking for local runs.

Beam's DirectRunner reads Pub/Sub with a native evaluator that pulls at most 10 messages with a
30 s long-poll and acknowledges them at once, before anything downstream ran. On this runner's
single worker thread that has two costs: an empty subscription freezes every timer for up to
30 s (the local driver used to publish a heartbeat every 0.1 s to avoid it), and a run killed
between the pull and the frontier's writes loses the messages it had pulled.

:func:`install` replaces the evaluator's read (for the process; the DirectRunner is in-process)
with one that

* pulls with ``return_immediately`` (up to ``MAX_MESSAGES``, fewer while answers exceed the
  client's receive limit: ``transforms.pubsub_source.PullSize``), at most every
  ``PULL_EVERY`` seconds, the interval doubling with each pull in a row that found nothing (up
  to 2**``PULL_BACKOFF`` times): the runner schedules its read whenever it is idle, and a read
  that comes before the next pull is due, or whose pull found nothing, yields the thread for
  ``IDLE_SLEEP`` seconds and returns nothing, so an idle job neither spins nor floods the
  emulator, and no heartbeat is needed; a read the runner was made to schedule while busy
  (``pipeline.local.tuning``, :func:`read_in_passing`) does not sleep, since other work
  waits for the thread;
* does **not** acknowledge: it records the ack id as the ``crawler-ack-id`` attribute and
  keeps the message leased (``transforms.acks.subscription_leases`` extends its deadline every
  ``ACK_DEADLINE_SECONDS / 2``), and the pipeline acknowledges it once its URLs are recorded
  (``transforms.acks``). A killed run's unacknowledged messages are delivered again
  ``ACK_DEADLINE_SECONDS`` after the kill.

Measured window of loss: none. A message is acknowledged only after the rows of every part of
it were written (its URLs' ``queued`` rows and index entries, or its dead letters).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from apache_beam.runners.direct import transform_evaluator
from apache_beam.utils.timestamp import Timestamp

from transforms.formats.messages import ACK_ID_ATTRIBUTE
from transforms.stores.pubsub import PullSize, pull_within_limits, subscription_leases

_LOG = logging.getLogger(__name__)
MAX_MESSAGES = 100
IDLE_SLEEP = 0.005  # seconds an idle read yields the runner's thread (a timer may wait as long)
PULL_EVERY = 0.05  # seconds between pulls ...
PULL_BACKOFF = 3  # ... times 2**n after n empty pulls in a row, n at most this
_ORIGINAL = transform_evaluator._PubSubReadEvaluator._read_from_pubsub
_PULL_SIZES: dict[str, PullSize] = {}  # per subscription: shrinks while answers are too big
_PASSING = [False]  # the next read was scheduled while the runner is busy: no idle sleep
_EMPTY_IN_A_ROW = [0]  # pulls in a row that found nothing
_LAST_PULL = [0.0]  # time.monotonic() of the last pull


def read_in_passing() -> None:
    """The next read is scheduled while the runner has other work: it pulls, and if it finds
    nothing it returns at once instead of yielding the thread."""
    _PASSING[0] = True


def pull_due(now: float) -> bool:
    """Whether the next pull is due at ``now`` (``time.monotonic()``; see the module
    docstring)."""
    interval = PULL_EVERY * 2 ** min(_EMPTY_IN_A_ROW[0], PULL_BACKOFF)
    return now - _LAST_PULL[0] >= interval


def empty_reads_in_a_row() -> int:
    """How many pulls in a row found nothing (0 after one that found messages)."""
    return _EMPTY_IN_A_ROW[0]


def install() -> None:
    """Makes the DirectRunner's Pub/Sub read leave acknowledgement to the pipeline."""
    setattr(transform_evaluator._PubSubReadEvaluator, "_read_from_pubsub",  # noqa: B010
            _read_at_least_once)


def uninstall() -> None:
    setattr(transform_evaluator._PubSubReadEvaluator, "_read_from_pubsub",  # noqa: B010
            _ORIGINAL)


def _read_at_least_once(self: Any, timestamp_attribute: str | None) -> list[tuple[Timestamp, Any]]:
    from apache_beam.io.gcp.pubsub import PubsubMessage
    from google.api_core import exceptions as gexc

    subscription = self._sub_name
    passing, _PASSING[0] = _PASSING[0], False
    now = time.monotonic()
    if not passing and not pull_due(now):
        time.sleep(IDLE_SLEEP)
        return []
    _LAST_PULL[0] = now
    client = self._get_subscriber_client(self._applied_ptransform)
    size = _PULL_SIZES.setdefault(subscription, PullSize(MAX_MESSAGES))
    try:
        response = pull_within_limits(lambda n: client.pull(request={
            "subscription": subscription, "max_messages": n, "return_immediately": True},
            timeout=30), size)
    except (gexc.DeadlineExceeded, gexc.ServiceUnavailable) as exc:
        _LOG.debug("pull of %s failed: %s", subscription, exc)
        time.sleep(IDLE_SLEEP)
        return []
    received = list(response.received_messages)
    if not received:
        _EMPTY_IN_A_ROW[0] += 1
        if not passing:
            time.sleep(IDLE_SLEEP)
        return []
    _EMPTY_IN_A_ROW[0] = 0
    subscription_leases(subscription).hold((r.ack_id for r in received), set_deadline=True)
    out = []
    for r in received:
        message = PubsubMessage._from_message(r.message)
        message.attributes[ACK_ID_ATTRIBUTE] = r.ack_id
        stamp = message.attributes.get(timestamp_attribute) if timestamp_attribute else None
        if stamp is not None and stamp.isdigit():
            timestamp = Timestamp(micros=int(stamp) * 1000)
        else:
            timestamp = Timestamp.from_utc_datetime(r.message.publish_time)
        out.append((timestamp, message))
    return out
