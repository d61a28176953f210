"""Where a crawl stands, read from its tables on any runner: ``crawler status``, and the signal
the local driver stops on.

A crawl is *quiescent* when nothing is queued, nothing is in flight, no key is rebuilding, and
no recrawl is due within a horizon. Two views of it, from the same tables:

* per key, from the hosts table (:func:`host_busy`): cheap, read every second by the local
  driver (``pipeline.local.driver``);
* per URL, from the webtable (:func:`scan_webtable`): URLs by status, the oldest ``queued``
  URL, recrawls due within the horizon; one scan of the ``f:outcome``, ``s:first_seen`` and
  ``s:next_fetch`` cells, for ``crawler status``.

The statuses are those of ``transforms.core.status``; batches and exports read the same ones.
A client batch still ``running`` in the batches table (``m:state``, which the pipeline's
``TrackBatches`` sets to ``done`` on any runner) also keeps the crawl from being quiescent.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from transforms.core import status
from transforms.core.batches import STATE_RUNNING
from transforms.formats.rows import from_iso, iso
from transforms.formats.schema import (
    BATCH_META_FAMILY,
    BATCHES_TABLE,
    FETCH_FAMILY,
    HOST_FAMILY,
    SCHEDULE_FAMILY,
)


def _number(values: Mapping[str, str], name: str) -> float:
    try:
        return float(values.get(name) or 0)
    except ValueError:
        return 0.0


def host_busy(values: Mapping[str, str], now: float, horizon: float) -> bool:
    """Whether a key (its hosts-table cells) has work now or due within ``horizon`` seconds:
    URLs queued or in a lease, a rebuild under way, or its next recrawl soon."""
    if _number(values, "queued") > 0 or values.get("lease_active") == "1":
        return True
    if values.get("phase", "ready") != "ready":
        return True
    due = from_iso(values.get("next_recrawl_at"))
    return due is not None and due <= now + horizon


@dataclass
class WebtableSummary:
    """What one scan of the webtable says."""

    urls: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    oldest_queued_url: str | None = None
    oldest_queued_at: float | None = None
    recrawls_due: int = 0  # terminal URLs whose next fetch falls within the horizon


def scan_webtable(rows: Iterable[tuple[str, Mapping[str, Mapping[str, str]]]], now: float,
                  horizon: float) -> WebtableSummary:
    """Summarizes webtable rows (url, cells) as :class:`WebtableSummary`."""
    summary = WebtableSummary()
    counts: Counter[str] = Counter()
    for url, cells in rows:
        outcome = cells.get(FETCH_FAMILY, {}).get("outcome", "none")
        schedule = cells.get(SCHEDULE_FAMILY, {})
        summary.urls += 1
        counts[outcome] += 1
        if outcome in status.PENDING:
            since = from_iso(schedule.get("first_seen"))
            if since is not None and (summary.oldest_queued_at is None
                                      or since < summary.oldest_queued_at):
                summary.oldest_queued_at, summary.oldest_queued_url = since, url
        elif status.is_terminal(outcome):
            due = from_iso(schedule.get("next_fetch"))
            if due is not None and due <= now + horizon:
                summary.recrawls_due += 1
    summary.by_status = dict(sorted(counts.items()))
    return summary


@dataclass
class CrawlStatus:
    """``crawler status``: the webtable's summary and the keys' states."""

    at: float
    horizon: float
    webtable: WebtableSummary
    hosts: int
    hosts_active: int  # a lease out, or URLs queued
    hosts_waiting: int  # pending work later (a scheduled recrawl, a back-off), none now
    hosts_rebuilding: int
    quiescent: bool
    batches_running: int = 0

    def as_dict(self) -> dict[str, object]:
        doc = asdict(self)
        doc["at"] = iso(self.at)
        if self.webtable.oldest_queued_at is not None:
            doc["webtable"]["oldest_queued_at"] = iso(self.webtable.oldest_queued_at)
        return doc


def crawl_status(webtable: WebtableSummary, hosts: Iterable[Mapping[str, str]], now: float,
                 horizon: float, batches_running: int = 0) -> CrawlStatus:
    """Combines the two views (see the module docstring)."""
    active = waiting = rebuilding = total = busy = 0
    for values in hosts:
        total += 1
        if values.get("phase", "ready") != "ready":
            rebuilding += 1
        elif _number(values, "queued") > 0 or values.get("lease_active") == "1":
            active += 1
        elif values.get("pending") == "1":
            waiting += 1
        busy += int(host_busy(values, now, horizon))
    pending_urls = sum(n for s, n in webtable.by_status.items() if s in status.PENDING)
    quiescent = (busy == 0 and pending_urls == 0 and webtable.recrawls_due == 0
                 and batches_running == 0)
    return CrawlStatus(now, horizon, webtable, total, active, waiting, rebuilding, quiescent,
                       batches_running)


def format_status(s: CrawlStatus) -> str:
    w = s.webtable
    lines = [f"crawl status at {iso(s.at)} (horizon {s.horizon:.0f} s)", "",
             f"  URLs              {w.urls}"]
    for name, n in w.by_status.items():
        lines.append(f"    {name:<16}{n:>8}")
    oldest = ("-" if w.oldest_queued_url is None else
              f"{w.oldest_queued_url} (queued {iso(w.oldest_queued_at or 0.0)}, "
              f"{s.at - (w.oldest_queued_at or s.at):.0f} s ago)")
    lines += [f"  oldest queued     {oldest}",
              f"  recrawls due      {w.recrawls_due} within {s.horizon:.0f} s",
              f"  hosts             {s.hosts} ({s.hosts_active} active, {s.hosts_waiting} "
              f"waiting, {s.hosts_rebuilding} rebuilding)",
              f"  batches running   {s.batches_running}",
              f"  quiescent         {'yes' if s.quiescent else 'no'}"]
    return "\n".join(lines)


def running_batches(instance: Any, table: str = BATCHES_TABLE) -> int:
    """How many batches the batches table says are ``running`` (one scan of ``m:state``)."""
    from google.cloud.bigtable import row_filters

    only_state = row_filters.RowFilterChain([
        row_filters.FamilyNameRegexFilter(f"^{BATCH_META_FAMILY}$"),
        row_filters.ColumnQualifierRegexFilter(b"^state$"),
        row_filters.CellsColumnLimitFilter(1)])
    count = 0
    for row in instance.table(table).read_rows(filter_=only_state):
        values = row.cells.get(BATCH_META_FAMILY, {}).get(b"state", [])
        count += int(bool(values) and values[0].value == STATE_RUNNING.encode())
    return count


def read_status(project: str, instance: str, webtable: str, hosts_table: str,
                horizon: float, now: float | None = None,
                batches_table: str = BATCHES_TABLE) -> CrawlStatus:
    """Reads both tables (the Bigtable emulator when ``BIGTABLE_EMULATOR_HOST`` is set)."""
    from google.cloud import bigtable
    from google.cloud.bigtable import row_filters

    from transforms.formats.rowkeys import url_from_row_key

    now = time.time() if now is None else now
    instance_ = bigtable.Client(project=project, admin=False).instance(instance)
    wanted = row_filters.RowFilterChain([
        row_filters.ColumnQualifierRegexFilter(b"^(outcome|first_seen|next_fetch)$"),
        row_filters.CellsColumnLimitFilter(1)])

    def decoded(rows):
        for row in rows:
            yield url_from_row_key(row.row_key.decode()), {
                family: {c.decode(): v[0].value.decode("utf-8", "replace")
                         for c, v in columns.items()}
                for family, columns in row.cells.items()}

    summary = scan_webtable(decoded(instance_.table(webtable).read_rows(filter_=wanted)), now,
                            horizon)
    hosts = [{c.decode(): v[0].value.decode("utf-8", "replace")
              for c, v in row.cells.get(HOST_FAMILY, {}).items()}
             for row in instance_.table(hosts_table).read_rows(
                 filter_=row_filters.CellsColumnLimitFilter(1))]
    return crawl_status(summary, hosts, now, horizon, running_batches(instance_, batches_table))


def status_json(s: CrawlStatus) -> str:
    return json.dumps(s.as_dict(), indent=2, sort_keys=True)
