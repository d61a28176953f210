"""Client batches as plain Python: checking a submission, counting outcomes, milestones,
notification bodies and their signatures (pure; no Beam, no I/O, clock injected).

The CLI (``crawler submit``), the HTTP API (``crawler api``) and the pipeline's intake of a
batch message all call :func:`prepare_batch`, so a batch is checked and normalized the same way
whichever door it came through.

A batch's life::

    submitted --intake--> running --every URL has an outcome--> done
                 |  (record + ``invalid`` outcomes written, URLs sent to their hosts' keys)
                 +-- same batch id again: nothing new

Outcomes: every URL of a batch ends in exactly one of :data:`OUTCOMES`: the URL's terminal
status in the webtable (``transforms.core.status``), ``cached`` (fetched within the batch's
cache time, answered from the webtable without a request) or ``invalid`` (refused when the
batch was checked, with its reason).

Counting (``BatchTally``) keeps the set of URLs with an outcome and a count per outcome, so an
outcome delivered twice (a Pub/Sub redelivery, a replayed bundle) is counted once: the cost per
URL event is one set lookup, never a scan, and the state of a 10,000-URL batch is ~10,000
fingerprints of 8 bytes. A tally lost with its runner state is rebuilt from the batch's row,
which holds one cell per URL outcome.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from transforms.core import status
from transforms.core.urls import InvalidUrl, canonicalize_url

MAX_BATCH_URLS = 10_000
MAX_NOTIFY_ATTEMPTS = 5
DEFAULT_MILESTONE_STEP = 25  # percent; 0 turns milestone notifications off
BATCH_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
CLIENT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

CACHED = "cached"
INVALID = "invalid"
OUTCOMES = frozenset(status.TERMINAL - {status.FRESH}) | {CACHED, INVALID}
SUCCESSES = frozenset({status.FETCHED, status.NOT_STORED, status.NOT_MODIFIED, status.REDIRECT,
                       CACHED})

STATE_RUNNING = "running"
STATE_DONE = "done"
TRANSITION_DONE = "done"


class BatchError(ValueError):
    """A submission that cannot be accepted at all (too many URLs, a bad id, no URLs)."""


@dataclass(frozen=True)
class BatchSpec:
    """What a client asks for with a batch, apart from its URLs.

    Attributes:
        batch_id: the client's id for the batch (a fresh one is made when it gives none).
        client: the client's name (lower-case letters, digits, ``-`` and ``_``).
        priority: added to each URL's priority within the client's share.
        cache_hours: a URL fetched successfully less than this long ago is answered from the
            webtable (``cached``); None: the response's own freshness (its caching headers,
            else the crawl's recrawl interval) decides.
        notify: a webhook URL that gets the notifications, or None.
        milestone_step: a notification every this many percent (0: only when done).
    """

    batch_id: str
    client: str
    priority: int = 0
    cache_hours: float | None = None
    notify: str | None = None
    milestone_step: int = DEFAULT_MILESTONE_STEP


@dataclass(frozen=True)
class PreparedBatch:
    """A checked batch: its canonical URLs (each once, in the order sent), the URLs refused with
    their reasons, and the size as sent."""

    spec: BatchSpec
    urls: tuple[str, ...]
    invalid: tuple[tuple[str, str], ...]
    sent: int

    @property
    def total(self) -> int:
        """URLs the batch answers for: the unique valid ones and the invalid ones."""
        return len(self.urls) + len(self.invalid)


def new_batch_id() -> str:
    return "b-" + uuid.uuid4().hex[:20]


def check_spec(spec: BatchSpec) -> None:
    """Raises BatchError for a batch id, client, cache time, step or webhook that cannot be
    used (the webhook's address is checked again by the SSRF guard when it is called)."""
    if not BATCH_ID_PATTERN.match(spec.batch_id):
        raise BatchError(f"batch id {spec.batch_id!r}: use 1-128 letters, digits, '.', '_' "
                         "or '-', starting with a letter or digit")
    if not CLIENT_PATTERN.match(spec.client):
        raise BatchError(f"client {spec.client!r}: use 1-63 lower-case letters, digits, '_' "
                         "or '-'")
    if spec.cache_hours is not None and not (0 <= spec.cache_hours <= 24 * 365):
        raise BatchError(f"cache hours {spec.cache_hours}: must be between 0 and 8760")
    if not 0 <= spec.milestone_step <= 100:
        raise BatchError(f"milestone step {spec.milestone_step}: must be 0-100 percent")
    if spec.notify is not None and not spec.notify.startswith(("http://", "https://")):
        raise BatchError(f"notify {spec.notify!r}: must be an http(s) URL")


def prepare_batch(spec: BatchSpec, raw_urls: Sequence[str],
                  canonicalize: Callable[[str], str] = canonicalize_url,
                  sent: int | None = None) -> PreparedBatch:
    """Checks and normalizes a batch: at most ``MAX_BATCH_URLS`` URLs as sent; each URL
    canonicalized (``transforms.core.urls``), or recorded as invalid with the reason; repeats
    (after canonicalization) kept once. The pipeline passes its policy's ``canonicalize``
    (session and tracking parameters removed as for any URL it crawls), and ``sent``: the
    client's count when a submitter deduplicated the URLs already.

    Raises:
        BatchError: more than ``MAX_BATCH_URLS`` URLs, none at all, or a bad spec.
    """
    check_spec(spec)
    if len(raw_urls) > MAX_BATCH_URLS:
        raise BatchError(f"a batch has at most {MAX_BATCH_URLS:,} URLs; this one has "
                         f"{len(raw_urls):,}: split it into several batches")
    if not raw_urls:
        raise BatchError("a batch needs at least one URL")
    urls: dict[str, None] = {}
    invalid: dict[str, str] = {}
    for raw in raw_urls:
        text = raw.strip() if isinstance(raw, str) else ""
        try:
            if not text:
                raise InvalidUrl("empty URL")
            urls.setdefault(canonicalize(text), None)
        except InvalidUrl as exc:
            invalid.setdefault(text or repr(raw), str(exc) or "invalid URL")
    return PreparedBatch(spec, tuple(urls), tuple(invalid.items()),
                         max(sent or 0, len(raw_urls)))


def batch_outcome(url_status: str) -> str:
    """A URL's terminal status as a batch outcome (``fresh`` is the batch's ``cached``)."""
    return CACHED if url_status == status.FRESH else url_status


def url_key(url: str) -> bytes:
    """The 8-byte fingerprint a tally remembers a URL by."""
    return hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()


@dataclass
class BatchTally:
    """A batch's counts: which URLs have an outcome (each counted once) and how many per
    outcome, with the time of the first and last, for the rate and the ETA."""

    total: int
    done: set[bytes] = field(default_factory=set)
    outcomes: dict[str, int] = field(default_factory=dict)
    first_at: float | None = None
    last_at: float | None = None

    def add(self, url: str, outcome: str, at: float) -> bool:
        """Counts ``url``'s outcome; False (nothing counted) when it has one already."""
        key = url_key(url)
        if key in self.done:
            return False
        self.done.add(key)
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.first_at = at if self.first_at is None else min(self.first_at, at)
        self.last_at = at if self.last_at is None else max(self.last_at, at)
        return True

    @property
    def finished(self) -> int:
        return len(self.done)

    @property
    def complete(self) -> bool:
        return self.finished >= self.total

    def percent(self) -> float:
        """Percent finished, rounded down to 0.1 (99.99% shows 99.9, never a false 100)."""
        if self.total == 0:
            return 100.0
        return math.floor(1000.0 * self.finished / self.total) / 10.0

    def eta_seconds(self, now: float) -> float | None:
        """Seconds until done at the batch's own rate so far (None before two outcomes)."""
        if self.complete:
            return 0.0
        if self.first_at is None or self.finished < 2:
            return None
        elapsed = max(now, self.last_at or now) - self.first_at
        if elapsed <= 0:
            return None
        rate = (self.finished - 1) / elapsed
        return (self.total - self.finished) / rate if rate > 0 else None


def milestones_reached(percent: float, step: int) -> list[int]:
    """The milestones (multiples of ``step`` percent below 100) that ``percent`` has passed."""
    if step <= 0:
        return []
    return [m for m in range(step, 100, step) if percent >= m]


def transitions_due(tally: BatchTally, step: int, sent: Iterable[str]) -> list[str]:
    """The transitions to announce now, in order: milestones (``"25%"`` ...) or ``done``,
    leaving out those in ``sent`` (each transition goes out once). A batch that completes
    announces ``done`` alone: milestones it passed on the way in the same step say nothing
    more."""
    already = set(sent)
    if tally.complete:
        return [] if TRANSITION_DONE in already else [TRANSITION_DONE]
    due = [f"{m}%" for m in milestones_reached(tally.percent(), step)]
    return [t for t in due if t not in already]


def notification_body(spec: BatchSpec, tally: BatchTally, transition: str, now: float,
                      results: Mapping[str, str] | None = None) -> dict[str, object]:
    """The JSON body of a notification (the topic message and the webhook POST are the same).

    ``idempotency_key`` is ``<batch id>:<transition>``: a receiver that has seen it drops a
    redelivery. ``results`` (the done notification) says where the per-URL results are.
    """
    body: dict[str, object] = {
        "idempotency_key": f"{spec.batch_id}:{transition}",
        "batch_id": spec.batch_id,
        "client": spec.client,
        "transition": transition,
        "state": STATE_DONE if tally.complete else STATE_RUNNING,
        "total": tally.total,
        "finished": tally.finished,
        "percent": tally.percent(),
        "outcomes": dict(sorted(tally.outcomes.items())),
        "at": round(now, 3),
    }
    if results:
        body["results"] = dict(results)
    return body


def signature(secret: str, body: bytes) -> str:
    """The ``X-Crawler-Signature`` header value: ``sha256=<hex HMAC-SHA256 of the body>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """What a receiver does: recompute the HMAC over the raw body and compare in constant
    time."""
    return bool(header) and hmac.compare_digest(signature(secret, body).encode(),
                                                (header or "").encode("utf-8", "replace"))


def retry_delay(attempt: int, base: float = 2.0, cap: float = 300.0) -> float:
    """Seconds before webhook attempt ``attempt + 1`` (attempt 1 failed: ``base``; doubling)."""
    return min(cap, base * 2 ** max(0, attempt - 1))


# -- fair share inside a host's queue ---------------------------------------------------------

FAIR_STEP = 0.01  # rank units per URL of a flow: 100 URLs of a flow span one depth level


def flow_of(client: str, batch_id: str) -> str:
    return f"{client}/{batch_id}"


def fair_ranks(count: int, flow: str, start_tags: Mapping[str, float], vclock: float,
               share: int = 1, step: float = FAIR_STEP) -> tuple[list[float], float]:
    """Ranks for ``count`` new URLs of ``flow`` in a host's queue, by start-time fair
    queueing: each URL's rank is one ``step * share`` after the flow's previous one, starting
    no earlier than the queue's virtual clock (the rank of the last URL leased). Flows with
    backlog thus alternate in the queue, a flow that arrives late starts at the present, not
    behind the others' backlog, and a flow split over ``share`` batches (a client's batches
    on the host) advances ``share`` times slower per batch, so a client's batches together get
    one client's share.

    Returns the ranks and the flow's new tag.
    """
    tag = max(start_tags.get(flow, -math.inf), vclock)
    ranks = []
    for _ in range(count):
        tag += step * max(1, share)
        ranks.append(tag)
    return ranks, tag
