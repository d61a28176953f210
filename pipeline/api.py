"""The batch API (``crawler api``): clients submit batches and read their status over HTTP.

    POST /batches        {"urls": [...], "batch_id"?, "priority"?, "cache_hours"?, "notify"?,
                          "milestone_step"?}
                         202 {"batch_id", "sent", "unique", "invalid"}  published
                         200 {"batch_id", "existing": true}            the id is recorded already
                         400 {"error"}  bad JSON, a bad field, more than 10,000 URLs, ...
                         409 {"error"}  the id is another client's
    GET  /batches/{id}   200 the status (``pipeline.ops.batches.status_doc``); 404 not recorded
                         (yet); 403 another client's batch
    GET  /healthz        200 {"ok": true}, without a token (for load balancers and probes)

Every ``/batches`` request carries ``Authorization: Bearer <token>``; the token names the client
(``transforms.core.clients``), so a client never says who it is in the body and cannot act for
another one. A missing or unknown token is 401.

The API publishes and reads through ``pipeline.ops.batches``, the same functions as
``crawler submit`` and ``crawler batch status``. Pub/Sub and Bigtable calls block, so they run
in worker threads; the event loop only parses and answers. Bodies are bounded
(``MAX_BODY_BYTES``: 10,000 long URLs fit, anything much larger is refused with 413 before it is
read whole).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from pipeline.ops.batches import BatchIdTaken, BatchTable, Publish, batch_status, submit_batch
from transforms.core.batches import DEFAULT_MILESTONE_STEP, BatchError, BatchSpec, new_batch_id
from transforms.core.clients import ClientConfig, client_for_token
from transforms.formats.schema import BATCHES_TABLE

MAX_BODY_BYTES = 12 * 1024 * 1024
FIELDS = frozenset({"urls", "batch_id", "priority", "cache_hours", "notify", "milestone_step"})


def spec_from_request(doc: object, client: str) -> tuple[BatchSpec, list[str]]:
    """The batch a ``POST /batches`` body asks for, for ``client`` (the token's).

    Types are checked here; values (id, step, cache hours, webhook, URL count) by
    ``prepare_batch``, as for every other way in.

    Raises:
        BatchError: not an object, an unknown field, or a field of the wrong type.
    """
    if not isinstance(doc, dict):
        raise BatchError("the body must be a JSON object")
    unknown = sorted(set(doc) - FIELDS)
    if unknown:
        raise BatchError(f"unknown field(s): {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(FIELDS))}")
    urls = doc.get("urls")
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise BatchError('"urls" must be a list of strings')
    batch_id = _typed(doc, "batch_id", str, None)
    cache_hours = _typed(doc, "cache_hours", (int, float), None)
    spec = BatchSpec(batch_id=batch_id or new_batch_id(), client=client,
                     priority=_typed(doc, "priority", int, 0),
                     cache_hours=None if cache_hours is None else float(cache_hours),
                     notify=_typed(doc, "notify", str, None),
                     milestone_step=_typed(doc, "milestone_step", int, DEFAULT_MILESTONE_STEP))
    return spec, urls


def _typed(doc: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any
           ) -> Any:
    """``doc[name]`` if it has the type (JSON ``true`` is not a number), ``default`` if it is
    missing or null."""
    value = doc.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, kind):
        raise BatchError(f'"{name}" has the wrong type ({type(value).__name__})')
    return value


def _json_error(cls: type[web.HTTPException], message: str, **kwargs: Any) -> web.HTTPException:
    return cls(text=json.dumps({"error": message}), content_type="application/json", **kwargs)


class _BatchApi:
    """The handlers, with what they share: the clients, the publisher, the store, the clock."""

    def __init__(self, clients: Mapping[str, ClientConfig], publish: Publish, store: BatchTable,
                 table: str, clock: Callable[[], float]) -> None:
        self.clients = clients
        self.publish = publish
        self.store = store
        self.table = table
        self.clock = clock

    def client(self, request: web.Request) -> ClientConfig:
        """The client of the request's bearer token; 401 without one that is known."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        found = (client_for_token(self.clients, token)
                 if scheme.lower() == "bearer" and token else None)
        if found is None:
            raise _json_error(web.HTTPUnauthorized, "a valid bearer token is required",
                              headers={"WWW-Authenticate": 'Bearer realm="crawler"'})
        return found

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def submit(self, request: web.Request) -> web.Response:
        client = self.client(request)
        try:
            spec, urls = spec_from_request(json.loads(await request.read()), client.name)
            result = await asyncio.to_thread(submit_batch, spec, urls, publish=self.publish,
                                             store=self.store, table=self.table)
        except BatchIdTaken as exc:
            raise _json_error(web.HTTPConflict, str(exc)) from exc
        except BatchError as exc:
            raise _json_error(web.HTTPBadRequest, str(exc)) from exc
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError: not a JSON body
            raise _json_error(web.HTTPBadRequest, f"the body is not JSON: {exc}") from exc
        location = {"Location": f"/batches/{result.batch_id}"}
        if result.existing:
            return web.json_response({"batch_id": result.batch_id, "existing": True},
                                     headers=location)
        return web.json_response({"batch_id": result.batch_id, "sent": result.sent,
                                  "unique": result.unique, "invalid": result.invalid},
                                 status=202, headers=location)

    async def status(self, request: web.Request) -> web.Response:
        client = self.client(request)
        batch_id = request.match_info["batch_id"]
        doc = await asyncio.to_thread(batch_status, self.store, batch_id, self.clock(),
                                      self.table)
        if doc is None:
            raise _json_error(web.HTTPNotFound, f"no batch {batch_id} (never submitted, or "
                              "not yet taken in by the pipeline)")
        if doc["client"] != client.name:
            raise _json_error(web.HTTPForbidden, f"batch {batch_id} is another client's")
        return web.json_response(doc)


def make_app(clients: Mapping[str, ClientConfig], publish: Publish, store: BatchTable, *,
             table: str = BATCHES_TABLE, clock: Callable[[], float] = time.time
             ) -> web.Application:
    """The API as an aiohttp application.

    Args:
        clients: who may call it (``parse_clients`` of the clients file).
        publish: sends a batch message on the frontier topic (``pubsub_publisher``).
        store: where the batches table is read (``BigtableStoreSpec(...).open()``).
        table: the batches table's name in ``store``.
        clock: seconds since the epoch, for the ETA.
    """
    api = _BatchApi(clients, publish, store, table, clock)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_get("/healthz", api.healthz)
    app.router.add_post("/batches", api.submit)
    app.router.add_get("/batches/{batch_id}", api.status)
    return app


def serve(clients: Mapping[str, ClientConfig], publish: Publish, store: BatchTable, *,
          host: str, port: int, table: str = BATCHES_TABLE) -> None:
    """Runs the API until interrupted (SIGINT/SIGTERM)."""
    web.run_app(make_app(clients, publish, store, table=table), host=host, port=port)
