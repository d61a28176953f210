"""Client-batch benchmark: what batches cost the crawler against plain seeding, and how soon a
batch's done notification follows its last URL (issue 14).

    python -m benchmarks.batches --out results/batches.json          (make bench-batches)
    python -m benchmarks.batches --batches 4 --urls-per-batch 20 --hosts 4 --out /tmp/b.json

The same ``batches x urls-per-batch`` URLs, ``/p/<i>`` on host ``i mod hosts`` (loopback sites
served by ``pipeline.demo.server``; pages from ``benchmarks.backlog.page`` with ``--links`` links,
none by default, and a policy with ``max_depth: 0``, so only the given URLs are fetched), are
crawled twice in one invocation, each time by ``crawler run`` as a separate process on a fresh
local stack (its own emulators and Bigtable instance), unthrottled (``--min_delay``):

A. ``plain``: the URLs published as seeds (``pipeline.ops.seeding.publish_seeds``);
B. ``batches``: the same URLs as client batches (``pipeline.ops.batches.submit_batch``), batch
   ``b`` holding URLs ``b*U .. b*U+U-1`` (so every batch spans every host) for client
   ``b mod clients``, with the default milestones (25%, 50%, 75%, done) on the notifications
   topic.

Everything is queued before the job starts. Measured (the crawler process's CPU as
``benchmarks.backlog`` samples it, every second, interpolated; page times from the servers' log):

* crawler CPU ms per URL: a run's whole CPU less the fixed cost of a run, taken from the plain
  run (its CPU before its first page request and after its last page response: start-up, the
  last rows, the idle wait, stopping), so what batches cost before the first request (intake)
  or after the last response (counting, results files, notifications) is charged to them.
  Batch overhead = B / A (goal: at most 1.10). Beside it, the CPU per URL while crawling
  (first page request to last response) and the emulators' CPU per URL;
* pages/s from the first page request to the last response, B / A;
* per batch, the done notification's ``at`` minus the latest ``at`` of the batch's ``u:`` cells
  (its last URL's outcome; for a fetched page its fetch time, while its cells are written with
  its WARC file, ``--warc_roll_seconds=2``): median and max; and that every batch is ``done``
  and notified.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.backlog import crawler_command, page, run_sampled
from pipeline.demo.exchange import Hit, Reply, RequestView
from pipeline.demo.server import LoggedServers, Respond
from pipeline.local.stack import LocalStack, start_local_stack, stop_local_stack
from transforms.formats.schema import DEFAULT_NOTIFICATIONS_TOPIC

GOAL = 1.10  # batches' crawler CPU per URL at most 10% above plain seeding
NOTES_SUBSCRIPTION = "bench-batches-notes"
Samples = Sequence[tuple[float, float, float, float]]  # ProcessSampler.samples


def respond_with(links: int) -> Respond:
    """A site whose page ``/p/N`` is ``page(N, links)``; robots.txt and the rest are 404."""

    def respond(view: RequestView) -> Reply:
        path = view.target.split("?", 1)[0]
        if path.startswith("/p/") and path[3:].isdigit():
            return Reply(body=page(int(path[3:]), links))
        return Reply(404, b"<h1>not found</h1>")

    return respond


def plan(bases: Sequence[str], batches: int, per_batch: int, clients: int
         ) -> list[tuple[str, str, list[str]]]:
    """(batch id, client, URLs) per batch: URL ``i`` is ``/p/i`` on host ``i mod len(bases)``,
    batch ``b`` holds URLs ``b*per_batch`` .. ``(b+1)*per_batch - 1``, for client ``b mod
    clients``."""
    return [(f"bench-{b:04d}", f"client-{b % clients}",
             [f"{bases[i % len(bases)]}/p/{i}" for i in range(b * per_batch, (b + 1) * per_batch)])
            for b in range(batches)]


def cpu_at(samples: Samples, column: int, t: float) -> float:
    """CPU seconds (``column`` of the samples: 2 the crawler, 3 the emulators) at time ``t``,
    interpolated between samples (the first or last sample outside them; 0 without any)."""
    if not samples:
        return 0.0
    times = [s[0] for s in samples]
    i = bisect.bisect_right(times, t)
    if i == 0:
        return samples[0][column]
    if i == len(samples):
        return samples[-1][column]
    (t0, c0), (t1, c1) = (times[i - 1], samples[i - 1][column]), (times[i], samples[i][column])
    return c0 + (c1 - c0) * (t - t0) / ((t1 - t0) or 1.0)


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Median and max, rounded (None for no values)."""
    if not values:
        return {"median": None, "max": None}
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(b / a, 3) if a and b is not None else None


