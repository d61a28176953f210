"""The streaming crawl graph.

    ReadFrontier (Pub/Sub, with attributes: native ReadFromPubSub or the portable PullFromPubSub)
      -> ReadCrawlRequests   decode, canonicalize, key by host          (dead letters -> Bigtable)
         -> TakeInBatches    client batches, keyed by batch id: record, then URLs to their keys
      WakePendingKeys        at the start of a job: keys with work pending in the tables
      -> HostFrontier        politeness, robots.txt, dedup, leases that fetch and extract
                             (pages parsed next to their fetch); a page's links to its own
                             key admitted at harvest; writes its decisions (``queued`` rows,
                             the frontier index) itself
      -> ExtractLinks        the parsed pages carried on (title, previews, main text,
                             outlinks, MinHash signature), page counters; results that came
                             without their extraction are extracted here
      -> DetectDuplicates    keyed by content digest: duplicate_of, WARC revisits, a
                             duplicate's links dropped, DUST evidence for the frontier
      -> PublishLinks        the links to other keys (and DUST evidence), by host, to the
                             Pub/Sub frontier topic (the loop); only then the results they
                             came from move on
      -> WriteWarc           pages -> WARC/1.1 files on GCS (revisit records for duplicates)
      -> webtable rows (pages, unstored fetches) -> Bigtable, then their index entries deleted
      -> FindNearDuplicates  keyed by MinHash LSH band: near_duplicate_of -> webtable
      -> WriteExports        pages, outcomes, near duplicates -> Hive-partitioned Parquet
      -> host counters -> Bigtable
      -> TrackBatches        batch URLs' outcomes (once their cells are written), keyed by batch
                             id: counts, milestones, done, notifications topic and webhooks
                             (WakeRunningBatches: at the start of a job, the running batches)
      -> Acknowledge         messages whose URLs are recorded (sources that leave it to us)

Step labels are explicit and stable: Dataflow's ``--update`` matches steps by label.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.gcp.pubsub import ReadFromPubSub

from pipeline.options import CrawlerOptions
from pipeline.policy_source import read_text
from pipeline.settings import CrawlSettings
from transforms.acks import AcknowledgeMessages
from transforms.batch_intake import TakeInBatches
from transforms.batch_progress import ProgressConfig, TrackBatches, secrets_of
from transforms.core.clients import parse_clients
from transforms.core.records import Discovered
from transforms.duplicates import DetectDuplicates
from transforms.exports import WriteExports
from transforms.extract import ExtractLinks
from transforms.formats.exports import export_rows
from transforms.formats.row_writes import dead_letter_write, fetch_write, page_write
from transforms.formats.rows import host_row, near_duplicate_row
from transforms.frontier.store import StoreSpec
from transforms.host_frontier import HostFrontier
from transforms.ingest import ReadCrawlRequests
from transforms.loop import Publish, PublishLinks
from transforms.near_duplicates import FindNearDuplicates
from transforms.pubsub_source import PullFromPubSub
from transforms.storage import WriteRows
from transforms.stores.bigtable import BigtableStoreSpec
from transforms.wake import WakePendingKeys, WakeRunningBatches
from transforms.warc_io import WriteWarc


class CrawlOutputs(NamedTuple):
    """The main PCollections of the graph, for tests and for extensions."""

    fetched: beam.PCollection  # Discovered (or FetchResult): every fetch, extracted
    outcomes: beam.PCollection  # UrlOutcome, frontier decisions (written by the frontier)
    stats: beam.PCollection  # HostStats
    stored: beam.PCollection  # StoredPage, pages with their WARC location
    unstored: beam.PCollection  # FetchResult without stored body (errors, non-HTML, redirects)
    discovered: beam.PCollection  # Discovered: links (published to the loop) and their result
    dead_letters: beam.PCollection  # DeadLetter
    acks: beam.PCollection  # AckToken: messages whose URLs the frontier recorded
    batch_events: beam.PCollection  # (batch id, BatchEvent) decided before a fetch


def store_spec(settings: CrawlSettings) -> BigtableStoreSpec:
    """Where the crawl's tables are."""
    return BigtableStoreSpec(settings.project, settings.bigtable_instance, settings.webtable,
                             settings.hosts_table, settings.frontier_table,
                             settings.deadletter_table, settings.batches_table,
                             settings.dedup_table)


