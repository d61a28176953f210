"""The frontier topic's message format (pure; no Beam).

A message carries many crawl requests, normally of one host (``crawler seed`` and the link loop
group by host), as JSON::

    {"v": 1, "requests": [{"url": "https://example.com/", "depth": 0, "priority": 0,
                           "from": null}, ...]}

Optional item fields: ``attempt``, ``kind`` (``sitemap`` or ``sitemap_child`` for sitemap
fetches; absent for pages), ``via`` (the robots.txt that named a sitemap), ``lastmod`` (a
sitemap's lastmod of the URL, seconds since the epoch), ``revisit`` (internal: why the
frontier visits a known URL again; the frontier index stores requests in this format too), and
for a client batch's URLs ``batches`` (batch ids), ``client`` and ``cache_hours``.

A client batch is one message of its own, ``transforms.formats.batch_messages``.

DUST evidence (``transforms.core.dust``) travels the same loop, to the key of the URL that showed
it: ``{"v": 1, "requests": [], "rules": [{"url": ..., "action": "sort"|"drop", "path": ...,
"param": ..., "digest": ...}]}``.

with attributes ``kind=crawl`` and ``host=<politeness key>`` (informational). The crawl loop adds
``discovered_at`` (seconds since the epoch, the earliest fetch time of the pages whose links the
message carries), from which the frontier measures the loop's latency. So that any Pub/Sub
client can seed the crawler, a body that is not JSON is read as URLs, one per line, with optional
``depth`` and ``priority`` attributes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from transforms.core.records import (
    KIND_PAGE,
    REVISITS,
    RULE_DROP,
    RULE_SORT,
    SITEMAP_KINDS,
    CrawlRequest,
    UrlRule,
)
from transforms.core.url_keys import politeness_key

MESSAGE_VERSION = 1
KIND_ATTRIBUTE = "kind"
HEARTBEAT_KIND = "heartbeat"  # local runs only: keeps the DirectRunner's Pub/Sub read from blocking
DISCOVERED_AT_ATTRIBUTE = "discovered_at"
MAX_REQUESTS_PER_MESSAGE = 1000
MAX_MESSAGE_BYTES = 9 * 1024 * 1024  # Pub/Sub accepts 10 MB


class BadMessage(ValueError):
    """A message that cannot be read as crawl requests."""


def request_to_item(r: CrawlRequest) -> dict[str, object]:
    """One request as a JSON object: the message format's item (defaults left out)."""
    item: dict[str, object] = {"url": r.url, "depth": r.depth, "priority": r.priority}
    if r.discovered_from is not None:
        item["from"] = r.discovered_from
    if r.attempt:
        item["attempt"] = r.attempt
    if r.kind != KIND_PAGE:
        item["kind"] = r.kind
    if r.via is not None:
        item["via"] = r.via
    if r.lastmod is not None:
        item["lastmod"] = r.lastmod
    if r.revisit:
        item["revisit"] = r.revisit
    if r.batches:
        item["batches"] = list(r.batches)
    if r.client:
        item["client"] = r.client
    if r.cache_hours is not None:
        item["cache_hours"] = r.cache_hours
    return item


def request_from_item(item: Mapping[str, object]) -> CrawlRequest:
    """The inverse of :func:`request_to_item`.

    Raises:
        BadMessage: a field has the wrong type or value.
    """
    url = item.get("url")
    if not isinstance(url, str):
        raise BadMessage('a request needs a "url" string')
    kind = item.get("kind", KIND_PAGE)
    if kind != KIND_PAGE and kind not in SITEMAP_KINDS:
        raise BadMessage(f"unknown kind {kind!r}")
    revisit = item.get("revisit", "")
    if revisit and revisit not in REVISITS:
        raise BadMessage(f"unknown revisit {revisit!r}")
    lastmod, source, via = item.get("lastmod"), item.get("from"), item.get("via")
    batches, cache = item.get("batches", []), item.get("cache_hours")
    if not isinstance(batches, list) or not all(isinstance(b, str) for b in batches):
        raise BadMessage('"batches" must be a list of batch ids')
    try:
        return CrawlRequest(url=url, depth=_integer(item.get("depth", 0)),
                            priority=_integer(item.get("priority", 0)),
                            discovered_from=None if source is None else str(source),
                            attempt=_integer(item.get("attempt", 0)),
                            kind=str(kind), via=None if via is None else str(via),
                            lastmod=None if lastmod is None else float(str(lastmod)),
                            revisit=str(revisit), batches=tuple(batches),
                            client=str(item.get("client", "")),
                            cache_hours=None if cache is None else float(str(cache)))
    except (TypeError, ValueError) as exc:
        raise BadMessage(str(exc)) from exc


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"not an integer: {value!r}")
    return int(value)


def encode_requests(requests: Iterable[CrawlRequest]) -> bytes:
    """Encodes requests as one message body (the caller keeps them to one host and <= 1000)."""
    items = [request_to_item(r) for r in requests]
    return json.dumps({"v": MESSAGE_VERSION, "requests": items}, separators=(",", ":")).encode()


