"""``ReadCrawlRequests``: frontier messages -> canonical requests keyed by politeness key.

Input is a PCollection of ``PubsubMessage`` (the pipeline reads them with attributes); nothing here
touches Pub/Sub, so tests feed messages with ``beam.Create``. Bad messages and URLs that cannot be
crawled go to a dead-letter output with their reason; nothing is dropped silently.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.metrics import Metrics

from transforms.messages import BadMessage, decode_requests, is_heartbeat
from transforms.records import CrawlRequest, DeadLetter
from transforms.urls import InvalidUrl, canonicalize_url, politeness_key

METRICS_NAMESPACE = "crawler"
DEAD_LETTER_TAG = "dead_letter"


class _DecodeAndKeyFn(beam.DoFn):
    """Decodes one message, canonicalizes its URLs and emits one (host, requests) per host."""

    def setup(self) -> None:
        self._messages = Metrics.counter(METRICS_NAMESPACE, "messages_read")
        self._urls = Metrics.counter(METRICS_NAMESPACE, "urls_read")
        self._bad_messages = Metrics.counter(METRICS_NAMESPACE, "bad_messages")
        self._invalid = Metrics.counter(METRICS_NAMESPACE, "invalid_urls")
        self._heartbeats = Metrics.counter(METRICS_NAMESPACE, "heartbeats")

    def process(self, message: PubsubMessage) -> Iterator[Any]:
        if is_heartbeat(message.attributes):
            self._heartbeats.inc()
            return
        self._messages.inc()
        now = time.time()
        try:
            requests = decode_requests(message.data, message.attributes or {})
        except BadMessage as exc:
            self._bad_messages.inc()
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER_TAG, DeadLetter("decode", str(exc), bytes(message.data or b""), now))
            return
        by_host: dict[str, list[CrawlRequest]] = defaultdict(list)
        for request in requests:
            self._urls.inc()
            try:
                url = canonicalize_url(request.url)
            except InvalidUrl as exc:
                self._invalid.inc()
                yield beam.pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    DeadLetter("canonicalize", f"{exc.reason}: {exc}",
                               request.url.encode("utf-8", "replace"), now))
                continue
            if url != request.url:
                request = CrawlRequest(url, request.depth, request.priority,
                                       request.discovered_from, request.attempt)
            by_host[politeness_key(url)].append(request)
        for host, host_requests in by_host.items():
            yield host, tuple(host_requests)


class IngestOutputs(NamedTuple):
    requests: beam.PCollection  # (host, tuple[CrawlRequest])
    dead_letters: beam.PCollection  # DeadLetter


class ReadCrawlRequests(beam.PTransform):
    """Pub/Sub messages -> (politeness key, canonical requests), plus dead letters."""

    def expand(self, messages: beam.PCollection) -> IngestOutputs:
        # The output type hint gives the keyed state downstream a deterministic key coder (UTF-8).
        outputs = messages | "DecodeCanonicalizeKey" >> beam.ParDo(
            _DecodeAndKeyFn()).with_output_types(tuple[str, Any]).with_outputs(
                DEAD_LETTER_TAG, main="requests")
        return IngestOutputs(outputs.requests, outputs[DEAD_LETTER_TAG])
