"""Publishing crawl requests to the frontier topic (``crawler seed``), grouped by host."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import google.cloud.pubsub_v1 as pubsub_v1

from transforms.core.records import CrawlRequest
from transforms.core.url_keys import politeness_key
from transforms.core.urls import InvalidUrl, canonicalize_url
from transforms.formats.messages import chunk, encode_requests


@dataclass
class SeedReport:
    published_urls: int = 0
    messages: int = 0
    hosts: int = 0
    invalid: list[tuple[str, str]] = field(default_factory=list)


def group_seeds(urls: list[str], depth: int = 0, priority: int = 0
                ) -> tuple[dict[str, list[CrawlRequest]], list[tuple[str, str]]]:
    """Canonicalizes seed URLs and groups them by host; returns (groups, [(url, reason)])."""
    groups: dict[str, dict[str, CrawlRequest]] = defaultdict(dict)
    invalid = []
    for raw in urls:
        try:
            url = canonicalize_url(raw)
        except InvalidUrl as exc:
            invalid.append((raw, str(exc)))
            continue
        groups[politeness_key(url)].setdefault(url, CrawlRequest(url, depth, priority))
    return {h: list(r.values()) for h, r in groups.items()}, invalid


def publish_seeds(urls: list[str], project: str, topic: str, depth: int = 0,
                  priority: int = 0) -> SeedReport:
    """Publishes the URLs (many per message, one host per message) and waits for the acks."""
    groups, invalid = group_seeds(urls, depth, priority)
    report = SeedReport(invalid=invalid, hosts=len(groups))
    publisher = pubsub_v1.PublisherClient()
    path = publisher.topic_path(project, topic)
    futures = []
    for host, requests in groups.items():
        for part in chunk(requests):
            futures.append(publisher.publish(path, encode_requests(part), kind="crawl",
                                             host=host))
            report.messages += 1
            report.published_urls += len(part)
    for future in futures:
        future.result(timeout=60)
    return report