class CrawlCore(beam.PTransform):
    """Frontier messages -> everything the crawl produces; the frontier writes its own
    decisions to ``store`` and the discovered links go to the frontier topic (the loop); the
    other sinks are attached by ``build_pipeline``."""

    def __init__(self, settings: CrawlSettings, store: StoreSpec,
                 publisher: Callable[[str], Publish] | None = None) -> None:
        super().__init__()
        self._settings = settings
        self._store = store
        self._publisher = publisher

    def expand(self, messages: beam.PCollection) -> CrawlOutputs:
        crawler = self._settings
        frontier_config = crawler.frontier_config()
        ingest = messages | "ReadCrawlRequests" >> ReadCrawlRequests(crawler.policy)
        woken = messages.pipeline | "WakePendingKeys" >> WakePendingKeys(self._store)
        intake = ingest.batches | "TakeInBatches" >> TakeInBatches(
            self._store, crawler.batches_table, crawler.policy)
        # Typed keys: the frontier's keyed state needs a deterministic key coder (UTF-8).
        work = ((ingest.requests, woken, intake.requests)
                | "FrontierInput" >> beam.Flatten().with_output_types(tuple[str, Any]))
        frontier = work | "HostFrontier" >> HostFrontier(frontier_config, self._store)
        extract = frontier.fetched | "ExtractLinks" >> ExtractLinks(
            frontier_config.robots_agent, frontier_config.fetch.max_body_bytes,
            frontier_config.scope)
        judged = extract.discovered | "DetectDuplicates" >> DetectDuplicates(
            self._store, crawler.dedup_table, crawler.follow_duplicate_links)
        discovered = ((judged,
                       frontier.discovered | "OtherKeysSitemaps" >> beam.Map(
                           lambda request: Discovered((request,), None)))
                      | "AllDiscoveredRequests" >> beam.Flatten())
        released = discovered | "PublishLinks" >> PublishLinks(crawler.frontier_topic,
                                                               self._publisher)
        stored = released.pages | "WriteWarc" >> WriteWarc(
            crawler.warc_prefix, crawler.warc_roll_bytes, crawler.warc_roll_seconds,
            crawler.warc_shards)
        acks = ((frontier.acks, ingest.acks, intake.acks)
                | "RecordedMessages" >> beam.Flatten())
        dead_letters = ((ingest.dead_letters, intake.dead_letters)
                        | "AllDeadLetters" >> beam.Flatten())
        batch_events = ((frontier.batch_events, intake.events)
                        | "DecidedBatchUrls" >> beam.Flatten())
        return CrawlOutputs(frontier.fetched, frontier.outcomes, frontier.stats, stored,
                            released.unstored, discovered, dead_letters, acks, batch_events)


def progress_config(settings: CrawlSettings) -> ProgressConfig:
    """How batches are announced: the notifications topic, the results files, the clients'
    webhook secrets (``--clients_file``, read here, once)."""
    clients = (parse_clients(read_text(settings.clients_file)) if settings.clients_file
               else {})
    return ProgressConfig(settings.batches_table, settings.notifications_topic or "",
                          settings.results_prefix(), secrets_of(clients),
                          settings.allow_private_networks)


def build_pipeline(p: beam.Pipeline, options: CrawlerOptions,
                   store: StoreSpec | None = None,
                   settings: CrawlSettings | None = None) -> CrawlOutputs:
    """Adds the whole crawl, sources and sinks included, to ``p``. ``settings`` are the
    options' (``CrawlerOptions.settings``), read here unless given."""
    crawler = settings if settings is not None else options.view_as(CrawlerOptions).settings()
    store = store if store is not None else store_spec(crawler)
    if options.uses_native_pubsub():
        read: beam.PTransform = ReadFromPubSub(subscription=crawler.input_subscription,
                                               with_attributes=True)
    else:
        read = PullFromPubSub(crawler.input_subscription, readers=crawler.pubsub_readers,
                              pipeline_acks=options.runs_on_prism())
    messages = p | "ReadFrontier" >> read
    outputs = messages | "Crawl" >> CrawlCore(crawler, store)
    webtable = ((outputs.stored | "PageRows" >> beam.Map(page_write),
          outputs.unstored | "FetchRows" >> beam.Map(fetch_write))
         | "AllWebtableRows" >> beam.Flatten()
         | "WriteWebtable" >> WriteRows(store, crawler.webtable, webtable=True))
    running = p | "WakeRunningBatches" >> WakeRunningBatches(store, crawler.batches_table)
    _ = ((outputs.batch_events, webtable.batch_events, running)
         | "AllBatchEvents" >> beam.Flatten().with_output_types(tuple[str, Any])
         | "TrackBatches" >> TrackBatches(progress_config(crawler), store))
    near = outputs.stored | "FindNearDuplicates" >> FindNearDuplicates(
        store, crawler.dedup_table, crawler.near_duplicate_threshold)
    _ = (near | "NearDuplicateRows" >> beam.Map(near_duplicate_row)
         | "WriteNearDuplicates" >> WriteRows(store, crawler.webtable))
    exports = crawler.exports_prefix()
    if exports:
        _ = ((outputs.stored, outputs.unstored, outputs.outcomes, near)
             | "AllExported" >> beam.Flatten()
             | "ExportRows" >> beam.FlatMap(export_rows)
             | "WriteExports" >> WriteExports(exports, crawler.export_roll_seconds))
    _ = (outputs.stats | "HostRows" >> beam.Map(host_row)
         | "WriteHosts" >> WriteRows(store, crawler.hosts_table))
    letters_recorded = (outputs.dead_letters | "DeadLetterRows" >> beam.Map(dead_letter_write)
                        | "WriteDeadLetters" >> WriteRows(store, crawler.deadletter_table)
                        ).tokens
    _ = ((outputs.acks, letters_recorded) | "AllRecordedMessages" >> beam.Flatten()
         | "Acknowledge" >> AcknowledgeMessages(crawler.input_subscription))
    return outputs
