"""The DirectRunner's Pub/Sub read of local runs: no acknowledgement on pull (the ack id rides
with the message), no idle sleep for a read scheduled in passing, and a count of empty reads
that paces those reads (``pipeline.local.tuning``)."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.local import pubsub_read
from transforms.formats.messages import ACK_ID_ATTRIBUTE


class _Client:
    def __init__(self, answers):
        self.answers = list(answers)

    def pull(self, request, timeout):
        return SimpleNamespace(received_messages=self.answers.pop(0))


def _reader(client):
    return SimpleNamespace(_sub_name="projects/p/subscriptions/s",
                           _get_subscriber_client=lambda _: client, _applied_ptransform=None)


def _message(ack_id: str):
    from datetime import UTC, datetime

    from google.pubsub_v1.types import PubsubMessage, ReceivedMessage

    return ReceivedMessage(ack_id=ack_id, message=PubsubMessage(
        data=b"https://a.example/\n", publish_time=datetime(2026, 11, 25, tzinfo=UTC)))


class _Leases:
    def __init__(self):
        self.held: list[str] = []

    def hold(self, ids, set_deadline=False):
        self.held += list(ids)


def test_reads_pull_when_due_and_a_read_in_passing_does_not_sleep(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(pubsub_read.time, "sleep", slept.append)
    clock = [1000.0]
    monkeypatch.setattr(pubsub_read.time, "monotonic", lambda: clock[0])
    leases = _Leases()
    monkeypatch.setattr(pubsub_read, "subscription_leases", lambda _: leases)
    monkeypatch.setattr(pubsub_read, "_EMPTY_IN_A_ROW", [0])
    monkeypatch.setattr(pubsub_read, "_LAST_PULL", [0.0])
    monkeypatch.setattr(pubsub_read, "_PASSING", [False])
    client = _Client([[], [], [_message("a1")]])
    reader = _reader(client)
    assert pubsub_read._read_at_least_once(reader, None) == []  # pulled, nothing: a pause
    assert slept == [pubsub_read.IDLE_SLEEP] and pubsub_read.empty_reads_in_a_row() == 1
    clock[0] += pubsub_read.PULL_EVERY  # not due yet: twice the interval after an empty pull
    assert pubsub_read._read_at_least_once(reader, None) == []
    assert len(client.answers) == 2 and len(slept) == 2  # no pull, a pause
    pubsub_read.read_in_passing()  # the runner is busy: pull now, and no pause
    assert pubsub_read._read_at_least_once(reader, None) == []
    assert len(client.answers) == 1 and len(slept) == 2
    assert pubsub_read.empty_reads_in_a_row() == 2
    clock[0] += 4 * pubsub_read.PULL_EVERY
    [(_, message)] = pubsub_read._read_at_least_once(reader, None)
    assert message.attributes[ACK_ID_ATTRIBUTE] == "a1" and leases.held == ["a1"]
    assert pubsub_read.empty_reads_in_a_row() == 0
