"""``AcknowledgeMessages`` on Beam's TestPipeline: a message is acknowledged once, after the
last of its parts was recorded. The subscription's lease keeper is a real ``AckLeases`` over a
client that records the calls instead of reaching Pub/Sub."""

from __future__ import annotations

import uuid
from typing import Any

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline

from transforms.acks import AcknowledgeMessages
from transforms.core.records import AckToken
from transforms.stores.pubsub import AckLeases, leases_for


class RecordingSubscriber:
    """Pub/Sub's subscriber calls the lease keeper makes, recorded."""

    def __init__(self) -> None:
        self.acked: list[str] = []

    def pull(self, request: dict[str, Any], timeout: float, retry: Any) -> Any:
        raise AssertionError("acknowledging never pulls")

    def acknowledge(self, request: dict[str, Any]) -> None:
        self.acked.extend(request["ack_ids"])

    def modify_ack_deadline(self, request: dict[str, Any]) -> None:
        pass


def test_messages_are_acknowledged_once_all_their_parts_are_recorded():
    subscription = f"projects/p/subscriptions/acks-{uuid.uuid4().hex[:8]}"
    client = RecordingSubscriber()
    leases = leases_for(subscription, lambda: AckLeases(client, subscription, 10))
    leases.hold(["whole", "split", "half"])
    tokens = [AckToken("whole", 0, 1),
              AckToken("split", 0, 3), AckToken("split", 2, 3), AckToken("split", 1, 3),
              AckToken("split", 1, 3),  # a part recorded twice (a retried bundle)
              AckToken("half", 0, 2)]  # its second part never came
    with TestPipeline() as p:
        _ = p | beam.Create(tokens) | AcknowledgeMessages(subscription)
    assert sorted(client.acked) == ["split", "whole"]
    assert leases.pending == 1  # "half" is still held, and redelivered if never finished