def _queue_seeds(stack: LocalStack, urls: list[str]) -> None:
    from pipeline.ops.seeding import publish_seeds

    report = publish_seeds(urls, stack.project, stack.topic)
    assert report.published_urls == len(urls) and not report.invalid, report


def _queue_batches(stack: LocalStack, batches: list[tuple[str, str, list[str]]]) -> None:
    from pipeline.ops.batches import pubsub_publisher, submit_batch
    from pipeline.ops.resources import ensure_subscription
    from transforms.core.batches import BatchSpec
    from transforms.stores.bigtable import BigtableStoreSpec

    ensure_subscription(stack.project, DEFAULT_NOTIFICATIONS_TOPIC, NOTES_SUBSCRIPTION)
    publish = pubsub_publisher(stack.project, stack.topic)
    store = BigtableStoreSpec(stack.project, stack.instance).open()
    for batch_id, client, urls in batches:
        result = submit_batch(BatchSpec(batch_id, client), urls, publish=publish, store=store)
        assert result.unique == len(urls) and not result.existing, result


def _notifications(stack: LocalStack) -> dict[str, dict[str, dict[str, Any]]]:
    """The notifications on the benchmark's subscription: batch id -> transition -> body (with
    ``published``, the message's publish time)."""
    import google.cloud.pubsub_v1 as pubsub_v1

    from transforms.stores.pubsub import pull_messages

    subscriber = pubsub_v1.SubscriberClient()
    path = subscriber.subscription_path(stack.project, NOTES_SUBSCRIPTION)
    notes: dict[str, dict[str, dict[str, Any]]] = {}
    while messages := pull_messages(subscriber, path, 500, wait_seconds=5.0):
        for m in messages:
            body = json.loads(m.data)
            notes.setdefault(body["batch_id"], {})[body["transition"]] = {
                **body, "published": m.publish_time}
        subscriber.acknowledge(request={"subscription": path,
                                        "ack_ids": [m.ack_id for m in messages]})
    return notes


def batch_report(stack: LocalStack, batches: list[tuple[str, str, list[str]]]
                 ) -> list[dict[str, Any]]:
    """Per batch: state and outcomes (``status_doc``), its last URL's outcome time (the latest
    ``at`` of its ``u:`` cells), the done notification's delay after it, and when each of its
    notifications went out."""
    from pipeline.ops.batches import status_doc
    from transforms.formats.batch_rows import read_record
    from transforms.formats.schema import BATCHES_TABLE
    from transforms.stores.bigtable import BigtableStoreSpec

    store = BigtableStoreSpec(stack.project, stack.instance).open()
    notes = _notifications(stack)
    now = time.time()
    out = []
    for batch_id, client, _ in batches:
        record = read_record(batch_id, store.read_row(BATCHES_TABLE, batch_id))
        doc = status_doc(record, now) if record else {"state": None, "outcomes": {}}
        ats = [float(at) for d in (record.urls.values() if record else ())
               if isinstance(at := d.get("at"), int | float)]
        last = max(ats) if ats else None
        sent = notes.get(batch_id, {})
        note = sent.get("done")
        out.append({
            "batch_id": batch_id, "client": client, "state": doc["state"],
            "outcomes": doc["outcomes"], "done_at": doc.get("done_at"), "last_url_at": last,
            "notified_at": note["at"] if note else None,
            "notification_latency_s": round(note["at"] - last, 3) if note and last else None,
            "published_latency_s": round(note["published"] - last, 3) if note and last
            else None,
            # when each notification went out (25%, 50%, 75%, done), epoch seconds
            "transitions": {t: body["at"] for t, body in sorted(sent.items())}})
    return out


def _crawl_window(hits: Sequence[Hit]) -> tuple[list[Hit], float, float]:
    """The page requests, the first one's start and the last one's end."""
    pages = [h for h in hits if h.method == "GET" and h.path != "/robots.txt"]
    if not pages:
        return [], 0.0, 0.0
    return pages, min(h.start for h in pages), max(h.end for h in pages)


def cpu_phases(samples: Samples, column: int, first: float, last: float) -> dict[str, float]:
    """CPU seconds of one process (column) before the first request, while crawling (first
    request to last response), after the last response, and in all (the last sample)."""
    total = samples[-1][column] if samples else 0.0
    at_first, at_last = cpu_at(samples, column, first), cpu_at(samples, column, last)
    return {"startup": round(at_first, 2), "crawling": round(at_last - at_first, 2),
            "tail": round(total - at_last, 2), "total": round(total, 2)}


