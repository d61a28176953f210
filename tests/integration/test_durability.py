"""Durability on the local runners (the DirectRunner and Prism): a ``crawler run`` killed with
SIGKILL mid-crawl and started again loses nothing and fetches (almost) nothing twice, and a
second job against the same tables fetches nothing the first one did. Asserted from the demo
servers' own request logs, across both runs, and from the tables.

The in-flight allowance: a URL whose request was out when the process died, or whose row had
not reached the webtable yet (a page waits for its WARC file, so its content was not stored),
is fetched again by the next run. The test reads the webtable right after the kill and asserts
that no URL recorded as done then is fetched again, and reports how many were (with
``--max_lease_urls=4`` and ``--warc_roll_seconds=1``: about one lease per host).

On Prism nothing is checkpointed and bundles are finalized at once, so the reader leaves
acknowledgement to the pipeline (as the DirectRunner's does): the kill proves that mechanism, and
that the Prism the killed driver started ends with it.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from google.cloud import bigtable

from pipeline.demo.log import crawlable_paths, max_concurrency, min_start_gap
from pipeline.demo.site import DemoSite
from pipeline.local.driver import RunSummary
from pipeline.main import run
from pipeline.ops.resources import ensure_bigtable, ensure_subscription, ensure_topic
from pipeline.ops.seeding import publish_seeds
from transforms.core.policy import DEFAULT_POLICY
from transforms.core.status import is_terminal
from transforms.core.urls import canonicalize_url
from transforms.formats.index import entry_from_cells
from transforms.formats.rowkeys import url_from_row_key
from transforms.formats.schema import FETCH_FAMILY, FRONTIER_TABLE, INDEX_FAMILY, WEBTABLE

pytestmark = pytest.mark.integration

MIN_DELAY = 0.1
CRAWL_DELAY = 0.3
LEASE_URLS = 4
GAP_TOLERANCE = 0.03
KILL_AFTER_PAGES = 25  # of the slowest host: the crawl is well under way, far from done
REPO = Path(__file__).resolve().parents[2]


RUNNERS = {"direct": [], "prism": ["--runner=PrismRunner"]}


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux: /proc/PID/task/*/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gets(site: DemoSite, host: str) -> list:
    return [r for r in site.requests(host) if r.method == "GET"]


def _expected(site: DemoSite, host: str) -> set[str]:
    return crawlable_paths(host, site.expected_fetch_paths(host), DEFAULT_POLICY.defaults,
                           time.time())


def _rows(project: str, instance: str, table: str) -> dict[str, dict[str, dict[str, str]]]:
    rows = bigtable.Client(project=project).instance(instance).table(table).read_rows()
    return {r.row_key.decode(): {f: {c.decode(): v[0].value.decode() for c, v in cols.items()}
                                 for f, cols in r.cells.items()} for r in rows}


@pytest.fixture(scope="module", params=sorted(RUNNERS))
def killed_and_resumed(request, local_stack, tmp_path_factory):
    """Crawls the demo site, kills the run with SIGKILL part-way, runs again to the end."""
    suffix = uuid.uuid4().hex[:8]
    topic, subscription, instance = f"dur-{suffix}", f"dur-{suffix}-sub", f"dur-{suffix}"
    ensure_topic(local_stack.project, topic)
    ensure_subscription(local_stack.project, topic, subscription)
    ensure_bigtable(local_stack.project, instance)
    site = DemoSite().start(n_hosts=3, pages_per_host=40, crawl_delay=CRAWL_DELAY)
    argv = local_stack.pipeline_args([
        f"--input_subscription=projects/{local_stack.project}/subscriptions/{subscription}",
        f"--frontier_topic=projects/{local_stack.project}/topics/{topic}",
        f"--bigtable_instance={instance}", f"--warc_prefix=gs://{local_stack.bucket}/{suffix}",
        f"--min_delay={MIN_DELAY}", "--idle_timeout=15", "--warc_roll_seconds=1",
        f"--max_lease_urls={LEASE_URLS}", "--frontier_head_size=8", "--retry_delay=0.5",
        "--allow_private_networks", *RUNNERS[request.param]])
    log = tmp_path_factory.mktemp("durability") / "first-run.log"
    try:
        publish_seeds(site.seed_urls(), local_stack.project, topic)
        slow = site.hosts[0]  # the Crawl-delay host: the last to finish
        with log.open("w") as out:
            first = subprocess.Popen([sys.executable, "-m", "pipeline", *argv], cwd=REPO,
                                     stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
            limit = time.monotonic() + 120
            while len(_gets(site, slow)) < KILL_AFTER_PAGES:
                assert first.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < limit, "the first run made no progress"
                time.sleep(0.05)
            started_by_run = {c: _cmdline(c) for c in _children(first.pid)}
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        killed_at = time.time()
        # Prism dies with the driver that started it (PR_SET_PDEATHSIG): no job of the killed
        # run goes on pulling messages.
        while any(_alive(c) for c in started_by_run) and time.time() < killed_at + 10:
            time.sleep(0.05)
        assert not any(_alive(c) for c in started_by_run), started_by_run
        if request.param == "prism":
            assert any("prism" in cmd for cmd in started_by_run.values()), started_by_run
        before = {h: len(_gets(site, h)) for h in site.hosts}
        # What the tables held when the process died: the URLs recorded as done.
        done_at_kill = {url_from_row_key(key) for key, cells in
                        _rows(local_stack.project, instance, WEBTABLE).items()
                        if is_terminal(cells.get(FETCH_FAMILY, {}).get("outcome"))}
        out = io.StringIO()
        resumed_at = time.time()
        summary = run(argv, out=out)
        assert isinstance(summary, RunSummary)
        after_kill = [r for h in site.hosts for r in _gets(site, h) if r.start > killed_at]
        resume_seconds = min(r.start for r in after_kill) - resumed_at if after_kill else None
        yield {"site": site, "summary": summary, "out": out.getvalue(), "before": before,
               "killed_at": killed_at, "resume_seconds": resume_seconds, "argv": argv,
               "done_at_kill": done_at_kill,
               "instance": instance, "project": local_stack.project, "topic": topic}
    finally:
        site.stop()


def test_nothing_is_lost_across_the_kill(killed_and_resumed):
    site = killed_and_resumed["site"]
    assert killed_and_resumed["summary"].failed is None, killed_and_resumed["out"]
    assert any(0 < n < len(_expected(site, h))
               for h, n in killed_and_resumed["before"].items()), "killed too late to test"
    for host in site.hosts:
        fetched = {r.path for r in _gets(site, host)}
        missing = _expected(site, host) - fetched
        assert not missing, f"{host}: lost across the kill: {missing}"


def test_pages_fetched_twice_are_only_those_not_yet_recorded_at_the_kill(killed_and_resumed):
    """A page is fetched again only if its row was not terminal when the process died: its
    request was in flight, or its page was waiting for its WARC file (content not stored)."""
    site, killed_at = killed_and_resumed["site"], killed_and_resumed["killed_at"]
    done = killed_and_resumed["done_at_kill"]
    report = []
    for host in site.hosts:
        gets = _gets(site, host)
        counts = Counter(r.path for r in gets if r.path != "/robots.txt")
        twice = {p for p, n in counts.items() if n > 1}
        first_fetch: dict[str, float] = {}
        for r in gets:
            first_fetch.setdefault(r.path, r.start)
        recorded = {p for p in twice if canonicalize_url(host + p) in done}
        assert not recorded, (f"{host}: fetched again though recorded as done: {recorded}",
                              [(r.path, round(r.start - killed_at, 2)) for r in gets
                               if r.path in recorded])
        thrice = {p: [round(r.start - killed_at, 2) for r in gets if r.path == p]
                  for p, n in counts.items() if n > 2}
        assert not thrice, (host, thrice)
        ages = sorted(round(killed_at - first_fetch[p], 1) for p in twice)
        # Only the last moments' pages: the lease out at the kill, and pages fetched within a
        # WARC roll (--warc_roll_seconds=1) of it, whose rows were not written yet.
        assert all(age < 3 for age in ages), (host, ages)
        assert len(twice) <= 2 * LEASE_URLS, (host, sorted(twice))
        report.append(f"{host}: {len(twice)} fetched again (first fetched {ages} s before the "
                      "kill)")
    print("\n".join(report))


def test_robots_txt_and_the_delay_hold_across_the_restart(killed_and_resumed):
    site = killed_and_resumed["site"]
    for host in site.hosts:
        requests = site.requests(host)
        assert min(requests, key=lambda r: r.start).path == "/robots.txt"
        assert not {r.path for r in requests} & site.disallowed_paths(host)
        assert max_concurrency(requests) == 1, host
        delay = max(MIN_DELAY, site.spec(host).crawl_delay or 0.0)
        gap = min_start_gap(requests)
        assert gap is not None and gap >= delay - GAP_TOLERANCE, (host, gap, delay)


def test_the_tables_end_with_every_url_settled(killed_and_resumed):
    r = killed_and_resumed
    rows = _rows(r["project"], r["instance"], WEBTABLE)
    statuses = Counter(cells[FETCH_FAMILY]["outcome"] for cells in rows.values())
    assert statuses["queued"] == 0 and statuses["retry_scheduled"] == 0, statuses
    index = _rows(r["project"], r["instance"], FRONTIER_TABLE)
    entries = [entry_from_cells(k, v[INDEX_FAMILY]) for k, v in index.items()]
    # What is left is the recrawls, due a day from now (the policy's default interval).
    assert entries and all(e.request.revisit == "recrawl" for e in entries)
    assert all(e.eligible_at > time.time() + 3600 for e in entries)
    print(f"resume: first request {r['resume_seconds']:.1f} s after the restart")


def test_a_second_job_against_the_same_tables_fetches_nothing(killed_and_resumed):
    """A new job (its state empty) with the same seeds sent again: every URL is known from the
    rows, the seeds are still fresh, nothing is due: no request at all."""
    r = killed_and_resumed
    site = r["site"]
    site.reset_log()
    publish_seeds(site.seed_urls(), r["project"], r["topic"])  # a client asks again
    summary = run(r["argv"], out=io.StringIO())
    assert isinstance(summary, RunSummary) and summary.failed is None
    fetched = [f"{req.host}{req.path}" for h in site.hosts for req in site.requests(h)]
    assert fetched == []
    rows = _rows(r["project"], r["instance"], WEBTABLE)
    seeds = {canonicalize_url(u) for u in site.seed_urls()}
    outcomes = {url_from_row_key(k): c[FETCH_FAMILY]["outcome"] for k, c in rows.items()}
    assert {outcomes[u] for u in seeds} == {"fresh"}  # answered from the table
