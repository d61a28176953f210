"""``PublishLinks``: the crawl loop. Discovered links -> the frontier topic, many URLs of one
host per message; then the results they came from move on to be recorded.

Grouping happens within a bundle (no shuffle, no window): the bundle's links are grouped by
host, exact duplicates removed, and published as one message per host (at most 1,000 URLs).
The frontier deduplicates across bundles. Beam graphs are acyclic; the topic closes the loop.

Order matters for durability. A result's links are published, and Pub/Sub has acknowledged
the publish, before the result is released downstream to its WARC record and its webtable row.
So once a URL's row says it is done, the links it yields are safe in the topic: a crash at any
point either loses the row (the URL is fetched again) or nothing. The price is at most one
bundle of latency, which the links would wait anyway.

    Discovered(links, page) -> bundle ends -> messages published -> publish acknowledged
      -> page released (to WriteWarc) / fetch result released (to its row)

The links that reach this stage are those of other frontier keys: a page's links to its own
key joined that key's queue when its lease was harvested (``transforms.frontier.harvest``).
Each message carries ``discovered_at``, the earliest fetch time of the bundle's pages, so the
frontier can measure the loop's latency (``transforms.core.latency``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from transforms import METRICS_NAMESPACE
from transforms.core.records import Discovered, FetchResult, ParsedPage
from transforms.formats.messages import Message, evidence_messages, host_messages
from transforms.stores.pubsub import shared_publisher

PAGES_TAG = "pages"
UNSTORED_TAG = "unstored"
FLUSH_LINKS = 5000  # publish mid-bundle once this many links are waiting


Publish = Callable[[list[Message]], None]


class _PublishThenReleaseFn(beam.DoFn):
    def __init__(self, topic: str, publisher: Callable[[str], Publish] | None) -> None:
        self._topic = topic
        self._publisher_factory = publisher

    def setup(self) -> None:
        # The process's publisher of the topic (it outlives the DoFn), or the test's.
        self._publish = (self._publisher_factory(self._topic) if self._publisher_factory
                         else shared_publisher(self._topic))
        self._messages = Metrics.counter(METRICS_NAMESPACE, "link_messages_published")
        self._links = Metrics.counter(METRICS_NAMESPACE, "links_published")

    def teardown(self) -> None:
        close = getattr(self._publish, "close", None) if self._publisher_factory else None
        if close is not None:
            close()

    def start_bundle(self) -> None:
        self._waiting: list[Discovered] = []
        self._count = 0

    def process(self, item: Discovered) -> Iterator[Any]:
        self._waiting.append(item)
        self._count += len(item.links)
        if self._count >= FLUSH_LINKS:
            for tag, value in self._flush():
                yield beam.pvalue.TaggedOutput(tag, value)

    def finish_bundle(self) -> Iterator[Any]:
        now = Timestamp.now()
        for tag, value in self._flush():
            yield beam.pvalue.TaggedOutput(tag, WindowedValue(value, now, (GlobalWindow(),)))

    def _flush(self) -> list[tuple[str, Any]]:
        waiting, self._waiting, self._count = self._waiting, [], 0
        found = [_fetched_at(item.item) for item in waiting if item.links]
        messages = host_messages((link for item in waiting for link in item.links),
                                 min((t for t in found if t is not None), default=None))
        messages += evidence_messages(rule for item in waiting for rule in item.rules)
        if messages:
            self._publish(messages)
            self._messages.inc(len(messages))
            self._links.inc(sum(len(item.links) for item in waiting))
        released: list[tuple[str, Any]] = []
        for item in waiting:
            if isinstance(item.item, ParsedPage):
                released.append((PAGES_TAG, item.item))
            elif isinstance(item.item, FetchResult):
                released.append((UNSTORED_TAG, item.item))
        return released


def _fetched_at(item: ParsedPage | FetchResult | None) -> float | None:
    """When the links of ``item`` were discovered: its fetch."""
    if isinstance(item, ParsedPage):
        return item.fetch.fetched_at
    if isinstance(item, FetchResult):
        return item.fetched_at
    return None


class Released(NamedTuple):
    pages: beam.PCollection  # ParsedPage, its links published
    unstored: beam.PCollection  # FetchResult not stored, its links published


class PublishLinks(beam.PTransform):
    """Discovered -> links published to ``topic``, then the results released (see the module
    docstring). ``publisher`` (a factory of ``messages -> None`` given the topic) replaces
    Pub/Sub in tests."""

    def __init__(self, topic: str, publisher: Callable[[str], Publish] | None = None) -> None:
        super().__init__()
        self._topic = topic
        self._publisher = publisher

    def expand(self, discovered: beam.PCollection) -> Released:
        out = discovered | "PublishThenRelease" >> beam.ParDo(
            _PublishThenReleaseFn(self._topic, self._publisher)).with_outputs(
                PAGES_TAG, UNSTORED_TAG)
        return Released(out[PAGES_TAG], out[UNSTORED_TAG])
