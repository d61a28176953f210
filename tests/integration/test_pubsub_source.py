"""The portable Pub/Sub source's pull, acknowledge and lease logic against the Pub/Sub emulator.

(The source inside a running pipeline is exercised by the Flink end-to-end crawl.)
"""

from __future__ import annotations

import time
import uuid

import pytest
from apache_beam.io.gcp.pubsub import PubsubMessage
from google.cloud import pubsub_v1

from pipeline.ops.resources import ensure_subscription, ensure_topic
from transforms.pubsub_source import PullFromPubSub, to_beam_message
from transforms.stores.pubsub import AckLeases, PullSize, leases_for, pull_messages

pytestmark = pytest.mark.integration
DEADLINE = 10  # the emulator's shortest ack deadline


@pytest.fixture()
def subscription(local_stack) -> str:
    suffix = uuid.uuid4().hex[:8]
    ensure_topic(local_stack.project, f"src-{suffix}")
    return ensure_subscription(local_stack.project, f"src-{suffix}", f"src-{suffix}-sub",
                               ack_deadline_seconds=DEADLINE)


def _publish(project: str, subscription: str, n: int) -> None:
    topic = subscription.replace("subscriptions", "topics").removesuffix("-sub")
    publisher = pubsub_v1.PublisherClient()
    for i in range(n):
        publisher.publish(topic, f"m{i}".encode(), kind="crawl", n=str(i)).result(10)


def _drain(subscriber, subscription: str, wait: float = 1.0) -> list:
    got: list = []
    for _ in range(5):
        batch = pull_messages(subscriber, subscription, 100, wait)
        if not batch and got:
            break
        got += batch
    return got


def test_a_pull_returns_data_attributes_and_ids_as_beam_messages(local_stack, subscription):
    _publish(local_stack.project, subscription, 3)
    subscriber = pubsub_v1.SubscriberClient()
    got = _drain(subscriber, subscription)
    assert sorted(m.data for m in got) == [b"m0", b"m1", b"m2"]
    message = to_beam_message(got[0])
    assert isinstance(message, PubsubMessage)
    assert message.attributes["kind"] == "crawl" and message.message_id
    assert abs(got[0].publish_time - time.time()) < 60


def test_a_pull_whose_answer_is_too_big_for_the_client_is_asked_again_smaller(
        local_stack, subscription):
    """Twelve 1.5 MB messages: a first pull of four is over the client's 4 MiB limit (its
    channel to the emulator); asked again for one, then for as many as fit. The refused
    answer's messages come back after their deadline."""
    topic = subscription.replace("subscriptions", "topics").removesuffix("-sub")
    publisher = pubsub_v1.PublisherClient()
    futures = [publisher.publish(topic, bytes([i]) * 1_500_000) for i in range(12)]
    for future in futures:
        future.result(10)
    subscriber = pubsub_v1.SubscriberClient()
    size = PullSize(100)
    got: list = []
    deadline = time.monotonic() + 4 * DEADLINE
    while len({m.data[0] for m in got}) < 12 and time.monotonic() < deadline:
        got += pull_messages(subscriber, subscription, size, 1.0)
    assert {m.data[0] for m in got} == set(range(12))
    assert size.current == 2  # what fits in an answer
    with pytest.raises(ValueError):
        PullSize(0)


def test_pull_size_fits_answers_to_the_limit_and_shrinks_when_refused():
    size = PullSize(100)
    assert size.current == PullSize.START  # nothing known yet: a small first pull
    size.answered(4, 4 * 1000)  # 1 KB messages: the ceiling fits
    assert size.current == 100
    size.answered(2, 2 * 1_000_000)  # 1 MB messages: three per answer
    assert size.current == 3
    size.answered(0, 0)  # an empty answer says nothing about sizes
    assert size.current == 3
    assert size.shrink() and size.current == 1 and not size.shrink()


def test_an_empty_pull_waits_briefly_and_returns_nothing(subscription):
    started = time.monotonic()
    assert pull_messages(pubsub_v1.SubscriberClient(), subscription, 10, 0.5) == []
    assert time.monotonic() - started < 5


def test_acknowledged_messages_are_not_redelivered_and_acking_twice_is_harmless(
        local_stack, subscription):
    _publish(local_stack.project, subscription, 4)
    subscriber = pubsub_v1.SubscriberClient()
    leases = AckLeases(subscriber, subscription, DEADLINE)
    got = _drain(subscriber, subscription)
    ids = [m.ack_id for m in got]
    leases.hold(ids)
    assert leases.pending == 4
    assert leases.ack(ids) == 4 and leases.pending == 0
    leases.ack(ids)  # idempotent: the finalizer may run again after a retry
    time.sleep(DEADLINE + 2)
    assert pull_messages(subscriber, subscription, 10, 1.0) == []
    leases.close()


def test_unacknowledged_messages_come_back_after_the_deadline(local_stack, subscription):
    _publish(local_stack.project, subscription, 2)
    subscriber = pubsub_v1.SubscriberClient()
    first = _drain(subscriber, subscription)
    assert len(first) == 2
    time.sleep(DEADLINE + 2)
    again = _drain(subscriber, subscription, wait=2.0)
    assert sorted(m.data for m in again) == sorted(m.data for m in first)


def test_held_leases_are_extended_so_an_open_bundle_keeps_its_messages(local_stack,
                                                                       subscription):
    _publish(local_stack.project, subscription, 2)
    subscriber = pubsub_v1.SubscriberClient()
    leases = AckLeases(subscriber, subscription, DEADLINE)
    got = _drain(subscriber, subscription)
    leases.hold([m.ack_id for m in got])
    for _ in range(3):  # 3 x 5 s > the 10 s deadline
        time.sleep(DEADLINE / 2)
        assert leases.extend_once() == 2
    assert pull_messages(subscriber, subscription, 10, 1.0) == []
    assert leases.ack([m.ack_id for m in got]) == 2
    leases.close()


def test_leases_held_too_long_are_given_up_for_redelivery(subscription):
    now = [0.0]
    leases = AckLeases(pubsub_v1.SubscriberClient(), subscription, DEADLINE,
                       max_lease_seconds=30, clock=lambda: now[0])
    leases.hold(["a", "b"])
    now[0] = 10
    leases.hold(["c"])
    now[0] = 35
    assert leases.extend_once() == 1 and leases.pending == 1
    leases.close()


def test_one_lease_keeper_per_subscription_in_a_process(subscription):
    made = []

    def factory() -> AckLeases:
        made.append(1)
        return AckLeases(pubsub_v1.SubscriberClient(), subscription, DEADLINE)

    assert leases_for(subscription, factory) is leases_for(subscription, factory)
    assert len(made) == 1


def test_the_transform_rejects_nonsense_settings():
    with pytest.raises(ValueError):
        PullFromPubSub("projects/p/subscriptions/s", readers=0)
    with pytest.raises(ValueError):
        PullFromPubSub("projects/p/subscriptions/s", wait_seconds=0)
