"""The crawl on a local Flink session cluster (a JobManager and a TaskManager, separate JVMs from
PyPI's apache-flink, ``pipeline.local.flink_cluster``), submitted with
``--flink_master=127.0.0.1:PORT`` and run under the local driver; then the same crawl with its
TaskManager SIGKILLed mid-crawl and a new one started.

Asserted from the demo servers' request logs, as in test_crawl_end_to_end.py. After the kill
Flink restores the job from its last completed checkpoint, and the crawl ends with no
disallowed path, one connection per host and gaps of at least the delay. What is fetched again
is bounded by that checkpoint: of the requests made before it, only those of the lease each
host had out at it (``--max_lease_urls``, small here) are made again; requests made after it may
be, and each page is fetched at most twice, once by the dead job and once by the restored one.

Every expected page is fetched: a URL the restored job skips because its row is terminal
already had its links published before that row was written (``transforms.loop``).

About 11 s to start the cluster (the first run also installs Flink, ~256 MB from PyPI, into
``.crawler/flink``), 70 s for the plain crawl and 110 s for the one with the failure: about
3 min 15 s in all.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

import pytest

from pipeline.demo.log import crawlable_paths, politeness_report
from pipeline.demo.site import DemoSite
from pipeline.local.driver import RunSummary
from pipeline.local.flink_cluster import FlinkCluster, start_cluster, stop_cluster
from pipeline.local.flink_dist import FlinkDistError, java_executable
from pipeline.local.flink_submit import active_jobs
from tests.integration.sites import crawl
from transforms.core.policy import DEFAULT_POLICY

pytestmark = pytest.mark.integration

MIN_DELAY = 0.1
CRAWL_DELAY = 0.4
MAX_LEASE_URLS = 4  # small leases make the duplicate bound tight
KILL_AFTER_GETS = 30  # of about 130: robots.txt known everywhere, most pages still queued
GAP_TOLERANCE = 0.03  # server-side clock and socket noise


class ClusterCrawl(NamedTuple):
    site: DemoSite
    summary: RunSummary
    out: str
    job_name: str
    started: float  # when run() was called


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlinkCluster]:
    """A session cluster of the module's own; stopped at the end."""
    try:
        java_executable()
    except FlinkDistError as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    state_dir = tmp_path_factory.mktemp("flink")
    running = start_cluster(state_dir)
    try:
        yield running
    finally:
        stop_cluster(state_dir)


def _crawl(local_stack, cluster: FlinkCluster, extra: list[str],
           during: Callable[[DemoSite, str], None] | None = None) -> ClusterCrawl:
    """Crawls the demo site on ``cluster`` in an isolated topic/subscription/instance
    (``tests.integration.sites.crawl``), with ``during(site, job_name)`` running in a thread
    meanwhile."""
    job_name = f"test-flink-cluster-{uuid.uuid4().hex[:8]}"
    site = DemoSite().start(n_hosts=3, pages_per_host=40, crawl_delay=CRAWL_DELAY)
    drill = threading.Thread(target=during, args=(site, job_name), daemon=True)
    try:
        if during is not None:
            drill.start()
        started = time.time()
        done = crawl(local_stack, site.seed_urls(), [
            f"--min_delay={MIN_DELAY}", "--idle_timeout=8", "--warc_roll_seconds=2",
            "--retry_delay=0.5", "--allow_private_networks", "--runner=FlinkRunner",
            f"--flink_master={cluster.master}", f"--job_name={job_name}", *extra])
        if during is not None:
            drill.join(timeout=5)
    finally:
        site.stop()
    return ClusterCrawl(site, done.summary, done.out, job_name, started)


def _expected(site: DemoSite, host: str) -> set[str]:
    return crawlable_paths(host, site.expected_fetch_paths(host), DEFAULT_POLICY.defaults,
                           time.time())


def _gets(site: DemoSite, host: str) -> list[Any]:
    return [r for r in site.requests(host) if r.method == "GET"]


