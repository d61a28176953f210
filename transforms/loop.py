"""``BatchLinksByHost``: discovered links -> frontier messages, many URLs of one host each.

Grouping happens within a bundle (no shuffle, no window): links are buffered per host and flushed
as one message per host (at most 1,000 URLs) at the end of the bundle, with exact duplicates inside
the bundle removed. The frontier deduplicates across bundles. The pipeline publishes the messages
to the frontier topic, which closes the crawl loop (Beam graphs are acyclic).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from transforms.messages import chunk, encode_requests
from transforms.records import CrawlRequest
from transforms.urls import politeness_key

METRICS_NAMESPACE = "crawler"


def link_messages(requests: list[CrawlRequest]) -> list[PubsubMessage]:
    """Groups requests by host into frontier messages (pure apart from the message type)."""
    by_host: dict[str, dict[str, CrawlRequest]] = defaultdict(dict)
    for request in requests:
        by_host[politeness_key(request.url)].setdefault(request.url, request)
    messages = []
    for host, unique in by_host.items():
        for part in chunk(list(unique.values())):
            messages.append(PubsubMessage(encode_requests(part),
                                          {"kind": "crawl", "host": host}))
    return messages


class _BatchByHostFn(beam.DoFn):
    def setup(self) -> None:
        self._messages = Metrics.counter(METRICS_NAMESPACE, "link_messages_published")

    def start_bundle(self) -> None:
        self._buffer: list[CrawlRequest] = []

    def process(self, request: CrawlRequest) -> None:
        self._buffer.append(request)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        messages = link_messages(self._buffer)
        self._buffer = []
        self._messages.inc(len(messages))
        now = Timestamp.now()
        for message in messages:
            yield WindowedValue(message, now, (GlobalWindow(),))


class BatchLinksByHost(beam.PTransform):
    """CrawlRequests -> PubsubMessages grouped by host (for ``WriteToPubSub``)."""

    def expand(self, links: beam.PCollection) -> beam.PCollection:
        return links | "GroupInBundle" >> beam.ParDo(_BatchByHostFn())
