"""The client batch message (pure; no Beam): one Pub/Sub message on the frontier topic per batch.

Attribute ``kind=batch``; body (JSON, UTF-8)::

    {"v": 1,
     "batch": {"id": "orders-2026-11-25", "client": "acme", "priority": 0,
               "cache_hours": 24, "notify": "https://hooks.example.com/crawl",
               "milestone_step": 25},
     "urls": ["https://example.com/a", "https://example.com/b", ...]}

Only ``batch.client`` and ``urls`` are required (``batch.sent``, the batch's size as the client
sent it, is set by ``crawler submit`` and the API, which send each URL once); a missing ``id``
is made from the message's content (the same body gets the same id, so a redelivery is the
same batch). ``urls`` are sent as the client has them: the pipeline checks and normalizes them with
``transforms.core.batches.prepare_batch``, as ``crawler submit`` and ``crawler api`` do before
they publish, and records the invalid ones as the batch's ``invalid`` outcomes. At most
``MAX_BATCH_URLS`` (10,000) URLs; the message must fit Pub/Sub's 10 MB.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import NamedTuple

from transforms.core.batches import BatchSpec, PreparedBatch, check_spec
from transforms.formats.messages import KIND_ATTRIBUTE, MAX_MESSAGE_BYTES, BadMessage

BATCH_KIND = "batch"


def is_batch(attributes: Mapping[str, str] | None, data: bytes) -> bool:
    """A batch message: ``kind=batch``, or a JSON body with a ``batch`` object."""
    if (attributes or {}).get(KIND_ATTRIBUTE) == BATCH_KIND:
        return True
    head = data[:64].lstrip()
    return head.startswith(b"{") and b'"batch"' in data[:4096]


def spec_to_json(spec: BatchSpec) -> dict[str, object]:
    doc: dict[str, object] = {"id": spec.batch_id, "client": spec.client,
                              "priority": spec.priority, "milestone_step": spec.milestone_step}
    if spec.cache_hours is not None:
        doc["cache_hours"] = spec.cache_hours
    if spec.notify is not None:
        doc["notify"] = spec.notify
    return doc


def spec_from_json(doc: Mapping[str, object], default_id: str) -> BatchSpec:
    """Reads the ``batch`` object (BatchError for values ``check_spec`` refuses)."""
    client = doc.get("client")
    if not isinstance(client, str):
        raise BadMessage('"batch" needs a "client" string')
    try:
        cache = doc.get("cache_hours")
        notify = doc.get("notify")
        spec = BatchSpec(batch_id=str(doc.get("id") or default_id), client=client,
                         priority=int(str(doc.get("priority", 0))),
                         cache_hours=None if cache is None else float(str(cache)),
                         notify=None if notify is None else str(notify),
                         milestone_step=int(str(doc.get("milestone_step", 25))))
    except ValueError as exc:
        raise BadMessage(f'"batch": {exc}') from exc
    check_spec(spec)
    return spec


def encode_batch(spec: BatchSpec, urls: list[str], sent: int | None = None
                 ) -> tuple[bytes, dict[str, str]]:
    """A batch message (body, attributes); ``sent``: the batch's size as the client sent it,
    when ``urls`` are already deduplicated.

    Raises:
        BadMessage: the body would not fit one Pub/Sub message.
    """
    header = spec_to_json(spec)
    if sent is not None:
        header["sent"] = sent
    body = json.dumps({"v": 1, "batch": header, "urls": urls},
                      separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_MESSAGE_BYTES:
        raise BadMessage(f"the batch is {len(body):,} bytes as a message; Pub/Sub takes "
                         f"{MAX_MESSAGE_BYTES:,}: split it into smaller batches")
    return body, {KIND_ATTRIBUTE: BATCH_KIND, "batch": spec.batch_id, "client": spec.client}


def encode_prepared(batch: PreparedBatch) -> tuple[bytes, dict[str, str]]:
    """The message of a checked batch: its valid URLs (canonical) and its invalid ones as sent,
    so the pipeline records the same outcomes."""
    return encode_batch(batch.spec, list(batch.urls) + [url for url, _ in batch.invalid],
                        batch.sent)


class BatchMessage(NamedTuple):
    spec: BatchSpec
    urls: list[str]
    sent: int | None  # the size as the client sent it (``batch.sent``), when given


def decode_batch(data: bytes) -> tuple[BatchSpec, list[str]]:
    """Reads a batch message's spec and URLs (:func:`decode_batch_message`)."""
    message = decode_batch_message(data)
    return message.spec, message.urls


def decode_batch_message(data: bytes) -> BatchMessage:
    """Reads a batch message.

    Raises:
        BadMessage: not the format above.
        BatchError: a batch id, client or option that cannot be used.
    """
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadMessage(f"a batch message must be JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("batch"), dict):
        raise BadMessage('a batch message needs a "batch" object')
    urls = doc.get("urls")
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise BadMessage('a batch message needs a "urls" list of strings')
    default_id = "b-" + hashlib.sha256(data).hexdigest()[:20]
    sent = doc["batch"].get("sent")
    if sent is not None and (not isinstance(sent, int) or isinstance(sent, bool)
                             or sent < len(urls)):
        raise BadMessage('"batch.sent" must be an integer, at least the number of URLs')
    return BatchMessage(spec_from_json(doc["batch"], default_id), urls, sent)
