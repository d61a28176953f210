"""Client batches end to end: submitted with the CLI's code to the emulators, crawled by the
streaming pipeline from three demo hosts, counted, announced on the notifications topic and to a
real webhook receiver that fails its first two POSTs, and answered from the webtable (``cached``)
in a second job.

Two clients. The first batch holds a repeated URL, an invalid one, a robots-blocked one, a 404
and an unreachable host; the second (another client) shares a URL with it; the first is also
submitted twice before the job runs (the intake keeps one). The second job's batch repeats a URL
fetched by the first job (``cached``, no request) and the 404 (fetched again: errors are not
cached). About a minute.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from google.cloud import pubsub_v1, storage

from pipeline.demo.site import DemoSite
from pipeline.demo.webhook_receiver import WebhookReceiver
from pipeline.local.driver import RunSummary
from pipeline.main import run
from pipeline.ops.batches import batch_status, pubsub_publisher, submit_batch
from pipeline.ops.resources import ensure_bigtable, ensure_subscription, ensure_topic
from tests.integration.sites import read_table
from transforms.core.batches import BatchSpec, verify_signature
from transforms.formats.rowkeys import row_key
from transforms.stores.bigtable import BigtableStoreSpec

pytestmark = pytest.mark.integration

SECRET = "acme-signing-secret"


@pytest.fixture(scope="module")
def world(local_stack, tmp_path_factory) -> Iterator[dict]:
    suffix = uuid.uuid4().hex[:8]
    names = {"topic": f"bt-{suffix}", "subscription": f"bt-{suffix}-sub",
             "notes": f"bt-{suffix}-notes", "notes_sub": f"bt-{suffix}-notes-sub",
             "instance": f"bt-{suffix}", "suffix": suffix}
    ensure_topic(local_stack.project, names["topic"])
    ensure_subscription(local_stack.project, names["topic"], names["subscription"])
    ensure_topic(local_stack.project, names["notes"])
    ensure_subscription(local_stack.project, names["notes"], names["notes_sub"])
    ensure_bigtable(local_stack.project, names["instance"])
    folder = tmp_path_factory.mktemp("batches")
    clients = folder / "clients.json"
    clients.write_text(json.dumps({"clients": {"acme": {"token": "ta", "secret": SECRET},
                                               "globex": {"token": "tg", "secret": "g"}}}))
    policy = folder / "policy.yaml"
    policy.write_text("defaults:\n  max_depth: 0\n")  # batch URLs only, no links followed
    site = DemoSite().start(n_hosts=3, pages_per_host=16, crawl_delay=0.2)
    receiver = WebhookReceiver(SECRET, fail_first=2)
    receiver.start()
    try:
        yield {"stack": local_stack, "names": names, "clients": clients, "policy": policy,
               "site": site, "receiver": receiver,
               "store": BigtableStoreSpec(local_stack.project, names["instance"]).open()}
    finally:
        receiver.stop()
        site.stop()


def _run(world: dict) -> RunSummary:
    stack, n = world["stack"], world["names"]
    argv = stack.pipeline_args([
        f"--input_subscription=projects/{stack.project}/subscriptions/{n['subscription']}",
        f"--frontier_topic=projects/{stack.project}/topics/{n['topic']}",
        f"--notifications_topic=projects/{stack.project}/topics/{n['notes']}",
        f"--bigtable_instance={n['instance']}",
        f"--warc_prefix=gs://{stack.bucket}/{n['suffix']}",
        f"--clients_file={world['clients']}", f"--policy={world['policy']}",
        "--min_delay=0.05", "--idle_timeout=10", "--warc_roll_seconds=2", "--retry_delay=0.3",
        "--connect_timeout=2", "--allow_private_networks"])
    summary = run(argv, out=io.StringIO())
    assert isinstance(summary, RunSummary)
    return summary


def _submit(world: dict, spec: BatchSpec, urls: list[str]):
    stack = world["stack"]
    return submit_batch(spec, urls, publish=pubsub_publisher(stack.project,
                                                             world["names"]["topic"]),
                        store=world["store"])


def _notifications(world: dict) -> list[dict]:
    stack = world["stack"]
    subscriber = pubsub_v1.SubscriberClient()
    path = subscriber.subscription_path(stack.project, world["names"]["notes_sub"])
    bodies: list[dict] = []
    while True:
        answer = subscriber.pull(request={"subscription": path, "max_messages": 100},
                                 timeout=10)
        if not answer.received_messages:
            return bodies
        bodies += [json.loads(m.message.data) for m in answer.received_messages]
        subscriber.acknowledge(request={"subscription": path,
                                        "ack_ids": [m.ack_id for m in answer.received_messages]})


def test_two_clients_batches_are_counted_announced_signed_and_cached(world):
    site, receiver, store = world["site"], world["receiver"], world["store"]
    alpha, beta, gamma = site.hosts  # robots with Disallow /private/; Disallow; no robots.txt
    batch_a = [f"{alpha}/", f"{alpha}/", f"{alpha}/#top", f"{alpha}/private/x.html",
               f"{gamma}/missing.html", site.unreachable_url, "not a url", f"{beta}/"]
    spec_a = BatchSpec("acme-1", "acme", notify=receiver.url, milestone_step=50)
    first = _submit(world, spec_a, batch_a)
    assert (first.sent, first.unique, first.invalid) == (8, 5, 1)
    again = _submit(world, spec_a, batch_a)  # before the job: published, the intake keeps one
    assert again.batch_id == "acme-1"
    _submit(world, BatchSpec("globex-1", "globex"), [f"{beta}/", f"{gamma}/"])

    summary = _run(world)
    if "idle" not in summary.reason:
        rows = read_table(world["stack"].project, world["names"]["instance"], "webtable")
        index = read_table(world["stack"].project, world["names"]["instance"], "frontier")
        print("DEBUG", summary.reason, batch_status(store, "globex-1", time.time()))
        print("DEBUG rows", {k: v for k, v in rows.items() if "8" in k})
        print("DEBUG index", index)
    assert "idle" in summary.reason

    now = time.time()
    doc_a = batch_status(store, "acme-1", now)
    assert doc_a is not None and doc_a["state"] == "done", doc_a
    assert doc_a["total"] == 6 and doc_a["sent"] == 8 and doc_a["unique"] == 5
    assert doc_a["outcomes"] == {"fetched": 2, "robots_blocked": 1, "not_stored": 1, "error": 1,
                                 "invalid": 1}, doc_a["outcomes"]
    doc_g = batch_status(store, "globex-1", now)
    assert doc_g is not None and doc_g["state"] == "done"
    assert doc_g["outcomes"] == {"fetched": 2}
    # The counts are what the webtable says about those URLs, and the rows name their batches.
    rows = read_table(world["stack"].project, world["names"]["instance"], "webtable")
    batch_cells = read_table(world["stack"].project, world["names"]["instance"], "batches")
    for url, text in batch_cells["acme-1"]["u"].items():
        outcome = json.loads(text)["o"]
        if outcome == "invalid":
            continue
        row = rows[row_key(url)]
        assert row["f"]["outcome"] == outcome and row["b"]["acme-1"] == outcome, url
    assert rows[row_key(f"{beta}/")]["b"] == {"acme-1": "fetched", "globex-1": "fetched"}
    # Fetched once although two batches (and a repeated submission) asked for it.
    assert sum(1 for h in site.requests(beta) if h.path == "/" and h.method == "GET") == 1
    assert not any(h.path.startswith("/private/") for h in site.requests(alpha))

    # Notifications: once per transition on the topic, and at the receiver, signed.
    notes = _notifications(world)
    by_batch = Counter((n["batch_id"], n["transition"]) for n in notes)
    # Which milestones a batch passes before it completes depends on timing (a completing step
    # announces done alone); each goes out once, and both batches are announced done.
    assert set(by_batch.values()) == {1}, by_batch
    assert {("acme-1", "done"), ("globex-1", "done")} <= set(by_batch)
    assert {t for b, t in by_batch if b == "acme-1"} <= {"50%", "done"}
    done_note = next(n for n in notes if n["batch_id"] == "acme-1" and n["transition"] == "done")
    assert done_note["idempotency_key"] == "acme-1:done" and done_note["outcomes"]["fetched"] == 2
    path = done_note["results"]["path"]
    assert path.startswith(f"gs://{world['stack'].bucket}/") and path.endswith("acme-1.jsonl")
    acme_transitions = sum(1 for b, _ in by_batch if b == "acme-1")
    assert receiver.wait_for_accepted(acme_transitions, timeout=30)
    posts = receiver.received
    assert [p.status for p in posts[:2]] == [500, 500]
    assert all(verify_signature(SECRET, p.body, p.headers.get("x-crawler-signature"))
               for p in posts)
    accepted = receiver.accepted_bodies()
    hooked = sorted(b["transition"] for b in accepted)  # type: ignore[index]
    assert hooked == sorted(t for b, t in by_batch if b == "acme-1"), (hooked, by_batch)
    hooks = batch_status(store, "acme-1", time.time())["notifications"]
    assert all(h["webhook"]["ok"] for h in hooks), hooks
    attempts = sum(len(h["webhook"]["attempts"]) for h in hooks)
    assert attempts == len(posts) == acme_transitions + 2, hooks

    # The results file: one JSON line per URL of the batch.
    bucket, _, name = path[len("gs://"):].partition("/")
    lines = storage.Client(project=world["stack"].project).bucket(bucket).blob(name) \
        .download_as_bytes().decode().splitlines()
    results = {d["url"]: d for d in map(json.loads, lines)}
    assert len(results) == 6 and results[f"{beta}/"]["outcome"] == "fetched"
    assert results[f"{beta}/"]["warc_file"] and results[f"{beta}/"]["status"] == 200

    # A second job: a URL fetched within the cache time is answered from the webtable; the 404
    # is fetched again (errors have no cache time).
    site.reset_log()
    _submit(world, BatchSpec("globex-2", "globex", cache_hours=1.0),
            [f"{beta}/", f"{gamma}/missing.html"])
    summary = _run(world)
    doc = batch_status(store, "globex-2", time.time())
    assert doc is not None and doc["state"] == "done", (summary.reason, doc)
    assert doc["outcomes"] == {"cached": 1, "not_stored": 1}, doc["outcomes"]
    assert not any(h.path == "/" and h.method == "GET" for h in site.requests(beta))
    assert sum(1 for h in site.requests(gamma) if h.path == "/missing.html") == 1