def _refetched(site: DemoSite, host: str) -> list[str]:
    """Paths requested more than once, less same-host redirect hops (one URL's fetch)."""
    paths = [r.path for r in _gets(site, host)]
    again = {p for p in paths if paths.count(p) > 1}
    hops = set()
    for path in again:
        location = site.response(host, path).location
        target = urlsplit(urljoin(host + path, location)) if location else None
        if target is not None and target.netloc == urlsplit(host).netloc:
            hops.add(target.path)
    return sorted(again - hops)


def _assert_polite(crawl: ClusterCrawl) -> None:
    site, out = crawl.site, crawl.out
    assert crawl.summary.failed is None, out
    assert crawl.summary.reason.startswith("idle"), out
    for host in site.hosts:
        assert not {r.path for r in site.requests(host)} & site.disallowed_paths(host), host
        report = politeness_report(site.requests(host))
        assert report.max_concurrent == 1, host
        delay = max(MIN_DELAY, site.spec(host).crawl_delay or 0.0)
        assert report.min_gap is not None and report.min_gap >= delay - GAP_TOLERANCE, (
            host, report.min_gap, delay)


def _missing(crawl: ClusterCrawl) -> dict[str, set[str]]:
    """Expected paths never requested, by host (empty when the crawl is complete)."""
    site = crawl.site
    missing = {h: _expected(site, h) - {r.path for r in _gets(site, h)} for h in site.hosts}
    return {h: paths for h, paths in missing.items() if paths}


def _print_figures(title: str, figures: dict[str, float]) -> None:
    print(f"\n{title}: " + ", ".join(f"{k} {v:.1f} s" for k, v in figures.items()))


def test_a_crawl_on_the_cluster_fetches_every_page_once_and_the_job_is_cancelled_after(
        local_stack, cluster):
    crawl = _crawl(local_stack, cluster, [])
    _assert_polite(crawl)
    assert not _missing(crawl), crawl.out
    for host in crawl.site.hosts:
        assert politeness_report(crawl.site.requests(host)).duplicates == 0, host
    # The driver cancelled the Flink job (Beam's own cancel leaves it running).
    assert not active_jobs(cluster.master, crawl.job_name)
    job = next(j for j in cluster.jobs() if j["name"] == crawl.job_name)
    assert job["state"] == "CANCELED"
    # It checkpointed into the cluster's persistent directory.
    assert (cluster.checkpoint_dir / job["jid"]).is_dir()
    first_get = min(r.start for h in crawl.site.hosts for r in crawl.site.requests(h))
    _print_figures("submission", {"run() to Flink job start": job["start-time"] / 1000
                                  - crawl.started,
                                  "run() to first request": first_get - crawl.started})


class _Drill:
    """Kills the TaskManager once the servers saw ``KILL_AFTER_GETS`` GETs, starts a new one at
    once, and records what happened (exceptions included: the thread must not fail silently)."""

    def __init__(self, cluster: FlinkCluster) -> None:
        self.cluster = cluster
        self.times: dict[str, float] = {}
        self.gets_at_kill = 0
        self.restored_from = ""
        self.checkpoint_at = 0.0  # when the checkpoint restored from was triggered
        self.restores = 0
        self.error: BaseException | None = None

    def __call__(self, site: DemoSite, job_name: str) -> None:
        try:
            self._run(site, job_name)
        except BaseException as exc:
            self.error = exc

    def _run(self, site: DemoSite, job_name: str) -> None:
        deadline = time.monotonic() + 300
        while sum(len(_gets(site, h)) for h in site.hosts) < KILL_AFTER_GETS:
            assert time.monotonic() < deadline, "the crawl never got going"
            time.sleep(0.05)
        self.gets_at_kill = sum(len(_gets(site, h)) for h in site.hosts)
        (job,) = active_jobs(self.cluster.master, job_name)
        self.times["kill"] = time.time()
        self.cluster.kill_taskmanager()
        self.cluster.start_taskmanager()
        self.times["registered"] = time.time()
        while True:
            assert time.monotonic() < deadline, "the job never ran again"
            detail = self.cluster.rest(f"/jobs/{job}")
            if detail["state"] == "RUNNING" and all(v["status"] == "RUNNING"
                                                    for v in detail["vertices"]):
                break
            time.sleep(0.1)
        self.times["running"] = time.time()
        checkpoints = self.cluster.rest(f"/jobs/{job}/checkpoints")
        self.restores = checkpoints["counts"]["restored"]
        restored = checkpoints["latest"]["restored"]
        self.restored_from = restored["external_path"]
        (trigger,) = [c["trigger_timestamp"] for c in checkpoints["history"]
                      if c["id"] == restored["id"]]
        self.checkpoint_at = trigger / 1000


