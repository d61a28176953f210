"""Webtable, hosts and dead-letter rows as plain data (pure; no Beam, no Bigtable client).

A row is ``Row(key, cells, at)``: ``cells[family][column] = text`` and ``at`` is the cell
timestamp (seconds). Cells are UTF-8 text so ``cbt read`` shows them; times are ISO 8601 UTC.
Writing the event time as the cell timestamp makes rewrites idempotent and keeps the newest
outcome on top: a URL's ``f:outcome`` goes from ``queued`` (accepted) to its terminal outcome.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime
from typing import NamedTuple

from transforms.core.content import header
from transforms.core.records import (
    OUTCOME_FETCHED,
    DeadLetter,
    FetchResult,
    HostStats,
    NearDuplicate,
    PageContent,
    StoredPage,
    UrlOutcome,
    UrlRecord,
)
from transforms.core.robots import MODES as ROBOTS_MODES
from transforms.core.robots import RobotsRules
from transforms.core.urls import InvalidUrl
from transforms.formats.rowkeys import row_key, url_from_row_key
from transforms.formats.schema import (
    CONTENT_FAMILY,
    DEADLETTER_FAMILY,
    FETCH_FAMILY,
    HOST_FAMILY,
    PARSE_FAMILY,
    PENDING_COLUMN,
    SCHEDULE_FAMILY,
)

Cells = dict[str, dict[str, str]]
MAX_DEAD_LETTER_PAYLOAD = 64 * 1024


class Row(NamedTuple):
    key: str
    cells: Cells
    at: float


def iso(ts: float) -> str:
    """Seconds since the epoch -> ISO 8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def from_iso(text: str | None) -> float | None:
    """The inverse of :func:`iso` (None for a missing or malformed value)."""
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _schedule_cells(result_request, host: str) -> dict[str, str]:
    cells = {"depth": str(result_request.depth), "priority": str(result_request.priority),
             "host": host}
    if result_request.discovered_from:
        cells["discovered_from"] = result_request.discovered_from
    return cells


def fetch_cells(result: FetchResult) -> dict[str, str]:
    """The fetch family of one fetch (stored or not).

    ``f:detail`` is always written, so the terminal row never keeps the detail of an earlier
    ``retry_scheduled`` outcome; it says how many attempts the fetch took when it took more
    than one.
    """
    attempts = result.request.attempt + 1
    cells = {"outcome": result.outcome, "outcome_at": iso(result.fetched_at),
             "detail": "; ".join(filter(None, (
                 result.detail, f"after {attempts} attempts" if attempts > 1 else ""))),
             "fetched_at": iso(result.fetched_at),
             "final_url": result.final_url, "length": str(result.content_length),
             "elapsed_ms": str(round(result.elapsed * 1000))}
    if result.status is not None:
        cells["status"] = str(result.status)
    if result.content_type:
        cells["content_type"] = result.content_type
    if result.redirects:
        cells["redirects"] = " ".join(result.redirects)
    if result.redirect_to:
        cells["redirect_to"] = result.redirect_to
    if result.truncated:
        cells["truncated"] = "1"
    if result.error:
        cells["error"] = result.error
        cells["error_detail"] = result.error_detail or ""
    for name, column in (("etag", "etag"), ("last-modified", "last_modified")):
        value = header(result.headers, name)
        if value:
            cells[column] = value
    return cells


def _fetch_schedule_cells(result: FetchResult) -> dict[str, str]:
    """The schedule family of a fetch: the request's cells and, once the frontier recorded
    the fetch, when the URL is due again."""
    cells = _schedule_cells(result.request, result.host)
    if result.next_fetch_at is not None:
        cells["next_fetch"] = iso(result.next_fetch_at)
        cells["recrawl_interval"] = str(round(result.next_fetch_at - result.fetched_at))
    return cells


