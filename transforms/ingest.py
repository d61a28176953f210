"""``ReadCrawlRequests``: frontier messages -> canonical requests keyed by politeness key.

Input is a PCollection of ``PubsubMessage`` (the pipeline reads them with attributes); nothing here
touches Pub/Sub, so tests feed messages with ``beam.Create``. Bad messages and URLs that cannot be
crawled go to a dead-letter output with their reason; nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.metrics import Metrics

from transforms.messages import BadMessage, decode_requests, is_heartbeat
from transforms.policy import DEFAULT_POLICY, SUPPORTED_SCHEMES, Policy
from transforms.records import CrawlRequest, DeadLetter
from transforms.sharding import shard_key
from transforms.urls import InvalidUrl, canonicalize_url, politeness_key

METRICS_NAMESPACE = "crawler"
DEAD_LETTER_TAG = "dead_letter"


def canonical_for_host(url: str, policy: Policy) -> tuple[str, str]:
    """Canonicalizes ``url`` with its host's policy; returns (canonical URL, politeness key).

    The key comes from a first pass that keeps every parameter (it depends on scheme, host and
    port only); the host's ``remove_params`` and ``sort_query`` then apply.

    Raises:
        InvalidUrl: for a URL that cannot be crawled.
    """
    plain = canonicalize_url(url, allowed_schemes=SUPPORTED_SCHEMES, remove_params=())
    key = politeness_key(plain)
    hp = policy.for_host(key)
    return canonicalize_url(plain, allowed_schemes=SUPPORTED_SCHEMES,
                            remove_params=hp.remove_params, sort_query=hp.sort_query), key


class _DecodeAndKeyFn(beam.DoFn):
    """Decodes one message, canonicalizes its URLs and emits one (key, requests) per frontier
    key: the host, or ``host#shard`` for a host the policy shards (``transforms.sharding``)."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

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
                url, key = canonical_for_host(request.url, self._policy)
            except InvalidUrl as exc:
                self._invalid.inc()
                yield beam.pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    DeadLetter("canonicalize", f"{exc.reason}: {exc}",
                               request.url.encode("utf-8", "replace"), now))
                continue
            if url != request.url:
                request = dataclasses.replace(request, url=url)
            by_host[shard_key(key, url, self._policy.for_host(key).shards)].append(request)
        for host, host_requests in by_host.items():
            yield host, tuple(host_requests)


class IngestOutputs(NamedTuple):
    requests: beam.PCollection  # (host, tuple[CrawlRequest])
    dead_letters: beam.PCollection  # DeadLetter


class ReadCrawlRequests(beam.PTransform):
    """Pub/Sub messages -> (politeness key, canonical requests), plus dead letters.

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
                DEAD_LETTER_TAG, main="requests")
        return IngestOutputs(outputs.requests, outputs[DEAD_LETTER_TAG])
