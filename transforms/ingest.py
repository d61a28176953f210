"""``ReadCrawlRequests``: frontier messages -> canonical requests keyed by politeness key.

Input is a PCollection of ``PubsubMessage`` (the pipeline reads them with attributes); nothing here
touches Pub/Sub, so tests feed messages with ``beam.Create``. Bad messages and URLs that cannot be
crawled go to a dead-letter output with their reason; nothing is dropped silently. A client batch
message (``transforms.formats.batch_messages``) goes on whole, keyed by its batch id, to the
intake (``transforms.batch_intake``), which decides whether it is new.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.metrics import Metrics
from apache_beam.typehints import typehints

from transforms import METRICS_NAMESPACE
from transforms.core.batches import BatchError
from transforms.core.policy import DEFAULT_POLICY, Policy
from transforms.core.records import AckToken, BatchSubmission, CrawlRequest, DeadLetter, UrlRule
from transforms.core.url_keys import key_requests
from transforms.formats.batch_messages import decode_batch_message, is_batch
from transforms.formats.messages import (
    ACK_ID_ATTRIBUTE,
    BadMessage,
    decode_message,
    discovered_at_of,
    is_heartbeat,
)
from transforms.host_frontier import FrontierWork

DEAD_LETTER_TAG = "dead_letter"
ACKS_TAG = "acks"
BATCHES_TAG = "batches"


class _DecodeAndKeyFn(beam.DoFn):
    """Decodes one message, canonicalizes its URLs and emits one (key, FrontierWork) per
    frontier key: the host, or ``host#shard`` for a host the policy shards
    (``transforms.core.sharding``).

    A message read by a source that leaves acknowledgement to the pipeline carries its ack id
    (``ACK_ID_ATTRIBUTE``); each part of the message (one per key, and one for its dead
    letters) then carries an ``AckToken``, and the message is acknowledged once every part is
    recorded. A message with nothing to record (a heartbeat) is acknowledged at once.
    """

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    def setup(self) -> None:
        self._messages = Metrics.counter(METRICS_NAMESPACE, "messages_read")
        self._urls = Metrics.counter(METRICS_NAMESPACE, "urls_read")
        self._bad_messages = Metrics.counter(METRICS_NAMESPACE, "bad_messages")
        self._invalid = Metrics.counter(METRICS_NAMESPACE, "invalid_urls")
        self._heartbeats = Metrics.counter(METRICS_NAMESPACE, "heartbeats")
        self._batches = Metrics.counter(METRICS_NAMESPACE, "batch_messages")

    def process(self, message: PubsubMessage) -> Iterator[Any]:
        attributes = message.attributes or {}
        ack_id = attributes.get(ACK_ID_ATTRIBUTE)
        if is_heartbeat(attributes):
            self._heartbeats.inc()
            if ack_id:
                yield beam.pvalue.TaggedOutput(ACKS_TAG, AckToken(ack_id, 0, 1))
            return
        self._messages.inc()
        now = time.time()
        data = bytes(message.data or b"")
        if is_batch(attributes, data):
            yield from self._batch(data, ack_id, now)
            return
        try:
            requests, evidence = decode_message(message.data, attributes)
        except BadMessage as exc:
            self._bad_messages.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, DeadLetter(
                "decode", str(exc), bytes(message.data or b""), now,
                (AckToken(ack_id, 0, 1),) if ack_id else ()))
            return
        self._urls.inc(len(requests))
        by_host, invalid = key_requests(requests, self._policy)
        self._invalid.inc(len(invalid))
        rules = self._rules_by_key(evidence)
        letters = [DeadLetter("canonicalize", reason, url.encode("utf-8", "replace"), now)
                   for url, reason in invalid]
        keys = list(dict.fromkeys([*by_host, *rules]))
        parts = len(keys) + (1 if letters else 0)
        discovered_at = discovered_at_of(attributes)
        for part, host in enumerate(keys):
            tokens = (AckToken(ack_id, part, parts),) if ack_id else ()
            yield host, FrontierWork(tuple(by_host.get(host, ())), tokens,
                                     tuple(rules.get(host, ())), discovered_at)
        for i, letter in enumerate(letters):
            if ack_id and i == len(letters) - 1:  # the last row of the part carries its token
                letter = dataclasses.replace(letter, tokens=(AckToken(ack_id, parts - 1,
                                                                      parts),))
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, letter)
        if not parts and ack_id:  # an empty message: nothing to wait for
            yield beam.pvalue.TaggedOutput(ACKS_TAG, AckToken(ack_id, 0, 1))


    def _rules_by_key(self, evidence: list[tuple[str, UrlRule, str]]
                      ) -> dict[str, list[tuple[UrlRule, str]]]:
        """DUST evidence by the frontier key of the URL that showed it."""
        out: dict[str, list[tuple[UrlRule, str]]] = {}
        for url, rule, digest in evidence:
            keyed, _ = key_requests([CrawlRequest(url)], self._policy)
            for key in keyed:
                out.setdefault(key, []).append((rule, digest))
        return out

    def _batch(self, data: bytes, ack_id: str | None, now: float) -> Iterator[Any]:
        """A client batch message: on to the intake, keyed by batch id (a message that is not
        a usable batch goes to the dead letters, with the reason)."""
        token = (AckToken(ack_id, 0, 1),) if ack_id else ()
        try:
            spec, urls, sent = decode_batch_message(data)
        except (BadMessage, BatchError) as exc:
            self._bad_messages.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, DeadLetter(
                "batch", str(exc), data, now, token))
            return
        self._batches.inc()
        yield beam.pvalue.TaggedOutput(BATCHES_TAG, (spec.batch_id, BatchSubmission(
            spec, tuple(urls), now, token, sent)))


class IngestOutputs(NamedTuple):
    requests: beam.PCollection  # (key, FrontierWork)
    dead_letters: beam.PCollection  # DeadLetter
    acks: beam.PCollection  # AckToken of messages with nothing to record
    batches: beam.PCollection  # (batch id, BatchSubmission): client batches, for the intake


class ReadCrawlRequests(beam.PTransform):
    """Pub/Sub messages -> (frontier key, canonical requests), plus dead letters.

    URLs are canonicalized with their host's policy (session and tracking parameters removed,
    query optionally sorted); http, https and ftp are accepted here, and the host policy's
    scheme filter decides in the frontier.
    """

    def __init__(self, policy: Policy = DEFAULT_POLICY) -> None:
        super().__init__()
        self._policy = policy

    def expand(self, messages: beam.PCollection) -> IngestOutputs:
        # The output type hint gives the keyed state downstream a deterministic key coder (UTF-8).
        outputs = messages | "DecodeCanonicalizeKey" >> beam.ParDo(
            _DecodeAndKeyFn(self._policy)).with_output_types(tuple[str, Any]).with_outputs(
                DEAD_LETTER_TAG, ACKS_TAG, BATCHES_TAG, main="requests")
        batches = outputs[BATCHES_TAG]
        # A tagged output has no type of its own: the intake's keyed state needs a
        # deterministic key coder (UTF-8 batch ids), as the requests' does.
        batches.element_type = typehints.Tuple[str, Any]
        return IngestOutputs(outputs.requests, outputs[DEAD_LETTER_TAG], outputs[ACKS_TAG],
                             batches)
