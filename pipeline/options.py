"""``CrawlerOptions``: every flag of the crawl pipeline, with units and defaults, and validation.

Flags accept both spellings (``--min_delay`` as Beam and Dataflow templates use, and ``--min-delay``
as the CLI documents). Unknown flags are left for Beam's own options, never dropped.
"""

from __future__ import annotations

import dataclasses
import re

from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.policy_source import load_policy_file
from pipeline.settings import CrawlSettings
from transforms.core.policy import DEFAULT_POLICY, Policy
from transforms.core.scope import SCOPE_ANY, SCOPES
from transforms.formats.schema import (
    BATCHES_TABLE,
    DEADLETTER_TABLE,
    DEDUP_TABLE,
    DEFAULT_INSTANCE,
    FRONTIER_TABLE,
    HOSTS_TABLE,
    WEBTABLE,
)

_SUBSCRIPTION_RE = re.compile(r"^projects/[^/]+/subscriptions/[^/]+$")
_TOPIC_RE = re.compile(r"^projects/[^/]+/topics/[^/]+$")
PUBSUB_SOURCES = ("auto", "native", "portable")
# Flags the Dataflow Flex Template does not expose, and why; every other flag is a template
# parameter (tests/unit/pipeline/test_templates.py checks templates/dataflow/metadata.json both
# ways).
NOT_TEMPLATE_PARAMETERS = {
    "max_pages": "local runs only: the local driver stops the job",
    "idle_timeout": "local runs only: the local driver stops the job",
    "wait": "the Flex Template launcher must return once the job is submitted",
    "checkpointing_interval": "Flink only; Dataflow checkpoints by itself",
    "finish_bundle_before_checkpointing": "Flink only",
    "state_backend": "Flink only",
    "state_backend_storage_path": "Flink only",
}
FLINK_STATE_BACKENDS = ("filesystem", "rocksdb")
NATIVE_PUBSUB_RUNNERS = {None, "DirectRunner", "direct", "SwitchingDirectRunner",
                         "BundleBasedDirectRunner", "DataflowRunner", "dataflow",
                         "TestDataflowRunner"}
# Prism keeps its state in memory and finalizes each bundle right after it (no durable
# checkpoint first), so its jobs acknowledge Pub/Sub messages from the pipeline (transforms.acks).
PRISM_RUNNERS = {"PrismRunner", "prism"}


