"""The streaming crawl graph.

    ReadFrontier (Pub/Sub, with attributes: native ReadFromPubSub or the portable PullFromPubSub)
      -> ReadCrawlRequests   decode, canonicalize, key by host          (dead letters -> Bigtable)
      -> HostFrontier        politeness, robots.txt, dedup, queue, leases that fetch
      -> ExtractLinks        HTML -> title, outlinks; cross-host redirects
      -> WriteWarc           pages -> WARC/1.1 files on GCS
      -> webtable rows (pages, unstored fetches, frontier outcomes) -> Bigtable
      -> host counters -> Bigtable
      -> BatchLinksByHost -> PublishLinks (Pub/Sub frontier topic: the loop)

Step labels are explicit and stable: Dataflow's ``--update`` matches steps by label.
"""

from __future__ import annotations

from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.gcp.pubsub import ReadFromPubSub, WriteToPubSub

from pipeline.options import CrawlerOptions
from transforms.extract import ExtractLinks
from transforms.frontier import HostFrontier
from transforms.ingest import ReadCrawlRequests
from transforms.loop import BatchLinksByHost
from transforms.pubsub_source import PullFromPubSub
from transforms.rows import (
    dead_letter_row,
    host_row,
    outcome_row,
    stored_page_row,
    unstored_result_row,
)
from transforms.storage import WriteRows
from transforms.warc_io import WriteWarc


class CrawlOutputs(NamedTuple):
    """The main PCollections of the graph, for tests and for extensions."""

    fetched: beam.PCollection  # FetchResult, every fetch
    outcomes: beam.PCollection  # UrlOutcome, frontier decisions
    stats: beam.PCollection  # HostStats
    stored: beam.PCollection  # StoredPage, pages with their WARC location
    unstored: beam.PCollection  # FetchResult without stored body (errors, non-HTML, redirects)
    links: beam.PCollection  # CrawlRequest: links, cross-host redirects, sitemaps, other hosts
    dead_letters: beam.PCollection  # DeadLetter


class CrawlCore(beam.PTransform):
    """Frontier messages -> everything the crawl produces, with no sink attached."""

    def __init__(self, options: CrawlerOptions) -> None:
        super().__init__()
        self._options = options

    def expand(self, messages: beam.PCollection) -> CrawlOutputs:
        o = self._options.get_all_options()
        ingest = messages | "ReadCrawlRequests" >> ReadCrawlRequests(self._options.policy())
        frontier = ingest.requests | "HostFrontier" >> HostFrontier(
            self._options.frontier_config())
        frontier_config = self._options.frontier_config()
        extract = frontier.fetched | "ExtractLinks" >> ExtractLinks(
            frontier_config.robots_agent, frontier_config.fetch.max_body_bytes)
        stored = extract.pages | "WriteWarc" >> WriteWarc(
            o["warc_prefix"], o["warc_roll_bytes"], o["warc_roll_seconds"], o["warc_shards"])
        links = ((extract.links, frontier.discovered)
                 | "AllDiscoveredRequests" >> beam.Flatten())
        return CrawlOutputs(frontier.fetched, frontier.outcomes, frontier.stats, stored,
                            extract.unstored, links, ingest.dead_letters)


def build_pipeline(p: beam.Pipeline, options: CrawlerOptions) -> CrawlOutputs:
    """Adds the whole crawl, sources and sinks included, to ``p``."""
    o = options.get_all_options()
    project = options.bigtable_project_id
    instance = o["bigtable_instance"]
    if options.uses_native_pubsub():
        read: beam.PTransform = ReadFromPubSub(subscription=o["input_subscription"],
                                               with_attributes=True)
    else:
        read = PullFromPubSub(o["input_subscription"], readers=o["pubsub_readers"])
    messages = p | "ReadFrontier" >> read
    outputs = messages | "Crawl" >> CrawlCore(options)
    webtable_rows = (
        (outputs.stored | "PageRows" >> beam.Map(stored_page_row),
         outputs.unstored | "FetchRows" >> beam.Map(unstored_result_row),
         outputs.outcomes | "OutcomeRows" >> beam.Map(outcome_row))
        | "AllWebtableRows" >> beam.Flatten())
    _ = webtable_rows | "WriteWebtable" >> WriteRows(project, instance, o["webtable"])
    _ = (outputs.stats | "HostRows" >> beam.Map(host_row)
         | "WriteHosts" >> WriteRows(project, instance, o["hosts_table"]))
    _ = (outputs.dead_letters | "DeadLetterRows" >> beam.Map(dead_letter_row)
         | "WriteDeadLetters" >> WriteRows(project, instance, o["deadletter_table"]))
    _ = (outputs.links | "BatchLinksByHost" >> BatchLinksByHost()
         | "PublishLinks" >> WriteToPubSub(o["frontier_topic"], with_attributes=True))
    return outputs
