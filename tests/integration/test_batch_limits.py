"""The batch size limit through the real front door and the real intake, on the emulators: the
HTTP API (``pipeline.api``) publishing to the Pub/Sub emulator and reading the batches table on
the Bigtable emulator accepts a batch of exactly 10,000 URLs and refuses 10,001 with an error
that names the limit, refuses a wrong token, and the pipeline's intake (``TakeInBatches`` on a
TestPipeline, over the message as Pub/Sub delivered it) records all 10,000 and sends each URL
to its host's key."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import apache_beam as beam
import pytest
from aiohttp.test_utils import TestClient, TestServer
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from google.cloud import pubsub_v1

from pipeline.api import make_app
from pipeline.ops.batches import batch_status, pubsub_publisher
from pipeline.ops.resources import ensure_bigtable, ensure_subscription, ensure_topic
from transforms.batch_intake import TakeInBatches
from transforms.core.batches import MAX_BATCH_URLS
from transforms.core.clients import parse_clients
from transforms.core.policy import DEFAULT_POLICY
from transforms.core.records import BatchSubmission
from transforms.formats.batch_messages import decode_batch_message
from transforms.stores.bigtable import BigtableStoreSpec

pytestmark = pytest.mark.integration

CLIENTS = parse_clients(json.dumps({"clients": {"acme": {"token": "acme-t", "secret": "s"}}}))


def _urls(n: int) -> list[str]:
    return [f"http://host{i % 20}.example/page/{i}" for i in range(n)]


def test_the_api_takes_10000_urls_refuses_10001_and_a_wrong_token(local_stack):
    suffix = uuid.uuid4().hex[:8]
    topic, sub, instance = f"lim-{suffix}", f"lim-{suffix}-sub", f"lim-{suffix}"
    ensure_topic(local_stack.project, topic)
    ensure_subscription(local_stack.project, topic, sub)
    ensure_bigtable(local_stack.project, instance)
    spec = BigtableStoreSpec(local_stack.project, instance)
    store = spec.open()
    answers: dict[str, Any] = {}

    async def scenario() -> None:
        app = make_app(CLIENTS, pubsub_publisher(local_stack.project, topic), store)
        async with TestClient(TestServer(app)) as client:
            for name, token, urls in (("wrong", "nope", _urls(3)),
                                      ("over", "acme-t", _urls(MAX_BATCH_URLS + 1)),
                                      ("full", "acme-t", _urls(MAX_BATCH_URLS))):
                response = await client.post(
                    "/batches", json={"batch_id": f"big-{name}", "urls": urls},
                    headers={"Authorization": f"Bearer {token}"})
                answers[name] = (response.status, json.loads(await response.text()))

    asyncio.run(scenario())
    assert answers["wrong"][0] == 401
    assert answers["over"][0] == 400 and "10,000" in answers["over"][1]["error"]
    status, body = answers["full"]
    assert status == 202 and (body["batch_id"], body["sent"], body["unique"],
                              body["invalid"]) == ("big-full", 10_000, 10_000, 0), body

    subscriber = pubsub_v1.SubscriberClient()
    path = subscriber.subscription_path(local_stack.project, sub)
    pulled = subscriber.pull(request={"subscription": path, "max_messages": 10}, timeout=30)
    messages = [m.message for m in pulled.received_messages]
    assert len(messages) == 1 and messages[0].attributes["kind"] == "batch"
    message = decode_batch_message(messages[0].data)
    assert message.spec.batch_id == "big-full" and len(message.urls) == 10_000

    with TestPipeline() as p:
        taken = (p | beam.Create([(message.spec.batch_id, BatchSubmission(
                     message.spec, tuple(message.urls), 1.0, (), message.sent))])
                 | TakeInBatches(spec, "batches", DEFAULT_POLICY))
        sizes = taken.requests | beam.Map(lambda kv: len(kv[1].requests))
        assert_that(sizes | beam.CombineGlobally(sum), equal_to([10_000]))
        assert_that(taken.requests | beam.Map(lambda kv: kv[0]) | beam.Distinct()
                    | beam.combiners.Count.Globally(), equal_to([20]), label="TwentyKeys")
    doc = batch_status(store, "big-full", 2.0)
    assert doc is not None and (doc["state"], doc["total"], doc["sent"]) == ("running", 10_000,
                                                                          10_000)