def stored_page_row(stored: StoredPage) -> Row:
    """The row of a fetched, stored HTML page: fetch, content, parse and schedule families."""
    fetch = stored.page.fetch
    f = fetch_cells(fetch)
    f["checksum"] = stored.page.checksum
    f["outcome"] = OUTCOME_FETCHED
    cells: Cells = {
        FETCH_FAMILY: f,
        CONTENT_FAMILY: {"warc_file": stored.location.file,
                         "warc_offset": str(stored.location.offset),
                         "warc_length": str(stored.location.length)},
        PARSE_FAMILY: {"outlinks": str(len(stored.page.outlinks))},
        SCHEDULE_FAMILY: _fetch_schedule_cells(fetch),
    }
    page, p = stored.page, cells[PARSE_FAMILY]
    if page.title is not None:
        p["title"] = page.title
    if page.canonical:
        p["canonical"] = page.canonical
    p["noindex"] = "1" if page.noindex else "0"
    p["nofollow"] = "1" if page.nofollow else "0"
    if page.content is not None:
        p.update(content_cells(page.content))
    # Always written, so a page that stopped being a duplicate does not keep the old verdict.
    p["duplicate_of"] = page.duplicate_of or ""
    p["duplicate_kind"] = page.duplicate_kind
    cells[CONTENT_FAMILY]["warc_type"] = "revisit" if page.revisit is not None else "response"
    return Row(row_key(fetch.request.url), cells, fetch.fetched_at)


def content_cells(content: PageContent) -> dict[str, str]:
    """The parse family's analysts' cells of a page (empty fields left out, except the text
    and the counts). The text is capped by extraction (``transforms.core.page_content``)."""
    cells = {"text": content.text, "text_truncated": "1" if content.text_truncated else "0",
             "word_count": str(content.word_count), "text_digest": content.text_digest,
             "links": json.dumps([list(link) for link in content.outlinks],
                                 ensure_ascii=False, separators=(",", ":"))}
    for name in ("description", "og_title", "og_description", "og_image", "og_type",
                 "og_site_name", "lang"):
        value = getattr(content, name)
        if value:
            cells[name] = value
    return cells


def near_duplicate_row(found: NearDuplicate) -> Row:
    """The parse cells that record a near duplicate on its URL's row."""
    return Row(row_key(found.url), {PARSE_FAMILY: {
        "near_duplicate_of": found.original, "near_similarity": f"{found.similarity:.3f}"}},
        found.at)


def unstored_result_row(result: FetchResult) -> Row:
    """The row of a fetch whose body is not stored (error, non-HTML, non-2xx, redirect)."""
    cells: Cells = {FETCH_FAMILY: fetch_cells(result),
                    SCHEDULE_FAMILY: _fetch_schedule_cells(result)}
    return Row(row_key(result.request.url), cells, result.fetched_at)


def outcome_row(outcome: UrlOutcome) -> Row:
    """The row of a frontier decision: accepted (queued), robots-blocked, overflow, error.

    ``f:detail`` is always written (empty for none) so a later outcome never shows an earlier
    outcome's detail.
    """
    f = {"outcome": outcome.outcome, "outcome_at": iso(outcome.at), "detail": outcome.detail}
    if outcome.outcome == "error":
        f["error"] = outcome.detail.split(":", 1)[0]
        f["error_detail"] = outcome.detail
    s = _schedule_cells(outcome.request, outcome.host)
    if outcome.outcome == "queued":
        s["first_seen"] = iso(outcome.at)
    return Row(row_key(outcome.request.url), {FETCH_FAMILY: f, SCHEDULE_FAMILY: s}, outcome.at)


def host_row(stats: HostStats) -> Row:
    """The hosts-table row of a host: its counters and politeness state."""
    cells = {}
    for field in dataclasses.fields(stats):
        value = getattr(stats, field.name)
        if field.name in ("updated_at", "next_recrawl_at") and value is not None:
            value = iso(value)
        elif value is None:
            value = ""
        elif isinstance(value, bool):
            value = "1" if value else "0"
        cells[field.name] = str(value)
    return Row(stats.host, {HOST_FAMILY: cells}, stats.updated_at)