def run_mode(mode: str, batches: list[tuple[str, str, list[str]]], servers: LoggedServers,
             work: Path, flags: Sequence[str], timeout: float) -> dict[str, Any]:
    """One crawl of every URL of ``batches`` on a fresh local stack: as seeds (``plain``) or as
    the batches (``batches``); returns its figures."""
    urls = [u for _, _, us in batches for u in us]
    state = work / mode / "state"
    stack = start_local_stack(state, instance=f"bench-{mode}-{uuid.uuid4().hex[:8]}")
    try:
        with stack.activate():
            if mode == "plain":
                _queue_seeds(stack, urls)
            else:
                _queue_batches(stack, batches)
        servers.clear()
        launched = time.time()
        log = work / mode / "crawler.log"
        code, sampler = run_sampled(crawler_command(state, "run", *flags), log, timeout, state)
        wall = time.time() - launched
        stopped = [line for line in log.read_text(errors="replace").splitlines()
                   if line.startswith("Crawl stopped: ")]
        servers.settle()
        pages, first, last = _crawl_window(servers.hits())
        per_batch: list[dict[str, Any]] = []
        if mode == "batches":
            with stack.activate():
                per_batch = batch_report(stack, batches)
    finally:
        stop_local_stack(state)
    samples = sampler.samples
    result: dict[str, Any] = {
        "mode": mode, "urls": len(urls), "exit_code": code, "wall_s": round(wall, 1),
        "stop_reason": stopped[-1].split(": ", 1)[1] if stopped else None,  # the driver's
        "pages": len(pages), "unique_urls": len({h.host + h.path for h in pages}),
        "first_request_after_s": round(first - launched, 1) if pages else None,
        "crawl_s": round(last - first, 2),
        "pages_per_s": round(len(pages) / (last - first), 1) if last > first else None,
        "crawler_cpu_s": cpu_phases(samples, 2, first, last),
        "emulators_cpu_s": cpu_phases(samples, 3, first, last),
        "peak_rss_mb": max((s[1] for s in samples), default=None),
        # (seconds since launch, crawler CPU s, emulators' CPU s), one a second
        "cpu_samples": [(round(t - launched, 1), c, e) for t, _, c, e in samples],
    }
    if mode == "batches":
        notified = [b["notified_at"] for b in per_batch if b["notified_at"]]
        result["last_notification_after_last_page_s"] = (round(max(notified) - last, 2)
                                                         if notified and pages else None)
        result["batches"] = per_batch
    return result


def per_url_ms(run: dict[str, Any], plain: dict[str, Any], key: str) -> float:
    """CPU ms per URL of a run's work: its whole CPU (``key``: ``crawler_cpu_s`` or
    ``emulators_cpu_s``) less the fixed cost of a run, taken from the plain run (its CPU before
    the first request and after the last response: start-up, the last rows, the idle wait,
    stopping). So batch work before the first request (intake) or after the last response
    (completion, notifications) is charged to the batches."""
    fixed = plain[key]["startup"] + plain[key]["tail"]
    return round(1000 * (run[key]["total"] - fixed) / run["urls"], 3)


def summarize(plain: dict[str, Any], batched: dict[str, Any]) -> dict[str, Any]:
    """Per-URL CPU of both runs and the ratios (batches / plain), the notification latency."""
    per_batch = batched["batches"]
    cpu = {m: per_url_ms(r, plain, "crawler_cpu_s") for m, r in (("plain", plain),
                                                                 ("batches", batched))}
    emu = {m: per_url_ms(r, plain, "emulators_cpu_s") for m, r in (("plain", plain),
                                                                   ("batches", batched))}
    crawling = {m: round(1000 * r["crawler_cpu_s"]["crawling"] / r["urls"], 3)
                for m, r in (("plain", plain), ("batches", batched))}
    overhead = _ratio(cpu["plain"], cpu["batches"])
    return {
        "crawler_cpu_ms_per_url": cpu, "cpu_per_url_ratio": overhead,
        "goal": GOAL, "goal_met": overhead is not None and overhead <= GOAL,
        "crawler_cpu_ms_per_url_while_crawling": crawling,
        "while_crawling_ratio": _ratio(crawling["plain"], crawling["batches"]),
        "emulators_cpu_ms_per_url": emu,
        "emulators_cpu_per_url_ratio": _ratio(emu["plain"], emu["batches"]),
        "pages_per_s_ratio": _ratio(plain["pages_per_s"], batched["pages_per_s"]),
        "batches_done": sum(b["state"] == "done" for b in per_batch),
        "batches_notified": sum(b["notified_at"] is not None for b in per_batch),
        "notification_latency_s": spread([b["notification_latency_s"] for b in per_batch
                                          if b["notification_latency_s"] is not None]),
        "published_latency_s": spread([b["published_latency_s"] for b in per_batch
                                       if b["published_latency_s"] is not None]),
    }