def _int_attr(attributes: Mapping[str, str], name: str) -> int:
    value = attributes.get(name, "0")
    try:
        return int(value)
    except ValueError as exc:
        raise BadMessage(f"attribute {name}={value!r} is not an integer") from exc


def is_heartbeat(attributes: Mapping[str, str] | None) -> bool:
    """True for the local runner's heartbeat messages, which carry no requests."""
    return (attributes or {}).get(KIND_ATTRIBUTE) == HEARTBEAT_KIND


Evidence = tuple[str, UrlRule, str]  # (URL that showed it, rule, content digest)


def decode_requests(data: bytes, attributes: Mapping[str, str] | None = None) -> list[CrawlRequest]:
    """Reads a message body into requests (URLs not yet canonicalized).

    Raises:
        BadMessage: for a body that is neither the JSON format nor text, or malformed entries.
    """
    return decode_message(data, attributes)[0]


def decode_message(data: bytes, attributes: Mapping[str, str] | None = None
                   ) -> tuple[list[CrawlRequest], list[Evidence]]:
    """Reads a message body into its requests and its DUST evidence.

    Raises:
        BadMessage: for a body that is neither the JSON format nor text, or malformed entries.
    """
    attributes = attributes or {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadMessage(f"body is not UTF-8: {exc}") from exc
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        depth, priority = _int_attr(attributes, "depth"), _int_attr(attributes, "priority")
        urls = [line.strip() for line in text.splitlines() if line.strip()]
        if not urls:
            raise BadMessage("empty message")
        return [CrawlRequest(url=u, depth=depth, priority=priority) for u in urls], []
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise BadMessage(f"invalid JSON: {exc}") from exc
    items = doc.get("requests") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise BadMessage('JSON body needs a "requests" list')
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            raise BadMessage(f'requests[{i}] needs a "url" string')
        try:
            out.append(request_from_item(item))
        except BadMessage as exc:
            raise BadMessage(f"requests[{i}]: {exc}") from exc
    return out, _evidence_of(doc.get("rules", []))


def _evidence_of(items: object) -> list[Evidence]:
    if not isinstance(items, list):
        raise BadMessage('"rules" must be a list')
    out = []
    for i, item in enumerate(items):
        fields = [item.get(k) if isinstance(item, dict) else None
                  for k in ("url", "action", "path", "param", "digest")]
        if not all(isinstance(f, str) for f in fields) or fields[1] not in (RULE_SORT,
                                                                            RULE_DROP):
            raise BadMessage(f"rules[{i}] needs url, action (sort|drop), path, param, digest")
        url, action, path, param, digest = (str(f) for f in fields)
        out.append((url, UrlRule(path, action, param), digest))
    return out


def evidence_messages(evidence: Iterable[Evidence]) -> list[Message]:
    """Frontier messages carrying DUST evidence, one per politeness key of the URLs."""
    by_host: dict[str, list[dict[str, str]]] = {}
    for url, rule, digest in evidence:
        by_host.setdefault(politeness_key(url), []).append(
            {"url": url, "action": rule.action, "path": rule.path, "param": rule.param,
             "digest": digest})
    return [(json.dumps({"v": MESSAGE_VERSION, "requests": [], "rules": items},
                        separators=(",", ":")).encode(), {"kind": "crawl", "host": host})
            for host, items in by_host.items()]


def chunk(requests: list[CrawlRequest], size: int = MAX_REQUESTS_PER_MESSAGE
          ) -> Iterable[list[CrawlRequest]]:
    """Splits a host's requests into message-sized lists."""
    for i in range(0, len(requests), size):
        yield requests[i:i + size]


# Set by a source that leaves acknowledgement to the pipeline (``pipeline.local.pubsub_read`` on
# the DirectRunner): the message's ack id.
ACK_ID_ATTRIBUTE = "crawler-ack-id"
Message = tuple[bytes, dict[str, str]]  # a Pub/Sub message's data and attributes


def host_messages(requests: Iterable[CrawlRequest], discovered_at: float | None = None
                  ) -> list[Message]:
    """Frontier messages for ``requests``: grouped by politeness key, each URL once, at most
    ``MAX_REQUESTS_PER_MESSAGE`` per message, with ``kind`` and ``host`` attributes (and
    ``discovered_at`` when given)."""
    by_host: dict[str, dict[str, CrawlRequest]] = {}
    for request in requests:
        by_host.setdefault(politeness_key(request.url), {}).setdefault(request.url, request)
    extra = {} if discovered_at is None else {DISCOVERED_AT_ATTRIBUTE: f"{discovered_at:.3f}"}
    return [(encode_requests(part), {"kind": "crawl", "host": host, **extra})
            for host, unique in by_host.items() for part in chunk(list(unique.values()))]


def discovered_at_of(attributes: Mapping[str, str] | None) -> float | None:
    """The ``discovered_at`` attribute of a loop message, or None (absent or unreadable)."""
    value = (attributes or {}).get(DISCOVERED_AT_ATTRIBUTE)
    try:
        return float(value) if value else None
    except ValueError:
        return None