def dead_letter_row(letter: DeadLetter) -> Row:
    """A dead-letter row, keyed by stage, time and payload hash (re-writes are idempotent)."""
    digest = hashlib.sha1(letter.payload).hexdigest()[:16]
    key = f"{letter.stage}#{int(letter.at * 1e6):020d}#{digest}"
    payload = letter.payload[:MAX_DEAD_LETTER_PAYLOAD].decode("utf-8", "replace")
    return Row(key, {DEADLETTER_FAMILY: {"stage": letter.stage, "reason": letter.reason,
                                         "payload": payload, "at": iso(letter.at)}}, letter.at)


# -- reading rows back (the frontier's rebuild and its leases' checks) --------------------------


def url_record(key: str, cells: Cells) -> UrlRecord | None:
    """What a webtable row says about its URL (None for a key that is not a URL's row)."""
    try:
        url = url_from_row_key(key)
    except InvalidUrl:
        return None
    f, s = cells.get(FETCH_FAMILY, {}), cells.get(SCHEDULE_FAMILY, {})
    length, http_status = _number(f.get("length")), _number(f.get("status"))
    return UrlRecord(url=url, status=f.get("outcome"), key=s.get("host"),
                     accepted="first_seen" in s, fetched_at=from_iso(f.get("fetched_at")),
                     next_fetch_at=from_iso(s.get("next_fetch")),
                     interval=_number(s.get("recrawl_interval")), checksum=f.get("checksum"),
                     etag=f.get("etag"), last_modified=f.get("last_modified"),
                     length=int(length) if length else 0,
                     http_status=int(http_status) if http_status else None)


ROBOTS_COLUMNS = ("robots_mode", "robots_http_status", "robots_fetched_at", "robots_error",
                  "robots_text")


def robots_host_row(key: str, rules: RobotsRules, at: float) -> Row:
    """The hosts-table cells that save a key's robots.txt verdict, read back by a rebuild."""
    return Row(key, {HOST_FAMILY: {
        "robots_mode": rules.mode, "robots_http_status": "" if rules.status is None
        else str(rules.status), "robots_fetched_at": repr(rules.fetched_at),
        "robots_error": rules.error, "robots_text": rules.text}}, at)


def robots_from_host_cells(cells: dict[str, str]) -> RobotsRules | None:
    """The verdict :func:`robots_host_row` saved, or None without one (or a damaged one)."""
    mode = cells.get("robots_mode")
    fetched = _number(cells.get("robots_fetched_at"))
    if mode not in ROBOTS_MODES or fetched is None:
        return None
    status = cells.get("robots_http_status", "")
    return RobotsRules(mode, cells.get("robots_text", ""), int(status) if status.isdigit()
                       else None, fetched, cells.get("robots_error", ""))


def pending_host_row(key: str, pending: bool, at: float) -> Row:
    """The hosts-table cell saying whether a key has work pending (a new job wakes it)."""
    return Row(key, {HOST_FAMILY: {PENDING_COLUMN: "1" if pending else "0"}}, at)



URL_RULES_COLUMN = "url_rules"


def url_rules_host_row(key: str, rules: list[str], at: float) -> Row:
    """The hosts-table cell with the DUST rules a key adopted (``transforms.core.dust``), read
    back by a rebuild."""
    return Row(key, {HOST_FAMILY: {URL_RULES_COLUMN: json.dumps(rules)}}, at)


def url_rules_from_host_cells(cells: dict[str, str]) -> tuple[str, ...]:
    """The rules :func:`url_rules_host_row` saved (none for a missing or damaged cell)."""
    try:
        rules = json.loads(cells.get(URL_RULES_COLUMN) or "[]")
    except ValueError:
        return ()
    return tuple(r for r in rules if isinstance(r, str)) if isinstance(rules, list) else ()
