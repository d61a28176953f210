"""Running leases: the protocol registry and ``FetchService``, the per-worker asyncio loop.

A *lease* is a short, strictly sequential run of requests to one host
(``transforms.core.schedule``).
``FetchService`` runs leases on one asyncio event loop in a background thread per worker process,
so a worker has many hosts in flight while the runner's threads never block on the network: the
frontier submits a lease and later polls for its outcome from a timer callback.

Fetchers are chosen by URL scheme through ``PROTOCOL_FETCHERS``: ``http``/``https``
(``transforms.fetchers.http``, aiohttp) and ``ftp`` (``transforms.fetchers.ftp``, aioftp). Adding a
protocol is one module with an ``async (session, request, gate, config) -> FetchResult`` function
and one line here. Every fetcher takes its request slots from the lease's ``RequestGate``, so
politeness holds whatever the protocol.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp

from transforms.core.content import ACCEPT_ENCODING
from transforms.core.digests import with_digest
from transforms.core.duplicates import content_key
from transforms.core.extraction import Extraction
from transforms.core.records import (
    OUTCOME_ERROR,
    CrawlRequest,
    FetchResult,
    ParsedPage,
    UrlRecord,
)
from transforms.core.retry import is_transient
from transforms.fetchers.ftp import fetch_ftp_request
from transforms.fetchers.http import LeaseExpired, RequestGate, fetch_request, fetch_robots
from transforms.fetchers.ssrf import GuardedResolver, guarded_socket_factory
from transforms.frontier.leases import (
    FetchConfig,
    Lease,
    LeaseOutcome,
    LeasePlan,
    RobotsResponse,
    plan_lease,
)

_LOG = logging.getLogger(__name__)
Verifier = Callable[[Sequence[str]], dict[str, UrlRecord]]
Extractor = Callable[[FetchResult], Extraction]
CopyChecker = Callable[[Sequence[tuple[str, str]]], tuple[tuple[str, str], ...]]
Fetcher = Callable[[aiohttp.ClientSession, CrawlRequest, RequestGate, FetchConfig],
                   Awaitable[FetchResult]]
PROTOCOL_FETCHERS: dict[str, Fetcher] = {
    "http": fetch_request,
    "https": fetch_request,
    "ftp": fetch_ftp_request,
}


def _unsupported(request: CrawlRequest, host: str) -> FetchResult:
    return FetchResult(request=request, host=host, fetched_at=time.time(), final_url=request.url,
                       error="unsupported_scheme", error_detail=request.url.split(":", 1)[0],
                       outcome=OUTCOME_ERROR)


async def run_lease(session: aiohttp.ClientSession, lease: Lease, config: FetchConfig,
                    verify: Verifier | None = None,
                    executor: concurrent.futures.Executor | None = None,
                    extract: Extractor | None = None,
                    copies: CopyChecker | None = None,
                    after: concurrent.futures.Future[LeaseOutcome] | None = None,
                    on_result: Callable[[], None] | None = None) -> LeaseOutcome:
    """Runs one lease to completion, to its deadline, or to its first transient failure, and
    reports what happened; requests not started come back as ``unfinished``.

    With ``verify`` (the frontier's reader of webtable rows), the lease first reads its URLs'
    rows and fetches only what ``transforms.frontier.leases.plan_lease`` says: a URL already
    terminal is not fetched again, a revisit is decided from its row. If the rows cannot be read, no
    URL is fetched and all come back unfinished.

    With ``extract``, each final result is extracted on ``executor`` as soon as it arrives,
    while the lease goes on to its next request; with ``copies``, the lease's parsed pages are
    then looked up by content (``transforms.frontier.copies``). Both are in the outcome, so the
    frontier admits a page's own links when it harvests the lease. An extraction that raises
    is left out (the result is extracted downstream, where the error shows).

    A lease chained after another (``Lease.after``; ``after`` is that lease's future) waits
    for it, then starts ``delay`` after its last request ended; if it stopped early (a
    transient failure, its deadline, rows it could not read) or cannot be found, this one
    fetches nothing and returns every request unfinished, ``cancelled`` saying why.
    """
    gate = RequestGate(lease, config.min_request_window)
    if lease.after is not None:
        previous = await _predecessor(after)
        if previous is None or previous.stopped_early:
            why = "the lease before it is unknown" if previous is None else \
                "the lease before it stopped early"
            return LeaseOutcome(lease.lease_id, (), tuple(lease.requests), None, (), None,
                                time.time(), cancelled=why)
        gate.last_end = previous.last_end
    results: list[FetchResult] = []
    robots: RobotsResponse | None = None
    pending = list(lease.requests)
    plan: LeasePlan | None = None
    records: dict[str, UrlRecord] = {}
    loop = asyncio.get_running_loop()
    extracting: list[tuple[str, asyncio.Future[Extraction]]] = []
    if verify is not None and pending:
        try:
            records = await loop.run_in_executor(executor, verify, [r.url for r in pending])
        except Exception as exc:  # the table is unreachable: try the URLs again later
            return LeaseOutcome(lease.lease_id, (), tuple(pending), None, (), None, time.time(),
                                verify_error=f"{type(exc).__name__}: {exc}"[:300])
        plan = plan_lease(pending, records, time.time())
        pending = list(plan.fetch)
    try:
        if lease.robots_url is not None:
            robots = await fetch_robots(session, lease.robots_url, gate, config)
        while pending:
            fetcher = PROTOCOL_FETCHERS.get(pending[0].url.split(":", 1)[0])
            if fetcher is None:
                results.append(_unsupported(pending.pop(0), lease.host))
                if on_result is not None:
                    on_result()
                continue
            result = with_digest(await fetcher(session, pending[0], gate, config))
            results.append(result)
            if on_result is not None:  # the service counts what it holds (``fetched_held``)
                on_result()
            pending.pop(0)
            if is_transient(result.status, result.error):
                # The host said "later" (or failed to answer): the rest of the lease goes back
                # to the queue and waits for the host's back-off instead of arriving at the
                # normal pace right after a 429, a 503 or a timeout.
                break
            if extract is not None:
                extracting.append((result.request.url,
                                   loop.run_in_executor(executor, extract, result)))
    except LeaseExpired:
        pass
    extracted, copied = await _extractions(extracting, copies, loop, executor)
    return LeaseOutcome(lease.lease_id, tuple(results), tuple(pending), robots,
                        tuple(gate.starts), gate.last_end, time.time(),
                        skipped=plan.skipped if plan else (), fresh=plan.fresh if plan else (),
                        records=tuple(records.items()),
                        deferred=plan.deferred if plan else (),
                        extracted=extracted, copies=copied)


async def _predecessor(after: concurrent.futures.Future[LeaseOutcome] | None
                       ) -> LeaseOutcome | None:
    if after is None:
        return None
    try:
        return await asyncio.wrap_future(after)
    except Exception:  # it failed: nothing can be said of its last request, so no chaining
        return None


async def _extractions(extracting: list[tuple[str, asyncio.Future[Extraction]]],
                       copies: CopyChecker | None, loop: asyncio.AbstractEventLoop,
                       executor: concurrent.futures.Executor | None
                       ) -> tuple[tuple[tuple[str, Extraction], ...], tuple[tuple[str, str], ...]]:
    """The lease's extractions once done, and the URLs of its pages that are copies."""
    done: list[tuple[str, Extraction]] = []
    for url, future in extracting:
        try:
            done.append((url, await future))
        except Exception as exc:  # extracted again downstream, where it shows
            _LOG.warning("extraction failed next to the fetch", exc_info=exc,
                         extra={"url": url})
    pages = [(url, content_key(e.discovered.item)) for url, e in done
             if isinstance(e.discovered.item, ParsedPage)]
    if copies is None or not pages:
        return tuple(done), ()
    return tuple(done), await loop.run_in_executor(executor, copies, pages)


class FetchService:
    """One asyncio loop and aiohttp session in a daemon thread, shared by a worker's DoFns, and
    a few threads for the blocking table reads the frontier runs off the runner's thread (the
    rows a lease checks, a key's rebuild and refill pages).

    Memory: a lease's outcome (its pages' bodies among it) is held from the lease's end until
    its key collects it (``poll``), and forgotten then. An outcome no key collects within
    ``UNCOLLECTED_SECONDS`` (its key moved to another worker, or its state was reset) is
    dropped, so the service holds at most the leases of the last ``UNCOLLECTED_SECONDS``.
    ``fetched_held`` counts the results it holds, for the local runner's backpressure
    (``transforms.frontier.drain``).
    """

    IO_THREADS = 4
    UNCOLLECTED_SECONDS = 900.0
    SWEEP_SECONDS = 30.0

    def __init__(self, config: FetchConfig) -> None:
        self.config = config
        self._loop = asyncio.new_event_loop()
        self._io = concurrent.futures.ThreadPoolExecutor(self.IO_THREADS,
                                                         thread_name_prefix="crawler-io")
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._done_at: dict[str, float] = {}
        self._held = 0  # results fetched by leases whose outcome no key has collected yet
        self._swept = time.monotonic()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop.run_forever, name="crawler-fetch",
                                        daemon=True)
        self._thread.start()
        self._session = asyncio.run_coroutine_threadsafe(self._open(), self._loop).result()

    async def _open(self) -> aiohttp.ClientSession:
        allow = self.config.allow_private_networks
        connector = aiohttp.TCPConnector(
            limit=self.config.max_connections, limit_per_host=1, ttl_dns_cache=300,
            enable_cleanup_closed=True,
            resolver=GuardedResolver(allow_private_networks=allow),
            socket_factory=guarded_socket_factory(allow_private_networks=allow))
        return aiohttp.ClientSession(
            connector=connector, auto_decompress=False,
            headers={"User-Agent": self.config.user_agent,
                     "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5",
                     "Accept-Encoding": ACCEPT_ENCODING})

    def submit(self, lease: Lease, verify: Verifier | None = None,
               extract: Extractor | None = None, copies: CopyChecker | None = None) -> None:
        """Starts a lease; returns at once. ``verify`` reads the URLs' rows first; ``extract``
        and ``copies``: see :func:`run_lease`; a lease chained after another
        (``Lease.after``) runs once that one is done."""
        with self._lock:
            after = self._futures.get(lease.after) if lease.after is not None else None
        future = asyncio.run_coroutine_threadsafe(
            run_lease(self._session, lease, self.config, verify, self._io, extract, copies,
                      after, self._result_fetched),
            self._loop)
        self._track(lease.lease_id, future)

    def run(self, job_id: str, read: Callable[[], Any]) -> None:
        """Starts a blocking read (a rebuild or refill page) on the service's threads."""
        self._track(job_id, self._io.submit(read))

    def _track(self, job_id: str, future: concurrent.futures.Future[Any]) -> None:
        now = time.monotonic()
        with self._lock:
            self._futures[job_id] = future
            if now - self._swept >= self.SWEEP_SECONDS:
                self._swept = now
                stale = [j for j, at in self._done_at.items()
                         if now - at > self.UNCOLLECTED_SECONDS]
                for j in stale:
                    dropped = self._futures.pop(j, None)
                    del self._done_at[j]
                    self._release(_outcome_of(dropped))
                if stale:
                    _LOG.warning("fetch outcomes never collected were dropped",
                                 extra={"count": len(stale)})
        future.add_done_callback(lambda _: self._finished(job_id))

    def _result_fetched(self) -> None:
        with self._lock:
            self._held += 1

    def _release(self, outcome: Any) -> None:
        """Called with the lock held: a lease outcome leaves the service."""
        if isinstance(outcome, LeaseOutcome):
            self._held -= len(outcome.results)

    @property
    def fetched_held(self) -> int:
        """Fetch results this service holds: fetched by a lease, not collected by a key yet."""
        with self._lock:
            return self._held

    def _finished(self, job_id: str) -> None:
        with self._lock:
            if job_id in self._futures:
                self._done_at[job_id] = time.monotonic()

    def poll(self, job_id: str) -> tuple[str, Any]:
        """Returns ("done", result) once, ("running", None), or ("unknown", None).

        "unknown" means this process never ran the job (e.g. the key moved to another worker).
        A read that raised is reported "unknown" too (and logged), so the frontier asks again.
        """
        with self._lock:
            future = self._futures.get(job_id)
            if future is None:
                return "unknown", None
            if not future.done():
                return "running", None
            del self._futures[job_id]
            self._done_at.pop(job_id, None)
            self._release(_outcome_of(future))
        try:
            return "done", future.result()
        except Exception as exc:
            _LOG.warning("frontier read failed; it is asked again", exc_info=exc,
                         extra={"job": job_id})
            return "unknown", None

    @property
    def in_flight(self) -> int:
        """Leases and reads not finished yet."""
        with self._lock:
            return sum(1 for f in self._futures.values() if not f.done())

    @property
    def outstanding(self) -> int:
        """Leases and reads not finished, or finished and not collected by their key yet."""
        with self._lock:
            return len(self._futures)


def _outcome_of(future: concurrent.futures.Future[Any] | None) -> Any:
    """A finished future's result, or None when it failed, was cancelled or is missing."""
    if future is None or future.cancelled() or future.exception() is not None:
        return None
    return future.result()


_SERVICES: dict[FetchConfig, FetchService] = {}
_SERVICES_LOCK = threading.Lock()
_PAUSED = threading.Event()


def pause_leases() -> None:
    """Stops new leases in this process (a local run about to stop: what is fetched from now
    on is what it can still write, so a new job finds the tables up to date)."""
    _PAUSED.set()


def resume_leases() -> None:
    _PAUSED.clear()


def leases_paused() -> bool:
    return _PAUSED.is_set()


def leases_in_flight() -> int:
    """Leases and reads not finished yet, over every service of the process."""
    with _SERVICES_LOCK:
        services = list(_SERVICES.values())
    return sum(s.in_flight for s in services)


def fetched_held() -> int:
    """Fetch results the process's services hold (see ``FetchService.fetched_held``)."""
    with _SERVICES_LOCK:
        services = list(_SERVICES.values())
    return sum(s.fetched_held for s in services)


def leases_outstanding() -> int:
    """Leases and reads whose outcome no key has collected yet, over the process."""
    with _SERVICES_LOCK:
        services = list(_SERVICES.values())
    return sum(s.outstanding for s in services)


def shared_fetch_service(config: FetchConfig) -> FetchService:
    """The process-wide service for ``config``: every DoFn instance of a worker shares it, so a
    lease submitted by one instance can be collected by another."""
    with _SERVICES_LOCK:
        service = _SERVICES.get(config)
        if service is None:
            service = _SERVICES[config] = FetchService(config)
        return service
