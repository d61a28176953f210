"""The batch API (pipeline.api) on a real aiohttp server on loopback, with a publisher that
keeps its messages and the memory store as the batches table."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from pipeline.api import make_app, spec_from_request
from tests.unit.pipeline.publishing import Published
from transforms.core.batches import MAX_BATCH_URLS, BatchError, BatchSpec, prepare_batch
from transforms.core.clients import parse_clients
from transforms.core.records import BatchEvent
from transforms.formats.batch_messages import decode_batch
from transforms.formats.batch_rows import outcome_rows, record_row
from transforms.formats.schema import BATCHES_TABLE
from transforms.stores.memory import MemoryFrontierStore, memory_store

T0 = 1_780_000_000.0
CLIENTS = parse_clients(json.dumps({"clients": {
    "acme": {"token": "acme-token", "secret": "s1"},
    "globex": {"token": "globex-token", "secret": "s2"}}}))
ACME = {"Authorization": "Bearer acme-token"}
GLOBEX = {"Authorization": "Bearer globex-token"}


@pytest.fixture
def store() -> MemoryFrontierStore:
    return memory_store(f"api-{uuid.uuid4().hex}")


@pytest.fixture
def published() -> Published:
    return Published()


Scenario = Callable[[TestClient], Awaitable[None]]


@pytest.fixture
def serve(store, published) -> Callable[[Scenario], None]:
    """Runs a scenario against the API on a loopback port."""

    def run(scenario: Scenario) -> None:
        async def main() -> None:
            app = make_app(CLIENTS, published, store, clock=lambda: T0 + 10)
            async with TestClient(TestServer(app)) as client:
                await scenario(client)

        asyncio.run(main())

    return run


def _record(store: MemoryFrontierStore, batch_id: str, client: str, urls: list[str]) -> None:
    """What the pipeline's intake writes when it takes a batch in."""
    batch = prepare_batch(BatchSpec(batch_id, client), urls)
    store.write_rows(BATCHES_TABLE, [record_row(batch, T0)])


async def _json(response: Any) -> Any:
    return json.loads(await response.text())


# --- authentication ----------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "acme-token"},
    {"Authorization": "Basic acme-token"}, {"Authorization": "Bearer "}])
def test_a_missing_or_wrong_token_is_401(serve, published, headers):
    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", json={"urls": ["https://example.com/"]},
                                     headers=headers)
        assert response.status == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "error" in await _json(response)
        assert (await client.get("/batches/b1", headers=headers)).status == 401

    serve(scenario)
    assert published.messages == []


def test_healthz_needs_no_token(serve):
    async def scenario(client: TestClient) -> None:
        response = await client.get("/healthz")
        assert response.status == 200 and await _json(response) == {"ok": True}

    serve(scenario)


# --- POST /batches -----------------------------------------------------------------------------


def test_a_new_batch_is_202_and_published_for_the_tokens_client(serve, published):
    body = {"batch_id": "orders-1", "priority": 2, "cache_hours": 24, "milestone_step": 10,
            "notify": "https://hooks.example/x",
            "urls": ["https://example.com/a", "https://EXAMPLE.com/a", "not a url"]}

    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", json=body, headers=ACME)
        assert response.status == 202
        assert await _json(response) == {"batch_id": "orders-1", "sent": 3, "unique": 1,
                                         "invalid": 1}
        assert response.headers["Location"] == "/batches/orders-1"

    serve(scenario)
    ((data, attributes),) = published.messages
    spec, urls = decode_batch(data)
    assert spec == BatchSpec("orders-1", "acme", 2, 24.0, "https://hooks.example/x", 10)
    assert attributes["client"] == "acme"
    assert urls == ["https://example.com/a", "not a url"]


def test_a_batch_without_an_id_gets_one(serve, published):
    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", json={"urls": ["https://example.com/"]},
                                     headers=ACME)
        assert response.status == 202
        assert (await _json(response))["batch_id"].startswith("b-")

    serve(scenario)
    assert len(published.messages) == 1


def test_the_same_batch_id_again_is_200_and_publishes_nothing(serve, store, published):
    _record(store, "orders-1", "acme", ["https://example.com/a"])

    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", headers=ACME, json={
            "batch_id": "orders-1", "urls": ["https://example.com/a"]})
        assert response.status == 200
        assert await _json(response) == {"batch_id": "orders-1", "existing": True}

    serve(scenario)
    assert published.messages == []


def test_another_clients_batch_id_is_409(serve, store, published):
    _record(store, "orders-1", "acme", ["https://example.com/a"])

    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", headers=GLOBEX, json={
            "batch_id": "orders-1", "urls": ["https://example.com/a"]})
        assert response.status == 409
        assert "another client" in (await _json(response))["error"]

    serve(scenario)
    assert published.messages == []


