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
FRONTIER_TABLE = "frontier"
BATCHES_TABLE = "batches"
DEDUP_TABLE = "dedup"

# webtable: one row per URL, row key = reversed-host URL (see transforms.formats.rowkeys.row_key).
FETCH_FAMILY = "f"
CONTENT_FAMILY = "c"
PARSE_FAMILY = "p"
SCHEDULE_FAMILY = "s"
# ``b:<batch id>`` = the URL's outcome for that client batch (the batches that asked for it).
URL_BATCH_FAMILY = "b"
# hosts: one row per frontier key: cumulative counters written at every lease end, the last
# robots.txt verdict (robots_* columns, written when it changes) and whether the key has work
# pending (``pending``: "1" or "0", written when it changes; a new job wakes the "1" keys).
HOST_FAMILY = "h"
PENDING_COLUMN = "pending"
# frontier: the index of pending work, one row per entry (transforms.formats.index).
INDEX_FAMILY = "q"
# batches: one row per client batch (row key = batch id; transforms.formats.batch_rows):
# ``m`` the record (client, sizes, options, state), ``u:<url>`` each URL's outcome (JSON),
# ``n`` the notifications sent and every webhook attempt.
BATCH_META_FAMILY = "m"
BATCH_URL_FAMILY = "u"
BATCH_NOTIFY_FAMILY = "n"
# dedup: the content index that duplicate detection keeps (``transforms.formats.dedup_rows``):
# ``d#<text or payload digest>`` rows (``d`` family: the first URL seen with that content, the
# original capture of each payload, a few other URLs for DUST evidence) and ``l#<band>#<hash>``
# rows (``l`` family: the bounded candidate list of one MinHash LSH band bucket).
DIGEST_FAMILY = "d"
BAND_FAMILY = "l"
# deadletter: one row per element that could not be processed.
DEADLETTER_FAMILY = "d"

TABLE_FAMILIES: dict[str, tuple[Family, ...]] = {
    WEBTABLE: (
        Family(FETCH_FAMILY, max_versions=3,
               doc="status, fetched_at, content_type, length, checksum, outcome, error"),
        Family(CONTENT_FAMILY, max_versions=3, doc="warc_file, warc_offset, warc_length"),
        Family(PARSE_FAMILY, max_versions=1,
               doc="title, description, og_*, canonical, lang, text (capped), word_count, "
                   "outlinks (count), links (JSON, capped), noindex, nofollow, text_digest, "
                   "duplicate_of, duplicate_kind, near_duplicate_of, near_similarity"),
        Family(SCHEDULE_FAMILY, max_versions=1,
               doc="depth, discovered_from, priority, first_seen, host, next_fetch, "
                   "recrawl_interval"),
        Family(URL_BATCH_FAMILY, max_versions=1, doc="<batch id>: the URL's outcome for it"),
    ),
    HOSTS_TABLE: (
        Family(HOST_FAMILY, max_versions=1, doc="per-host counters and politeness state"),
    ),
    DEADLETTER_TABLE: (
        Family(DEADLETTER_FAMILY, max_age_days=30, doc="stage, reason, payload"),
    ),
    BATCHES_TABLE: (
        Family(BATCH_META_FAMILY, max_versions=1,
               doc="client, submitted_at, sent, total, priority, cache_hours, notify, state, "
                   "done_at, outcomes"),
        Family(BATCH_URL_FAMILY, max_versions=1, doc="<url>: the URL's outcome (JSON)"),
        Family(BATCH_NOTIFY_FAMILY, max_versions=1,
               doc="sent:<transition>, attempt:<transition>:<n> (JSON)"),
    ),
    DEDUP_TABLE: (
        Family(DIGEST_FAMILY, max_versions=1,
               doc="v: the digest's record (JSON: original URL and capture, other URLs)"),
        Family(BAND_FAMILY, max_versions=1,
               doc="v: the band bucket's candidates (JSON: URL, host, signature)"),
    ),
    FRONTIER_TABLE: (
        Family(INDEX_FAMILY, max_versions=1,
               doc="v: the entry (JSON: request, eligible at, rank, seq, holder)"),
    ),
}

# Defaults of the local stack (and of a fresh project provisioned by the same code).
DEFAULT_PROJECT = "local-crawler"
DEFAULT_INSTANCE = "crawler"
DEFAULT_TOPIC = "frontier"
DEFAULT_NOTIFICATIONS_TOPIC = "notifications"  # batch milestones and completions
DEFAULT_SUBSCRIPTION = "frontier-crawler"
DEFAULT_BUCKET = "crawler-local"
