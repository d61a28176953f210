"""Names of the storage resources and the Bigtable schema, shared by the pipeline,
``crawler local up`` and the inspection commands.

Cells are UTF-8 text (numbers as decimal strings) so that ``cbt read`` shows them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """A Bigtable column family and its garbage-collection rule."""

    name: str
    max_versions: int | None = None
    max_age_days: int | None = None
    doc: str = ""


WEBTABLE = "webtable"
HOSTS_TABLE = "hosts"
DEADLETTER_TABLE = "deadletter"

# webtable: one row per URL, row key = reversed-host URL (see transforms.rowkeys.row_key).
FETCH_FAMILY = "f"
CONTENT_FAMILY = "c"
PARSE_FAMILY = "p"
SCHEDULE_FAMILY = "s"
# hosts: one row per politeness key, cumulative counters written at every lease end.
HOST_FAMILY = "h"
# deadletter: one row per element that could not be processed.
DEADLETTER_FAMILY = "d"

TABLE_FAMILIES: dict[str, tuple[Family, ...]] = {
    WEBTABLE: (
        Family(FETCH_FAMILY, max_versions=3,
               doc="status, fetched_at, content_type, length, checksum, outcome, error"),
        Family(CONTENT_FAMILY, max_versions=3, doc="warc_file, warc_offset, warc_length"),
        Family(PARSE_FAMILY, max_versions=1, doc="title, outlinks"),
        Family(SCHEDULE_FAMILY, max_versions=1,
               doc="depth, discovered_from, priority, first_seen, host"),
    ),
    HOSTS_TABLE: (
        Family(HOST_FAMILY, max_versions=1, doc="per-host counters and politeness state"),
    ),
    DEADLETTER_TABLE: (
        Family(DEADLETTER_FAMILY, max_age_days=30, doc="stage, reason, payload"),
    ),
}

# Defaults of the local stack (and of a fresh project provisioned by the same code).
DEFAULT_PROJECT = "local-crawler"
DEFAULT_INSTANCE = "crawler"
DEFAULT_TOPIC = "frontier"
DEFAULT_SUBSCRIPTION = "frontier-crawler"
DEFAULT_BUCKET = "crawler-local"
