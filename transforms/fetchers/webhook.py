"""One webhook POST of a batch notification, behind the same SSRF guard as page fetches.

A client gives a ``notify`` URL with its batch; the crawler POSTs each notification body there
(``transforms.core.batches.notification_body``). The URL is client input, so it gets exactly the
treatment of a page URL: ``check_url_target`` before any network work, then a connector whose
resolver (``GuardedResolver``) and socket factory (``guarded_socket_factory``) refuse forbidden
addresses. Redirects are not followed: a hop would be a second target the client chose after the
check, and a receiver that answers 3xx has not taken the notification, so a 3xx is a failure.

The call is blocking because its caller is a DoFn and webhooks are rare (a few per batch): each
call runs its own short-lived event loop and session (``asyncio.run``), so nothing is shared
across threads and nothing stays open between calls. Retries and their spacing are the
caller's (``transforms.core.batches.retry_delay``, ``MAX_NOTIFY_ATTEMPTS``); one call is one
attempt, and it never raises for a network failure: the failure is returned, classified, in
``WebhookAttempt.error`` so the caller can record every attempt in the batch's row.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from transforms.core.batches import signature
from transforms.fetchers.ssrf import (
    SSRF_ERROR_KIND,
    GuardedResolver,
    check_url_target,
    guarded_socket_factory,
    is_ssrf_error,
)

DEFAULT_USER_AGENT = "beam-crawler/0.1 (batch notifications)"
SIGNATURE_HEADER = "X-Crawler-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_ERROR_CHARS = 300  # the error goes into a table cell with every other attempt

# Error kinds, the first word of ``WebhookAttempt.error``.
ERROR_HTTP = "http_status"
ERROR_REDIRECT = "redirect_not_followed"
ERROR_TIMEOUT = "timeout"
ERROR_CONNECT = "connect_error"
ERROR_INVALID_URL = "invalid_url"
ERROR_CLIENT = "client_error"


@dataclass(frozen=True)
class WebhookAttempt:
    """What one POST came to.

    Attributes:
        at: when the attempt started (seconds since the epoch).
        status: the HTTP status the receiver answered, or None when there was no answer.
        error: ``""`` on success, else ``"<kind>: <detail>"`` with a kind from this module's
            ``ERROR_*`` constants or ``SSRF_ERROR_KIND``.
        ok: True when the receiver answered 2xx: the notification was delivered.
    """

    at: float
    status: int | None
    error: str
    ok: bool


def webhook_headers(body: bytes, *, secret: str, idempotency_key: str,
                    user_agent: str = DEFAULT_USER_AGENT) -> dict[str, str]:
    """The request headers of a notification POST.

    The signature is over the exact bytes sent, so the receiver can check it before parsing;
    a client without a secret gets no signature header rather than one made with an empty key,
    which anyone could forge.
    """
    headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: idempotency_key,
               "User-Agent": user_agent}
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, body)
    return headers


def attempt_from_status(at: float, status: int) -> WebhookAttempt:
    """Judges a receiver's answer: 2xx delivered, 3xx not followed, anything else failed."""
    if 200 <= status < 300:
        return WebhookAttempt(at, status, "", True)
    kind = ERROR_REDIRECT if 300 <= status < 400 else ERROR_HTTP
    return WebhookAttempt(at, status, f"{kind}: {status}", False)


def describe_error(exc: BaseException, timeout: float) -> str:
    """``"<kind>: <detail>"`` for an exception of a POST, the SSRF guard's refusals first (they
    arrive wrapped in aiohttp's connector errors)."""
    if is_ssrf_error(exc):
        kind = SSRF_ERROR_KIND
    elif isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return f"{ERROR_TIMEOUT}: no answer within {timeout:g}s"
    elif isinstance(exc, aiohttp.InvalidURL):
        kind = ERROR_INVALID_URL
    elif isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ServerDisconnectedError
                    | ConnectionError):
        kind = ERROR_CONNECT
    else:
        kind = ERROR_CLIENT
    detail = str(exc) or type(exc).__name__
    return f"{kind}: {detail}"[:MAX_ERROR_CHARS]


def attempt_to_json(attempt: WebhookAttempt) -> dict[str, object]:
    """An attempt as the batches table's ``n:hook:<transition>`` cell lists it
    (``transforms.formats.batch_rows.hook_row``); ``ok`` follows from the status."""
    return {"at": round(attempt.at, 3), "status": attempt.status, "error": attempt.error}


def post_webhook(url: str, body: bytes, *, secret: str, idempotency_key: str,
                 allow_private_networks: bool, timeout: float = 10.0,
                 user_agent: str = DEFAULT_USER_AGENT) -> WebhookAttempt:
    """POSTs ``body`` to ``url`` once and reports what came of it.

    Args:
        url: the client's ``notify`` URL (http or https).
        body: the JSON body, exactly as signed and sent.
        secret: the client's signing secret; ``""`` sends no signature.
        idempotency_key: ``<batch id>:<transition>``; the same for every retry of one
            notification, so a receiver drops a delivery it has already taken.
        allow_private_networks: lift the SSRF guard (local stacks and tests only).
        timeout: seconds for the whole attempt, connecting included.
        user_agent: the User-Agent header.

    Returns:
        The attempt; ``ok`` only for a 2xx answer. Refusals by the SSRF guard, DNS and connect
        failures, timeouts and malformed URLs are returned in ``error``, never raised.

    Raises:
        RuntimeError: called on a thread that is running an event loop (it runs its own;
            a coroutine would use the guarded session directly).
    """
    at = time.time()
    refused = _refusal(url, allow_private_networks)
    if refused:
        return WebhookAttempt(at, None, refused, False)
    headers = webhook_headers(body, secret=secret, idempotency_key=idempotency_key,
                              user_agent=user_agent)
    try:
        status = asyncio.run(_post(url, body, headers, allow_private_networks, timeout))
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return WebhookAttempt(at, None, describe_error(exc, timeout), False)
    return attempt_from_status(at, status)


def _refusal(url: str, allow_private_networks: bool) -> str:
    """Why ``url`` gets no request at all (checked before any network work), or ``""``."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"{ERROR_INVALID_URL}: {exc}"[:MAX_ERROR_CHARS]
    if parts.scheme not in ("http", "https"):
        return f"{ERROR_INVALID_URL}: not an http(s) URL"
    if not parts.hostname:
        return f"{ERROR_INVALID_URL}: no host"
    reason = check_url_target(url, allow_private_networks=allow_private_networks)
    if reason is not None:
        return f"{SSRF_ERROR_KIND}: {parts.hostname or url} is {reason}"[:MAX_ERROR_CHARS]
    return ""


async def _post(url: str, body: bytes, headers: dict[str, str], allow_private_networks: bool,
                timeout: float) -> int:
    """The POST itself, on a fresh guarded connector; returns the status (the answer's body is
    not read: nothing in it changes what the crawler does)."""
    resolver = GuardedResolver(allow_private_networks=allow_private_networks)
    connector = aiohttp.TCPConnector(
        resolver=resolver, force_close=True,
        socket_factory=guarded_socket_factory(allow_private_networks=allow_private_networks))
    try:
        # trust_env=False: a proxy from the environment would connect on our behalf, past the
        # guard's resolver and socket factory.
        async with aiohttp.ClientSession(connector=connector, trust_env=False,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.post(url, data=body, headers=headers,
                                    allow_redirects=False) as response:
                return response.status
    finally:
        await resolver.close()  # a connector does not close a resolver it was given