def table(result: dict[str, Any]) -> str:
    """The printed report: both runs side by side, the ratios and the latency."""
    runs, s, n = result["runs"], result["summary"], result["params"]

    def row(label: str, plain: object, batches: object, ratio: object = "") -> str:
        return f"  {label:36} {plain!s:>9} {batches!s:>9} {ratio!s:>14}"

    def field(label: str, key: str, ratio: object = "") -> str:
        return row(label, runs["plain"][key], runs["batches"][key], ratio)

    def cpu(label: str, key: str, phase: str) -> str:
        return row(label, runs["plain"][key][phase], runs["batches"][key][phase])

    def per_url(label: str, key: str, ratio: str) -> str:
        return row(label, s[key]["plain"], s[key]["batches"], s[ratio])

    lat, pub = s["notification_latency_s"], s["published_latency_s"]
    return "\n".join([
        f"{result['urls']:,} URLs on {n['hosts']} hosts: plain seeds vs {n['batches']} batches "
        f"of {n['urls_per_batch']:,} ({n['clients']} clients)",
        row("", "plain", "batches", "batches/plain"),
        field("pages fetched", "pages"),
        field("pages/s (first to last page)", "pages_per_s", s["pages_per_s_ratio"]),
        per_url("crawler CPU ms/URL (run - fixed)", "crawler_cpu_ms_per_url",
                "cpu_per_url_ratio"),
        per_url("crawler CPU ms/URL while crawling", "crawler_cpu_ms_per_url_while_crawling",
                "while_crawling_ratio"),
        per_url("emulators' CPU ms/URL (run - fixed)", "emulators_cpu_ms_per_url",
                "emulators_cpu_per_url_ratio"),
        cpu("crawler CPU s before the first page", "crawler_cpu_s", "startup"),
        cpu("crawler CPU s while crawling", "crawler_cpu_s", "crawling"),
        cpu("crawler CPU s after the last page", "crawler_cpu_s", "tail"),
        cpu("crawler CPU s, whole run", "crawler_cpu_s", "total"),
        field("first request after s", "first_request_after_s"),
        field("first to last page s", "crawl_s"), field("wall s", "wall_s"),
        field("peak RSS MB", "peak_rss_mb"),
        f"  batch overhead (crawler CPU per URL): {s['cpu_per_url_ratio']} (goal <= {GOAL}: "
        f"{'met' if s['goal_met'] else 'NOT met'})",
        f"  done notification after the batch's last URL: median {lat['median']} s, max "
        f"{lat['max']} s (published: median {pub['median']} s, max {pub['max']} s)",
        f"  batches done {s['batches_done']}/{n['batches']}, notified "
        f"{s['batches_notified']}/{n['batches']}",
        f"  stopped: plain: {runs['plain']['stop_reason']}; batches: "
        f"{runs['batches']['stop_reason']}"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=100, help="batches (default: 100)")
    parser.add_argument("--urls-per-batch", type=int, default=1000,
                        help="URLs per batch (default: 1,000; at most 10,000)")
    parser.add_argument("--hosts", type=int, default=20, help="loopback hosts (default: 20)")
    parser.add_argument("--clients", type=int, default=4,
                        help="clients the batches are spread over (default: 4)")
    parser.add_argument("--links", type=int, default=0,
                        help="links per page, not followed (max_depth 0) (default: 0)")
    parser.add_argument("--min-delay", type=float, default=0.0,
                        help="--min_delay of the crawl, seconds (default: 0)")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="limit on each crawl, seconds (default: 3600)")
    parser.add_argument("--out", default="results/batches.json")
    args = parser.parse_args(argv)
    if not 1 <= args.hosts <= 150:
        parser.error("--hosts: 1..150 (one loopback address each, 127.0.0.101 up)")
    work = Path(tempfile.mkdtemp(prefix="crawler-batches-"))
    policy = work / "policy.json"
    policy.write_text(json.dumps({"defaults": {
        "max_depth": 0, "max_pages_per_host": 2 * args.batches * args.urls_per_batch}}))
    flags = [f"--min_delay={args.min_delay:g}", "--allow_private_networks", "--idle_timeout=5",
             "--warc_roll_seconds=2", f"--policy={policy}"]
    respond = respond_with(args.links)
    with LoggedServers() as servers:
        bases = [servers.serve(f"127.0.0.{101 + i}", respond) for i in range(args.hosts)]
        batches = plan(bases, args.batches, args.urls_per_batch, args.clients)
        runs = {mode: run_mode(mode, batches, servers, work, flags, args.timeout)
                for mode in ("plain", "batches")}
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "params": {"batches": args.batches, "urls_per_batch": args.urls_per_batch,
                   "hosts": args.hosts, "clients": args.clients, "links": args.links,
                   "min_delay": args.min_delay},
        "urls": args.batches * args.urls_per_batch,
        "work_dir": str(work),  # each run's crawler.log and local stack logs
        "summary": summarize(runs["plain"], runs["batches"]),
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