@pytest.fixture(scope="module")
def killed(local_stack, cluster) -> tuple[ClusterCrawl, _Drill]:
    """The crawl whose TaskManager is killed mid-crawl and replaced."""
    drill = _Drill(cluster)
    crawl = _crawl(local_stack, cluster, [f"--max_lease_urls={MAX_LEASE_URLS}"], drill)
    assert drill.error is None, repr(drill.error)
    return crawl, drill


def test_a_killed_taskmanager_is_replaced_and_the_job_restored_from_its_checkpoint(
        killed, cluster):
    crawl, drill = killed
    site = crawl.site
    total = sum(len(_expected(site, h)) for h in site.hosts)
    assert "running" in drill.times and drill.gets_at_kill < total - 3 * MAX_LEASE_URLS, (
        "the TaskManager must die mid-crawl", drill.gets_at_kill, total)
    assert drill.restores >= 1
    assert Path(drill.restored_from.removeprefix("file:")).is_relative_to(
        cluster.checkpoint_dir.resolve()), drill.restored_from
    assert drill.checkpoint_at < drill.times["kill"]
    kill, restored = drill.times["kill"], drill.times["registered"]
    resumed = min(r.start for h in site.hosts for r in site.requests(h) if r.start > restored)
    _print_figures("TaskManager failure", {
        "checkpoint age at the kill": kill - drill.checkpoint_at,
        "kill to new TaskManager registered": restored - kill,
        "kill to every task running": drill.times["running"] - kill,
        "kill to the next request of the restored job": resumed - kill})


def test_after_the_failure_every_request_is_still_polite(killed):
    _assert_polite(killed[0])


def test_only_what_the_last_checkpoint_did_not_cover_is_fetched_again(killed):
    crawl, drill = killed
    site = crawl.site
    refetched = {}
    for host in site.hosts:
        again = _refetched(site, host)
        before_checkpoint = []
        for path in again:
            starts = sorted(r.start for r in _gets(site, host) if r.path == path)
            # Once by the dead job, once by the restored one (which starts after the new
            # TaskManager registered).
            assert len(starts) == 2 and starts[0] < drill.times["registered"] < starts[1], (
                host, path, starts)
            if starts[0] < drill.checkpoint_at:
                before_checkpoint.append(path)
        # Before the checkpoint only the lease out at it can be unrecorded.
        assert len(before_checkpoint) <= MAX_LEASE_URLS, (host, before_checkpoint)
        refetched[host] = (len(before_checkpoint), len(again))
    total = sum(len(_expected(site, h)) for h in site.hosts)
    print(f"\nGETs at the kill {drill.gets_at_kill} of {total}; URLs fetched twice per host "
          f"(first fetched before the checkpoint, in all): {refetched}")


def test_after_the_failure_no_page_is_lost(killed):
    crawl, drill = killed
    missing = _missing(crawl)
    sources = {}  # the pages linking to (or redirecting to) a missing one, and their GETs
    for host, paths in missing.items():
        targets = {host + p for p in paths}
        for h2 in crawl.site.hosts:
            for p2 in _expected(crawl.site, h2):
                response = crawl.site.response(h2, p2)
                leads = {u.split("#")[0] for u in response.links}
                if response.location:
                    leads.add(urljoin(h2 + p2, response.location))
                if targets & leads:
                    sources[h2 + p2] = sorted(round(r.start - drill.times["kill"], 1)
                                              for r in _gets(crawl.site, h2) if r.path == p2)
    assert not missing, (f"missing {missing}; the pages leading to them and when they were "
                         f"fetched, in s after the kill: {sources}")
