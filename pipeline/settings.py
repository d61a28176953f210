"""``CrawlSettings``: the crawler's flags as one typed, frozen record, read once from the options.

``CrawlerOptions`` declares the flags (for Beam, the Dataflow template and ``--help``); Beam's
options are read by name at run time, so a misspelt name is only found when that line runs.
Everything in the pipeline reads the flags from this record instead, whose fields mypy checks,
and the policy file is loaded once, here. ``tests/unit/pipeline/test_options.py`` checks that the
fields and the flags are the same names.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from transforms.core.policy import Policy
from transforms.core.robots import product_token
from transforms.frontier.context import FrontierConfig
from transforms.frontier.leases import FetchConfig

WARC_ROLL_BODIES = 3  # the default WARC roll size, in --max_body_bytes

@dataclass(frozen=True)
class CrawlSettings:
    """The value of every crawler flag (``pipeline.options.CrawlerOptions`` has the help
    texts), plus the loaded policy and the Bigtable project actually used."""

    input_subscription: str
    frontier_topic: str
    bigtable_project: str | None
    bigtable_instance: str
    webtable: str
    frontier_table: str
    hosts_table: str
    deadletter_table: str
    batches_table: str
    dedup_table: str
    follow_duplicate_links: bool
    scope: str
    near_duplicate_threshold: float
    export_prefix: str | None
    export_roll_seconds: float
    notifications_topic: str | None
    batch_results_prefix: str | None
    clients_file: str | None
    warc_prefix: str
    warc_roll_bytes: int  # None as a flag: WARC_ROLL_BODIES x max_body_bytes
    warc_roll_seconds: float
    warc_shards: int
    policy_file: str | None
    min_delay: float | None
    lease_seconds: float
    max_lease_urls: int
    frontier_head_size: int
    max_seen_per_host: int
    seen_error_rate: float
    robots_ttl: float
    retry_delay: float
    crawl_user_agent: str
    connect_timeout: float
    read_timeout: float
    fetch_timeout: float
    max_body_bytes: int
    allow_private_networks: bool
    max_redirects: int
    pubsub_source: str
    pubsub_readers: int
    checkpointing_interval: int | None
    finish_bundle_before_checkpointing: bool | None
    state_backend: str | None
    state_backend_storage_path: str | None
    wait: bool
    max_pages: int
    idle_timeout: float
    # Derived, not flags:
    policy: Policy
    project: str  # --bigtable_project, else --project

    @staticmethod
    def flag_names() -> set[str]:
        """The fields that are flags (``policy_file`` is the ``--policy`` flag)."""
        return {f.name for f in fields(CrawlSettings)} - {"policy", "project",
                                                          "policy_file"} | {"policy"}

    @classmethod
    def from_flags(cls, values: dict[str, Any], policy: Policy) -> CrawlSettings:
        """From the options' values by flag name (``get_all_options()``) and the loaded
        policy."""
        own = {f.name for f in fields(cls)} - {"policy", "project", "policy_file"}
        given = {name: values[name] for name in own}
        if given["warc_roll_bytes"] is None:  # a WARC shard holds at most a few bodies
            given["warc_roll_bytes"] = WARC_ROLL_BODIES * given["max_body_bytes"]
        return cls(**given, policy_file=values["policy"],
                   policy=policy, project=values["bigtable_project"] or values.get("project")
                   or "")

    def frontier_config(self) -> FrontierConfig:
        """The frontier's settings (``transforms.frontier.context.FrontierConfig``)."""
        fetch = FetchConfig(user_agent=self.crawl_user_agent,
                            connect_timeout=self.connect_timeout,
                            read_timeout=self.read_timeout, total_timeout=self.fetch_timeout,
                            max_body_bytes=self.max_body_bytes,
                            max_redirects=self.max_redirects,
                            allow_private_networks=self.allow_private_networks)
        return FrontierConfig(
            policy=self.policy, lease_seconds=self.lease_seconds,
            max_lease_urls=self.max_lease_urls, head_size=self.frontier_head_size,
            refill_size=max(1, self.frontier_head_size // 2),
            max_seen=self.max_seen_per_host, seen_error_rate=self.seen_error_rate,
            robots_ttl=self.robots_ttl, retry_delay=self.retry_delay,
            robots_agent=product_token(self.crawl_user_agent), fetch=fetch, scope=self.scope,
            follow_duplicate_links=self.follow_duplicate_links, dedup_table=self.dedup_table)

    def results_prefix(self) -> str:
        """Where finished batches' results files go (``--batch_results_prefix``, else a
        ``batches`` folder under ``--warc_prefix``)."""
        if self.batch_results_prefix:
            return self.batch_results_prefix
        return f"{self.warc_prefix.rstrip('/')}/batches" if self.warc_prefix else ""

    def exports_prefix(self) -> str:
        """Where the Parquet exports go: ``--export_prefix``, else an ``exports`` folder beside
        ``--warc_prefix`` (``gs://b/warc`` -> ``gs://b/exports``); "" when turned off."""
        if self.export_prefix:
            return "" if self.export_prefix.lower() == "none" else self.export_prefix
        warc = self.warc_prefix.rstrip("/") if self.warc_prefix else ""
        if not warc:
            return ""
        parent = warc.rsplit("/", 1)[0] if "/" in warc.split("://", 1)[-1] else warc
        return f"{parent}/exports"
