"""What the frontier keeps per key in runner state, and its versioned byte formats (pure).

Per-host state is a bounded cache of the webtable and the frontier index
(``transforms.formats.index``); nothing in it is the only copy of something a user asked for.
It is split by how often each part changes, so an element or a timer firing writes only what
it changed:

==============  =========================================================  ===================
state cell      holds                                                      bound
==============  =========================================================  ===================
``host``        :class:`HostState`: politeness, lease, jobs, counters      ~1 KB
``robots``      the host's robots.txt rules (``transforms.core.robots``)        500 KiB of text
``head``        the first pending URLs of the index, in fetch order        ``head_size`` URLs
``arrivals``    URLs accepted since the last timer firing (bag)            one timer period
``inbox``       requests that came while the key was rebuilding (bag)      one rebuild
``seen``        the seen filter's newest stage (``transforms.core.bloom``)      one capped stage
``seen_frozen`` the seen filter's older stages, appended once each (bag)   ``max_seen`` URLs
==============  =========================================================  ===================

Every value has an explicit format: a two-letter magic, a version byte, then JSON (or, for the
seen filter, ``transforms.core.bloom``'s own versioned bytes). A field added later gets a default
when old bytes are read, so ``--update`` of a running Dataflow job keeps its state; a test
reads bytes written by each previous version. Pickled dataclasses would break the day a field
is added.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from transforms.core.records import AckToken, CrawlRequest
from transforms.core.retry import HostBackoff
from transforms.core.robots import RobotsRules
from transforms.formats.messages import request_from_item, request_to_item

PHASE_REBUILDING = "rebuilding"
PHASE_READY = "ready"
JOB_REBUILD = "rebuild"  # a page of the key's webtable rows (and, first, its hosts row)
JOB_REFILL = "refill"  # the next page of the key's index
REFILL_PASSED_CAP = 512  # URLs harvested during one refill read before its page is stale

_HOST_MAGIC, _HOST_VERSION = b"HS", 1
_HEAD_MAGIC, _HEAD_VERSION = b"HD", 1
_INBOX_MAGIC, _INBOX_VERSION = b"IB", 1
_ROBOTS_MAGIC, _ROBOTS_VERSION = b"RB", 1


class HeadEntry(NamedTuple):
    """A pending URL in the head: its index rank and sequence number (which name its index
    row, ``transforms.formats.index``) and its request.

    ``front`` entries (requests given back by a lease, retries) are fetched before the rest.
    """

    rank: float
    request: CrawlRequest
    front: bool = False
    seq: int = 0

    def order(self) -> tuple[int, float, int]:
        return (0 if self.front else 1, self.rank, self.seq)


@dataclass
class ActiveLease:
    lease_id: str
    entries: tuple[HeadEntry, ...]
    deadline: float
    robots: bool
    polls: int = 0
    robots_url: str | None = None  # the robots.txt URL of a robots lease

    @property
    def requests(self) -> tuple[CrawlRequest, ...]:
        return tuple(e.request for e in self.entries)


@dataclass
class IoJob:
    """A read of the tables in flight for this key (run like a lease, off the runner's thread).

    ``kind`` is ``JOB_REBUILD`` (a page of webtable rows) or ``JOB_REFILL`` (an index page).

    A refill reads the index while the key goes on: a lease may take, or finish, a URL whose
    entry the read still returns as pending (it was read before the entry was held). ``passed``
    holds the fingerprints (hex) of the URLs leases harvested while the read was out, so the
    page drops them; past ``REFILL_PASSED_CAP`` of them the page is ``stale``: dropped whole and
    read again (nothing is lost: the index still has every entry).

    ``after``: a refill that continues the key's last one after this index row key
    (``HostState.refill_after``), else None.
    """

    job_id: str
    kind: str
    deadline: float
    polls: int = 0
    passed: list[str] = field(default_factory=list)
    stale: bool = False
    after: str | None = None


@dataclass
class HostState:
    """Everything the frontier keeps about one key besides the cells of its own (see the
    module docstring).

    Attributes worth a word:
        phase: ``rebuilding`` until the key's rows have been read back after its state was
            found empty (a new job, a restart, a moved key), then ``ready``.
        scan_after: the webtable row key the rebuild scan resumes after.
        spilled: index entries of this key beyond the head and the lease (an estimate for the
            hosts table; the index itself is the truth).
        index_exhausted: the last refill read to the end of the index without finding more
            eligible work and nothing was queued since, so the key needs no refill.
        refill_after: the index row key the next refill continues after, or None to read
            from the start. A refill stops after a bounded number of rows; when the window it
            read held no more work than it returned (e.g. only URLs fetched and waiting for
            their rows), reading it again would find the same, so the next read goes on after
            it. Cleared when a read reaches the end, and whenever work may have been added
            ahead of it (URLs the head could not take, a recrawl coming due).
        next_eligible_at: the earliest time an entry beyond the head becomes eligible (a
            scheduled recrawl), or None.
        seen_version: changes with every change of the seen filter, so a process-wide cache of
            the parsed filter can tell whether it is current.
        seen_frozen: how many of the filter's frozen stages are in the ``seen_frozen`` bag.
        robots_saved_at: the ``fetched_at`` of the robots verdict last written to the hosts
            table (the verdict a rebuild reads back).
        marked_pending: what the hosts table's ``h:pending`` says for this key.
        vclock, flow_tags: the fair share of client batches (``transforms.core.batches.
            fair_ranks``): the queue's virtual clock and each batch's last rank; a batch's tag
            is dropped once the clock passes it, so at most one tag per batch with URLs queued.
        url_rules, rule_evidence: the canonicalization rules the key learned from duplicate
            content and the evidence of rules not adopted yet (``transforms.core.dust``); the
            rules are saved in the hosts table (``h:url_rules``) and read back by a rebuild.
    """

    host: str
    phase: str = PHASE_READY
    incarnation: str = ""  # new with every state built from nothing (transforms.formats.index)
    robots_mode: str | None = None  # the rules themselves are in the ``robots`` cell
    robots_fetched_at: float = 0.0
    robots_attempts: int = 0
    robots_retry_at: float = 0.0
    robots_failed_until: float = 0.0
    next_allowed_at: float = 0.0
    request_seconds: float = 0.0  # the host's recent average request time (0: not known yet)
    lease: ActiveLease | None = None
    next_lease: ActiveLease | None = None  # chained after ``lease`` (leasing.plan_successor)
    io: IoJob | None = None
    scan_after: str | None = None
    timer_at: float | None = None
    counters: dict[str, int] = field(default_factory=dict)
    last_error: str = ""
    backoff: HostBackoff = field(default_factory=HostBackoff)
    spilled: int = 0
    index_exhausted: bool = False
    refill_after: str | None = None
    next_eligible_at: float | None = None
    head_size: int = 0
    arrivals: int = 0
    inbox: int = 0
    seq: int = 0  # numbers this key's index entries in the order they were made
    seen_version: str = ""
    seen_frozen: int = 0
    robots_saved_at: float = 0.0
    marked_pending: bool = False
    vclock: float | None = None  # the rank of the last URL leased: the queue's present
    flow_tags: dict[str, float] = field(default_factory=dict)  # client batch -> last rank
    url_rules: list[str] = field(default_factory=list)  # adopted DUST rules (dust.rule_id)
    rule_evidence: dict[str, list[str]] = field(default_factory=dict)  # rule -> digests

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n


# -- formats ------------------------------------------------------------------------------------


def _framed(magic: bytes, version: int, doc: Any) -> bytes:
    return magic + bytes([version]) + json.dumps(doc, separators=(",", ":")).encode()


def _unframed(data: bytes, magic: bytes, newest: int) -> tuple[int, Any]:
    if len(data) < 3 or data[:2] != magic:
        raise ValueError(f"not a {magic.decode()} state value")
    version = data[2]
    if not 1 <= version <= newest:
        raise ValueError(f"{magic.decode()} state version {version} is newer than this code "
                         f"({newest})")
    return version, json.loads(data[3:])


def _entry_doc(entry: HeadEntry) -> list[Any]:
    return [entry.rank, request_to_item(entry.request), int(entry.front), entry.seq]


def _entry_of(doc: list[Any]) -> HeadEntry:
    return HeadEntry(float(doc[0]), request_from_item(doc[1]),
                     bool(doc[2]) if len(doc) > 2 else False, int(doc[3]) if len(doc) > 3 else 0)


def _lease_doc(lease: ActiveLease) -> dict[str, Any]:
    return {"id": lease.lease_id, "entries": [_entry_doc(e) for e in lease.entries],
            "deadline": lease.deadline, "robots": lease.robots, "polls": lease.polls,
            "robots_url": lease.robots_url}


def _lease_of(doc: Mapping[str, Any]) -> ActiveLease:
    return ActiveLease(doc["id"], tuple(_entry_of(e) for e in doc.get("entries", ())),
                       float(doc["deadline"]), bool(doc.get("robots", False)),
                       int(doc.get("polls", 0)), doc.get("robots_url"))


_SIMPLE_FIELDS = tuple(f.name for f in dataclasses.fields(HostState)
                       if f.name not in ("host", "lease", "next_lease", "io", "counters",
                                         "backoff"))


def encode_host_state(state: HostState) -> bytes:
    doc: dict[str, Any] = {name: getattr(state, name) for name in _SIMPLE_FIELDS}
    doc["host"] = state.host
    doc["counters"] = state.counters
    doc["backoff"] = dataclasses.asdict(state.backoff)
    doc["lease"] = None if state.lease is None else _lease_doc(state.lease)
    doc["next_lease"] = None if state.next_lease is None else _lease_doc(state.next_lease)
    doc["io"] = None if state.io is None else dataclasses.asdict(state.io)
    return _framed(_HOST_MAGIC, _HOST_VERSION, doc)


def decode_host_state(data: bytes) -> HostState:
    """Reads a ``host`` cell of any version so far; fields it lacks take their defaults."""
    _, doc = _unframed(data, _HOST_MAGIC, _HOST_VERSION)
    known = {name: doc[name] for name in _SIMPLE_FIELDS if name in doc}
    backoff_fields = {f.name for f in dataclasses.fields(HostBackoff)}
    backoff = HostBackoff(**{k: v for k, v in (doc.get("backoff") or {}).items()
                             if k in backoff_fields})
    io_doc = doc.get("io")
    io = None if io_doc is None else IoJob(io_doc["job_id"], io_doc["kind"],
                                           float(io_doc["deadline"]), int(io_doc.get("polls", 0)),
                                           [str(f) for f in io_doc.get("passed", ())],
                                           bool(io_doc.get("stale", False)),
                                           io_doc.get("after"))
    lease = None if doc.get("lease") is None else _lease_of(doc["lease"])
    next_lease = None if doc.get("next_lease") is None else _lease_of(doc["next_lease"])
    return HostState(host=doc["host"], lease=lease, next_lease=next_lease, io=io,
                     counters={k: int(v) for k, v in (doc.get("counters") or {}).items()},
                     backoff=backoff, **known)


def encode_head(entries: Iterable[HeadEntry]) -> bytes:
    return _framed(_HEAD_MAGIC, _HEAD_VERSION, [_entry_doc(e) for e in entries])


def decode_head(data: bytes) -> list[HeadEntry]:
    _, doc = _unframed(data, _HEAD_MAGIC, _HEAD_VERSION)
    return [_entry_of(e) for e in doc]


@dataclass(frozen=True)
class InboxBatch:
    """Requests (with the ack tokens of their messages) waiting for the key's rebuild."""

    requests: tuple[CrawlRequest, ...]
    tokens: tuple[AckToken, ...] = ()


def encode_inbox(batch: InboxBatch) -> bytes:
    return _framed(_INBOX_MAGIC, _INBOX_VERSION, {
        "requests": [request_to_item(r) for r in batch.requests],
        "tokens": [[t.ack_id, t.part, t.parts] for t in batch.tokens]})


def decode_inbox(data: bytes) -> InboxBatch:
    _, doc = _unframed(data, _INBOX_MAGIC, _INBOX_VERSION)
    return InboxBatch(tuple(request_from_item(r) for r in doc.get("requests", ())),
                      tuple(AckToken(a, int(p), int(n)) for a, p, n in doc.get("tokens", ())))


def encode_robots(rules: RobotsRules) -> bytes:
    return _framed(_ROBOTS_MAGIC, _ROBOTS_VERSION, dataclasses.asdict(rules))


def decode_robots(data: bytes) -> RobotsRules:
    _, doc = _unframed(data, _ROBOTS_MAGIC, _ROBOTS_VERSION)
    return RobotsRules(doc["mode"], doc.get("text", ""), doc.get("status"),
                       float(doc.get("fetched_at", 0.0)), doc.get("error", ""))
