"""Fair share on the emulators, timed: client B's 20 URLs on a host, submitted while client A's
600 URLs on the same host are being crawled, finish within a few leases of the time they take on
the idle host, not after A's backlog (about 12 s at the host's 0.02 s delay). Two runs of the
real pipeline on one demo host (the URLs are unknown paths: fast 404s, recorded ``not_stored``).
About a minute."""

from __future__ import annotations

import io
import threading
import time
import uuid

import pytest

from pipeline.demo.site import DemoSite
from pipeline.local.driver import RunSummary
from pipeline.main import run
from pipeline.ops.batches import batch_status, pubsub_publisher, submit_batch
from pipeline.ops.resources import ensure_bigtable, ensure_subscription, ensure_topic
from transforms.core.batches import BatchSpec
from transforms.formats.rows import from_iso
from transforms.stores.bigtable import BigtableStoreSpec

pytestmark = pytest.mark.integration

DELAY = 0.02
A_URLS, B_URLS = 600, 20
B_AFTER = 4.0  # seconds after the run starts


def _crawl(stack, host: str, with_backlog: bool) -> tuple[float, float | None, RunSummary]:
    """One run; returns B's completion time (done - submitted) and A's, if any."""
    suffix = uuid.uuid4().hex[:8]
    topic, sub, instance = f"fair-{suffix}", f"fair-{suffix}-sub", f"fair-{suffix}"
    ensure_topic(stack.project, topic)
    ensure_subscription(stack.project, topic, sub)
    ensure_bigtable(stack.project, instance)
    store = BigtableStoreSpec(stack.project, instance).open()
    publish = pubsub_publisher(stack.project, topic)
    if with_backlog:
        submit_batch(BatchSpec("a1", "a"), [f"{host}/a/{i}.html" for i in range(A_URLS)],
                     publish=publish, store=store)
    later = threading.Timer(B_AFTER, submit_batch, (
        BatchSpec("b1", "b"), [f"{host}/b/{i}.html" for i in range(B_URLS)]),
        {"publish": publish, "store": store})
    later.start()
    summary = run(stack.pipeline_args([
        f"--input_subscription=projects/{stack.project}/subscriptions/{sub}",
        f"--frontier_topic=projects/{stack.project}/topics/{topic}",
        f"--bigtable_instance={instance}", f"--warc_prefix=gs://{stack.bucket}/{suffix}",
        f"--min_delay={DELAY}", "--idle_timeout=6", "--warc_roll_seconds=2",
        "--allow_private_networks"]), out=io.StringIO())
    later.join()
    assert isinstance(summary, RunSummary)

    def took(batch_id: str) -> float:
        doc = batch_status(store, batch_id, time.time())
        assert doc is not None and doc["state"] == "done", (batch_id, summary.reason, doc)
        return (from_iso(doc["done_at"]) or 0.0) - (from_iso(doc["submitted_at"]) or 0.0)

    return took("b1"), took("a1") if with_backlog else None, summary


def test_a_small_batch_is_not_held_behind_another_clients_backlog_on_the_same_host(local_stack):
    with DemoSite().start(n_hosts=3, pages_per_host=16) as site:
        host = site.hosts[2]  # no robots.txt: the policy's delay applies
        alone, _, _ = _crawl(local_stack, host, with_backlog=False)
        behind, a_took, summary = _crawl(local_stack, host, with_backlog=True)
    print(f"\nfair share: B alone {alone:.2f} s, B behind A's backlog {behind:.2f} s, "
          f"A {a_took:.2f} s")
    assert a_took is not None and a_took > A_URLS * DELAY  # A's backlog took its time
    # B waited at most a few leases for A's backlog, never the backlog itself.
    assert behind - alone < 8.0, (alone, behind, a_took, summary.reason)
    assert behind < a_took / 3, (alone, behind, a_took)