def test_ten_thousand_and_one_urls_are_400_naming_the_limit(serve, published):
    urls = [f"https://example.com/{i}" for i in range(MAX_BATCH_URLS + 1)]

    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", json={"urls": urls}, headers=ACME)
        assert response.status == 400
        assert "at most 10,000 URLs" in (await _json(response))["error"]

    serve(scenario)
    assert published.messages == []


@pytest.mark.parametrize("body, message", [
    (b"{not json", "not JSON"),
    (b"\xff\xfe\xfa", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"urls": "https://example.com/"}', "list of strings"),
    (b'{"urls": ["https://example.com/"], "client": "globex"}', "unknown field"),
    (b'{"urls": ["https://example.com/"], "priority": "high"}', '"priority"'),
    (b'{"urls": ["https://example.com/"], "priority": true}', '"priority"'),
    (b'{"urls": ["https://example.com/"], "milestone_step": 250}', "0-100"),
    (b'{"urls": ["https://example.com/"], "notify": "ftp://x"}', "http(s)"),
    (b'{"urls": []}', "at least one URL"),
])
def test_a_bad_body_is_400_with_the_reason(serve, published, body, message):
    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", data=body, headers=ACME)
        assert response.status == 400
        assert message in (await _json(response))["error"]

    serve(scenario)
    assert published.messages == []


def test_a_body_over_the_limit_is_413(serve, published):
    async def scenario(client: TestClient) -> None:
        response = await client.post("/batches", data=b" " * (13 * 1024 * 1024),
                                     headers=ACME)
        assert response.status == 413

    serve(scenario)
    assert published.messages == []


# --- GET /batches/{id} -------------------------------------------------------------------------


def test_a_clients_own_batch_is_200_with_its_status(serve, store):
    _record(store, "orders-1", "acme", ["https://example.com/a", "https://example.com/b"])
    store.write_rows(BATCHES_TABLE, outcome_rows(
        [BatchEvent("orders-1", "https://example.com/a", "fetched", T0 + 1)]))

    async def scenario(client: TestClient) -> None:
        response = await client.get("/batches/orders-1", headers=ACME)
        assert response.status == 200
        doc = await _json(response)
        assert (doc["batch_id"], doc["client"], doc["state"]) == ("orders-1", "acme", "running")
        assert (doc["total"], doc["finished"], doc["percent"]) == (2, 1, 50.0)
        assert doc["outcomes"] == {"fetched": 1}

    serve(scenario)


def test_another_clients_batch_is_403(serve, store):
    _record(store, "orders-1", "acme", ["https://example.com/a"])

    async def scenario(client: TestClient) -> None:
        response = await client.get("/batches/orders-1", headers=GLOBEX)
        assert response.status == 403
        assert "another client" in (await _json(response))["error"]

    serve(scenario)


def test_an_unknown_batch_is_404(serve):
    async def scenario(client: TestClient) -> None:
        response = await client.get("/batches/never-submitted", headers=ACME)
        assert response.status == 404
        assert "no batch never-submitted" in (await _json(response))["error"]

    serve(scenario)


def test_submit_then_status_after_the_intake(serve, store, published):
    """The whole round: 202, the pipeline records the batch, the status is 200, and the same
    id again is 200 existing."""
    body = {"batch_id": "round-1", "urls": ["https://example.com/a"]}

    async def scenario(client: TestClient) -> None:
        assert (await client.post("/batches", json=body, headers=ACME)).status == 202
        assert (await client.get("/batches/round-1", headers=ACME)).status == 404
        spec, urls = decode_batch(published.messages[0][0])
        store.write_rows(BATCHES_TABLE, [record_row(prepare_batch(spec, urls), T0)])
        assert (await client.get("/batches/round-1", headers=ACME)).status == 200
        again = await client.post("/batches", json=body, headers=ACME)
        assert again.status == 200 and (await _json(again))["existing"] is True

    serve(scenario)
    assert len(published.messages) == 1


# --- spec_from_request -------------------------------------------------------------------------


def test_spec_from_request_takes_the_client_from_the_caller_and_defaults_the_rest():
    spec, urls = spec_from_request({"batch_id": "x1", "urls": ["https://example.com/"],
                                    "cache_hours": 1}, "acme")
    assert spec == BatchSpec("x1", "acme", 0, 1.0, None, 25)
    assert urls == ["https://example.com/"]


def test_spec_from_request_refuses_null_urls():
    with pytest.raises(BatchError):
        spec_from_request({"urls": None}, "acme")