def parse_bool(text: str) -> bool:
    """``true``/``false`` (and 1/0, yes/no), as Dataflow templates pass boolean parameters."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {text!r} (use true or false)")


def _flag(parser, name: str, **kwargs) -> None:
    parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}", dest=name, **kwargs)


class CrawlerOptions(PipelineOptions):
    """The crawler's pipeline options (Beam's own options, e.g. --runner, are separate)."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        _flag(parser, "input_subscription", default=None,
              help="Pub/Sub subscription of the frontier topic to read crawl requests from, "
                   "e.g. projects/my-project/subscriptions/frontier-crawler. Required.")
        _flag(parser, "frontier_topic", default=None,
              help="Pub/Sub topic that discovered links are published to (the crawl loop), "
                   "e.g. projects/my-project/topics/frontier. Required.")
        _flag(parser, "bigtable_project", default=None,
              help="Project of the Bigtable instance (default: --project).")
        _flag(parser, "bigtable_instance", default=DEFAULT_INSTANCE,
              help=f"Bigtable instance id (default: {DEFAULT_INSTANCE}).")
        _flag(parser, "webtable", default=WEBTABLE,
              help=f"Bigtable table with one row per URL (default: {WEBTABLE}).")
        _flag(parser, "frontier_table", default=FRONTIER_TABLE,
              help="Bigtable table holding every host's pending work in fetch order "
                   f"(default: {FRONTIER_TABLE}).")
        _flag(parser, "hosts_table", default=HOSTS_TABLE,
              help=f"Bigtable table with one row of counters per host (default: {HOSTS_TABLE}).")
        _flag(parser, "deadletter_table", default=DEADLETTER_TABLE,
              help="Bigtable table for messages and URLs that could not be processed "
                   f"(default: {DEADLETTER_TABLE}).")
        _flag(parser, "batches_table", default=BATCHES_TABLE,
              help="Bigtable table with one row per client batch: its record, each URL's "
                   f"outcome and its notifications (default: {BATCHES_TABLE}).")
        _flag(parser, "dedup_table", default=DEDUP_TABLE,
              help="Bigtable table of content digests and MinHash LSH buckets: duplicate and "
                   f"near-duplicate detection's memory (default: {DEDUP_TABLE}).")
        _flag(parser, "follow_duplicate_links", nargs="?", const=True, type=parse_bool,
              default=False,
              help="Follow the links of a page whose content duplicates another URL's "
                   "(default: false: a mirror's links are the original's).")
        _flag(parser, "scope", default=SCOPE_ANY, choices=SCOPES,
              help="How far the crawl may go from its seeds: host (links to the same host "
                   "as the page they are on), domain (to the same registered domain, by the "
                   "Public Suffix List) or any (default: any; the policy's filters decide).")
        _flag(parser, "near_duplicate_threshold", type=float, default=0.9,
              help="Estimated Jaccard similarity of word shingles at or above which a page is "
                   "recorded as a near duplicate of an earlier one (default: 0.9).")
        _flag(parser, "export_prefix", default=None,
              help="Where the analysts' Parquet exports go (pages, outcomes, near_duplicates, "
                   "Hive-partitioned by dt and hour), e.g. gs://my-bucket/exports; 'none' "
                   "turns them off (default: an exports folder beside --warc_prefix).")
        _flag(parser, "export_roll_seconds", type=float, default=60.0,
              help="Write the export files at most this many seconds after their first row "
                   "(default: 60).")
        _flag(parser, "notifications_topic", default=None,
              help="Pub/Sub topic that batch notifications (milestones, done) are published "
                   "to, e.g. projects/my-project/topics/notifications (default: none).")
        _flag(parser, "batch_results_prefix", default=None,
              help="Where each finished batch's results file (JSONL) goes (default: "
                   "<warc_prefix>/batches).")
        _flag(parser, "clients_file", default=None,
              help="Clients file (JSON, local or gs://): each client's API token and webhook "
                   "signing secret; see transforms/core/clients.py (default: unsigned "
                   "webhooks).")
        _flag(parser, "warc_prefix", default=None,
              help="Where WARC files go, e.g. gs://my-bucket/warc (a local directory works for "
                   "tests). Required.")
        _flag(parser, "warc_roll_bytes", type=int, default=None,
              help="Start a new WARC file once buffered bodies reach this many bytes "
                   "(default: 3 x --max_body_bytes = 30 MiB, so a WARC shard holds at most "
                   "about four bodies' worth of pages).")
        _flag(parser, "warc_roll_seconds", type=float, default=10.0,
              help="Write a WARC file at most this many seconds after its first page "
                   "(default: 10).")
        _flag(parser, "warc_shards", type=int, default=4,
              help="Number of concurrent WARC writers (default: 4).")
        _flag(parser, "policy", default=None,
              help="Crawl policy file (YAML or JSON): defaults and per-host or per-domain "
                   "overrides of delays, budgets, depth, filters, traps, priorities, user agent; "
                   "see transforms/core/policy.py, e.g. policy.yaml (default: built-in defaults).")
        _flag(parser, "min_delay", type=float, default=None,
              help="Minimum seconds between requests to one host, overriding the policy's "
                   "default; a larger robots.txt Crawl-delay wins (default: the policy's, 1.0).")
        _flag(parser, "lease_seconds", type=float, default=10.0,
              help="The longest a host's lease runs, in seconds: a lease carries about 40 "
                   "URLs, at least one second and at most lease_seconds of the host's work "
                   "(its delay and request time per URL) (default: 10).")
        _flag(parser, "max_lease_urls", type=int, default=256,
              help="Most URLs in one lease (default: 256).")
        _flag(parser, "frontier_head_size", type=int, default=2000,
              help="Pending URLs per host kept in the runner's state; the rest of a host's "
                   "pending URLs stay in the frontier table and are read back as the head "
                   "empties, so no URL is ever dropped for lack of room (default: 2000).")
        _flag(parser, "max_seen_per_host", type=int, default=1_000_000,
              help="Capacity of a host's seen-URL Bloom filter (default: 1000000).")
        _flag(parser, "seen_error_rate", type=float, default=1e-6,
              help="False-positive bound of the seen-URL filter (default: 1e-6).")
        _flag(parser, "robots_ttl", type=float, default=86400.0,
              help="Seconds a fetched robots.txt is cached (default: 86400).")
        _flag(parser, "retry_delay", type=float, default=5.0,
              help="Base seconds of exponential back-off for robots.txt retries (default: 5).")
        _flag(parser, "crawl_user_agent", default="beam-crawler/0.1",
              help="User-Agent header of crawl requests; its product token is matched in "
                   "robots.txt (default: beam-crawler/0.1).")
        _flag(parser, "connect_timeout", type=float, default=10.0,
              help="Seconds to establish a connection (default: 10).")
        _flag(parser, "read_timeout", type=float, default=20.0,
              help="Seconds between reads before giving up (default: 20).")
        _flag(parser, "fetch_timeout", type=float, default=30.0,
              help="Total seconds per request (default: 30).")
        _flag(parser, "max_body_bytes", type=int, default=10 * 1024 * 1024,
              help="Bodies are truncated at this many bytes and marked (default: 10485760).")
        _flag(parser, "allow_private_networks", nargs="?", const=True, type=parse_bool,
              default=False,
              help="Allow connections to loopback, private, link-local and metadata addresses. "
                   "Off by default (SSRF guard); the local demo and the tests turn it on.")
        _flag(parser, "max_redirects", type=int, default=5,
              help="Same-host redirect hops followed per URL (default: 5).")
        _flag(parser, "pubsub_source", default="auto", choices=PUBSUB_SOURCES,
              help="How the frontier subscription is read: 'native' (Beam's ReadFromPubSub, "
                   "Dataflow and the DirectRunner only), 'portable' (transforms.pubsub_source, "
                   "any runner; acknowledges after the runner's checkpoint) or 'auto' (native "
                   "where it runs, portable elsewhere, e.g. on Flink) (default: auto).")
        _flag(parser, "pubsub_readers", type=int, default=1,
              help="Portable source only: concurrent pullers of the subscription (default: 1).")
        _flag(parser, "checkpointing_interval", type=int, default=None,
              help="Flink: milliseconds between checkpoints; the portable Pub/Sub source "
                   "acknowledges messages after each (default on Flink: 2000).")
        _flag(parser, "finish_bundle_before_checkpointing", nargs="?", const=True,
              type=parse_bool, default=None,
              help="Flink: finish the open bundle before a checkpoint. Python splittable DoFns "
                   "(the portable Pub/Sub source) make no progress on Flink with checkpoints "
                   "unless this is true (default on Flink: true).")
        _flag(parser, "state_backend", choices=FLINK_STATE_BACKENDS, default=None,
              help="Flink: where operator state and checkpoints live, 'filesystem' or "
                   "'rocksdb' (default on an embedded Flink: filesystem in a temporary folder; "
                   "Flink's own default keeps checkpoints in the JobManager's memory, at most "
                   "5 MB, which a crawl's state outgrows).")
        _flag(parser, "state_backend_storage_path", default=None,
              help="Flink: checkpoint folder of --state_backend, e.g. file:///tmp/ckpt or "
                   "gs://bucket/flink/checkpoints.")
        _flag(parser, "wait", nargs="?", const=True, type=parse_bool, default=False,
              help="Dataflow or a Flink cluster: block until the job ends instead of returning "
                   "once it is submitted (default: return at once).")
        _flag(parser, "max_pages", type=int, default=0,
              help="Local runs: stop after about this many pages (0 = no limit; default: 0).")
        _flag(parser, "idle_timeout", type=float, default=20.0,
              help="Local runs: stop when nothing changed for this many seconds and no URL is "
                   "queued (default: 20; must exceed --warc_roll_seconds).")

    def settings(self, policy: Policy | None = None) -> CrawlSettings:
        """Every crawler flag, typed (``pipeline.settings``), with the policy loaded (raises
        ``PolicyError``, a ValueError): the ``--policy`` file, else the defaults, or
        ``policy`` if given; ``--min_delay`` applies to its defaults. The one place the flags
        are read by name."""
        values = self.get_all_options()
        if values["min_delay"] is not None and values["min_delay"] < 0:
            raise ValueError(f"--min_delay must be >= 0, got {values['min_delay']}")
        if policy is None:
            policy = load_policy_file(values["policy"]) if values["policy"] else DEFAULT_POLICY
        if values["min_delay"] is not None:
            defaults = dataclasses.replace(policy.defaults, min_delay=values["min_delay"])
            policy = dataclasses.replace(policy, defaults=defaults)
        return CrawlSettings.from_flags(values, policy)

    def validate_crawler(self) -> None:
        """Raises ValueError with a clear message for any invalid combination of flags (the
        policy file is checked when ``settings`` loads it)."""
        s = self.settings(policy=DEFAULT_POLICY)
        if not s.input_subscription or not _SUBSCRIPTION_RE.match(s.input_subscription):
            raise ValueError("--input_subscription must look like projects/PROJECT/"
                             f"subscriptions/NAME, got {s.input_subscription!r}")
        if not s.frontier_topic or not _TOPIC_RE.match(s.frontier_topic):
            raise ValueError("--frontier_topic must look like projects/PROJECT/topics/NAME, "
                             f"got {s.frontier_topic!r}")
        if s.notifications_topic and not _TOPIC_RE.match(s.notifications_topic):
            raise ValueError("--notifications_topic must look like projects/PROJECT/topics/"
                             f"NAME, got {s.notifications_topic!r}")
        if not s.warc_prefix:
            raise ValueError("--warc_prefix is required, e.g. gs://my-bucket/warc")
        if not s.project:
            raise ValueError("--bigtable_project or --project is required")
        for name, value in (("min_delay", s.min_delay), ("retry_delay", s.retry_delay)):
            if value is not None and value < 0:
                raise ValueError(f"--{name} must be >= 0, got {value}")
        for name, positive in (("lease_seconds", s.lease_seconds), ("robots_ttl", s.robots_ttl),
                               ("connect_timeout", s.connect_timeout),
                               ("read_timeout", s.read_timeout),
                               ("fetch_timeout", s.fetch_timeout),
                               ("warc_roll_seconds", s.warc_roll_seconds),
                               ("idle_timeout", s.idle_timeout)):
            if positive <= 0:
                raise ValueError(f"--{name} must be > 0, got {positive}")
        for name, count in (("max_body_bytes", s.max_body_bytes),
                            ("max_lease_urls", s.max_lease_urls),
                            ("frontier_head_size", s.frontier_head_size),
                            ("max_seen_per_host", s.max_seen_per_host),
                            ("warc_roll_bytes", s.warc_roll_bytes),
                            ("warc_shards", s.warc_shards),
                            ("pubsub_readers", s.pubsub_readers)):
            if count < 1:
                raise ValueError(f"--{name} must be >= 1, got {count}")
        if s.max_redirects < 0 or s.max_pages < 0:
            raise ValueError("--max_redirects and --max_pages must be >= 0")
        if not 0.8 <= s.near_duplicate_threshold <= 1.0:  # the LSH bands are tuned for >= 0.8
            raise ValueError("--near_duplicate_threshold must be in [0.8, 1], got "
                             f"{s.near_duplicate_threshold}")
        if s.export_roll_seconds <= 0:
            raise ValueError(f"--export_roll_seconds must be > 0, got {s.export_roll_seconds}")
        if not 0 < s.seen_error_rate < 0.5:
            raise ValueError(f"--seen_error_rate must be in (0, 0.5), got {s.seen_error_rate}")
        if not s.crawl_user_agent.split("/", 1)[0].strip():
            raise ValueError("--crawl_user_agent must start with a product token, "
                             "e.g. beam-crawler/0.1")

    def uses_native_pubsub(self) -> bool:
        """Whether the frontier is read with Beam's native ``ReadFromPubSub`` (see
        ``--pubsub_source``)."""
        values = self.get_all_options()
        choice = values["pubsub_source"]
        if choice != "auto":
            return bool(choice == "native")
        return self._runner_name() in NATIVE_PUBSUB_RUNNERS

    def runs_on_prism(self) -> bool:
        """Whether ``--runner`` is Beam's Prism runner (its frontier reader leaves acknowledgement
        to the pipeline, ``PullFromPubSub(pipeline_acks=True)``)."""
        return self._runner_name() in PRISM_RUNNERS

    def _runner_name(self) -> str | None:
        """``--runner`` as a name (a runner object given in code: its class's)."""
        runner = self.get_all_options().get("runner")
        return runner if isinstance(runner, str) or runner is None else type(runner).__name__


def validate_local_run(settings: CrawlSettings) -> None:
    """Checks that only matter when the local driver runs and stops the job."""
    if settings.idle_timeout <= settings.warc_roll_seconds + 1:
        raise ValueError("--idle_timeout must exceed --warc_roll_seconds by more than 1 s so "
                         "the last WARC file is written before a local run stops")
