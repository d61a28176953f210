"""Drives one key's frontier the way ``transforms.host_frontier`` does, without Beam: real state
cells (``FrontierCells`` over in-memory cells, so every step goes through the versioned
formats), a real ``MemoryFrontierStore``, reads run at once, leases answered by the test.

    driver = FrontierDriver(config, "site.example")
    driver.element([CrawlRequest(...)], now=0.0)   # -> Effects; the rebuild read is done
    driver.timer(0.1)                              # collects it, starts the robots lease
    driver.answer_robots(b"User-agent: *\\n...")  # the robots lease's outcome
    driver.timer(0.2)                              # harvests it, starts a lease
    driver.answer({url: 200})                      # that lease's outcome (rows checked first)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from transforms.core.digests import with_digest
from transforms.core.extraction import extract
from transforms.core.records import AckToken, CrawlRequest, FetchResult, UrlRule
from transforms.formats.batch_rows import outcome_rows
from transforms.formats.row_writes import fetch_write
from transforms.frontier.cells import FrontierCells, MemoryBag, MemoryCell, SeenCache
from transforms.frontier.context import Effects, FrontierConfig, IoRequest
from transforms.frontier.hostcore import HostCore
from transforms.frontier.leases import Lease, LeaseOutcome, RobotsResponse, plan_lease
from transforms.frontier.state import JOB_REBUILD, HostState, decode_host_state
from transforms.frontier.store import BundleWork
from transforms.stores.memory import MemoryFrontierStore


class FrontierDriver:
    """One key, its cells, the store, and the jobs in flight (see the module docstring)."""

    def __init__(self, config: FrontierConfig, key: str,
                 store: MemoryFrontierStore | None = None, hold_reads: bool = False) -> None:
        """With ``hold_reads``, a read the frontier starts waits for ``run_reads`` (a read
        that is slow while the key goes on), else it runs when its bundle ends."""
        self.config, self.key = config, key
        self.hold_reads = hold_reads
        self.held_reads: list[tuple[str, Any]] = []
        self.read_results: dict[str, Any] = {}
        self.now = 0.0
        self.store = store if store is not None else MemoryFrontierStore()
        self.values = {name: MemoryCell() for name in ("host", "robots", "head", "seen")}
        self.bags = {name: MemoryBag() for name in ("arrivals", "inbox", "seen_frozen")}
        self.cache = SeenCache()
        self.jobs: dict[str, Any] = {}
        self.leases: list[Lease] = []
        self.acks: list[AckToken] = []
        self.timer_at: float | None = None
        self.effects: list[Effects] = []

    # -- steps -------------------------------------------------------------------------------

    def cells(self) -> FrontierCells:
        v, b = self.values, self.bags
        return FrontierCells(v["host"], v["robots"], v["head"], b["arrivals"], b["inbox"],
                             v["seen"], b["seen_frozen"], cache=self.cache)

    def element(self, requests: Sequence[CrawlRequest], now: float,
                tokens: Sequence[AckToken] = (),
                rules: Sequence[tuple[UrlRule, str]] = (),
                discovered_at: float | None = None) -> Effects:
        self.now = max(self.now, now)
        cells = self.cells()
        core = cells.core(self.config, self.key)
        fx = core.on_element(requests, tokens, now, rules, discovered_at)
        return self._carry_out(core, fx, cells, now)

    def timer(self, now: float, allowed: bool = True) -> Effects:
        """The key's timer fires; ``allowed`` False: no new lease may start (the process
        stops, or its backlog is full)."""
        self.now = max(self.now, now)
        cells = self.cells()
        core = cells.core(self.config, self.key)
        return self._carry_out(core, core.on_timer(self.poll, now, allowed), cells, now)

    def settle(self, now: float, firings: int = 5) -> None:
        """Fires the timer until no read is in flight (a rebuild takes a firing per page)."""
        for _ in range(firings):
            if self.state is None or self.state.io is None:
                return
            self.timer(now)

    def poll(self, job_id: str) -> tuple[str, Any]:
        if job_id in self.jobs:
            return "done", self.jobs.pop(job_id)
        if any(lease.lease_id == job_id for lease in self.leases) or any(
                held == job_id for held, _ in self.held_reads) or job_id in self.read_results:
            return "running", None
        return "unknown", None

    def _carry_out(self, core: HostCore, fx: Effects, cells: FrontierCells,
                   now: float) -> Effects:
        bundle = BundleWork(fx.writes, tokens=list(fx.tokens))
        bundle.leases.extend(fx.leases)
        if fx.io is not None:
            io = fx.io
            # A read sees the tables as of when it runs (held reads: the driver's latest time).
            bundle.reads.append((io.job_id, lambda: self._read(io, max(now, self.now))))
        if fx.wakes and core.state.timer_at is not None:
            self.timer_at = core.state.timer_at
        cells.write(self.key, core, fx)
        # What the DoFn does at the end of the bundle: its writes, then its reads.
        self.acks.extend(bundle.flush(self.store.write, self.leases.append, self._start_read))
        self.effects.append(fx)
        return fx

    def _start_read(self, job_id: str, read: Any) -> None:
        if self.hold_reads:
            self.held_reads.append((job_id, read))
        else:
            self.jobs[job_id] = read()

    def run_reads(self, deliver: bool = True) -> int:
        """Runs the reads held so far (``hold_reads``); returns how many. With ``deliver``
        False their results stay out of the key's sight until ``deliver_reads`` (a read that
        took its snapshot of the tables, then was slow to come back)."""
        held, self.held_reads = self.held_reads, []
        for job_id, read in held:
            self.read_results[job_id] = read()
        if deliver:
            self.deliver_reads()
        return len(held)

    def deliver_reads(self) -> None:
        self.jobs.update(self.read_results)
        self.read_results.clear()

    def _read(self, io: IoRequest, now: float) -> Any:
        cfg = self.config
        if io.kind == JOB_REBUILD:
            return self.store.rebuild_page(self.key, io.after, cfg.rebuild_page, io.first,
                                           cfg.head_size, now)
        return self.store.index_page(self.key, cfg.refill_size, io.skip, now,
                                     cfg.refill_size + cfg.head_size + cfg.max_lease_urls,
                                     io.incarnation, io.after)

    # -- answering leases ------------------------------------------------------------------------

    @property
    def lease(self) -> Lease:
        """The last lease the key started."""
        return self.leases[-1]

    @property
    def current_lease(self) -> Lease:
        """The lease out that is not chained after another (the one fetching first); the last
        started when the key has none out."""
        state = self.state
        current = state.lease if state is not None else None
        if current is not None:
            for lease in self.leases:
                if lease.lease_id == current.lease_id:
                    return lease
        return self.leases[-1]

    def answer_robots(self, body: bytes | None, status: int | None = 200, at: float = 0.0,
                      encoding: str | None = None) -> LeaseOutcome:
        lease = self.lease
        assert lease.robots_url is not None, lease
        outcome = LeaseOutcome(lease.lease_id, (), (), RobotsResponse(
            status, body, at, content_encoding=encoding), (at,), at, at)
        self.jobs[lease.lease_id] = outcome
        return outcome

    def answer(self, statuses: Mapping[str, int | None] | None = None, at: float = 0.0,
               unfinished: Sequence[str] = (), write_rows: bool = True,
               headers: Mapping[str, tuple[tuple[str, str], ...]] | None = None,
               bodies: Mapping[str, bytes] | None = None,
               copies: tuple[tuple[str, str], ...] = (), lease: Lease | None = None,
               cancelled: str = "") -> LeaseOutcome:
        """The outcome of the last lease, as ``run_lease`` builds it: its URLs' rows are read
        and checked (``plan_lease``) first; each fetched URL answers ``statuses[url]``
        (default 200; None: a connection error), with ``bodies[url]`` as an HTML page (no
        body by default), each extracted as the fetch service does; ``copies``: the pages whose
        content the crawl saw under another URL, with that URL. With ``write_rows`` the final
        results' rows are written as the row sink would (and their index entries deleted).
        ``lease``: which
        lease (default: the one out first, ``current_lease``); ``cancelled``: a chained lease
        that fetched nothing (every request unfinished), as the service answers it."""
        lease = lease or self.current_lease
        if cancelled:
            outcome = LeaseOutcome(lease.lease_id, (), lease.requests, None, (), None, at,
                                   cancelled=cancelled)
            self.jobs[lease.lease_id] = outcome
            return outcome
        statuses, bodies = statuses or {}, bodies or {}
        records = self.store.url_records([r.url for r in lease.requests])
        plan = plan_lease(lease.requests, records, at)
        results = []
        left = []
        for request in plan.fetch:
            if request.url in unfinished:
                left.append(request)
                continue
            status = statuses.get(request.url, 200)
            body = bodies.get(request.url)
            results.append(with_digest(FetchResult(
                request, lease.host, at, request.url, status=status,
                content_type="text/html" if body is not None else None,
                error=None if status is not None else "connection",
                headers=(headers or {}).get(request.url, ()), body=body,
                content_length=len(body or b""),
                outcome="fetched" if status == 200 else "error" if status is None
                else "not_stored")))
        cfg = self.config
        extracted = tuple((r.request.url, extract(r, cfg.robots_agent, cfg.fetch.max_body_bytes,
                                                  cfg.scope)) for r in results)
        outcome = LeaseOutcome(lease.lease_id, tuple(results), tuple(left), None,
                               tuple(at for _ in results), at if results else None, at,
                               plan.skipped, plan.fresh, tuple(records.items()),
                               deferred=plan.deferred, extracted=extracted, copies=copies)
        self.jobs[lease.lease_id] = outcome
        self._write_rows = write_rows
        return outcome

    def sink(self, fx: Effects) -> None:
        """Writes the results of a harvest as the webtable sink does: rows, then the index."""
        from transforms.frontier.store import StoreBatch

        writes = [fetch_write(r) for r in fx.fetches]
        events = [e for w in writes for e in w.events]
        self.store.write(StoreBatch(rows=[w.row for w in writes],
                                    batch_rows=outcome_rows(events),
                                    index_deletes=[w.index_delete for w in writes
                                                   if w.index_delete]))

    # -- looking at it ---------------------------------------------------------------------------

    @property
    def state(self) -> HostState | None:
        raw = self.values["host"].value
        return decode_host_state(raw) if raw else None

    def index(self) -> list[str]:
        return self.store.index_urls(self.key)


def fresh(config: FrontierConfig, key: str, store: MemoryFrontierStore | None = None
          ) -> FrontierDriver:
    """A driver for a key that starts empty (it rebuilds from ``store`` first)."""
    return FrontierDriver(config, key, store)


__all__ = ["FrontierDriver", "HostCore", "fresh"]
