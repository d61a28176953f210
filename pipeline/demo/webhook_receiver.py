"""A real webhook receiver on loopback, for tests and demos of batch notifications.

It behaves like a careful client's endpoint: it checks ``X-Crawler-Signature`` over the raw
body before parsing anything (401 when it does not verify), answers 400 to a body that is not
JSON, and takes a redelivery (an ``Idempotency-Key`` it has accepted before) with a 200 without
counting it again. It can be told to answer 500 to its first N POSTs, to exercise the crawler's
retries. Every POST is recorded, whatever the answer, so a test asserts from the receiver's side
how many attempts arrived and what they carried.

The server runs on its own event loop in a daemon thread, like ``pipeline.demo.server``, so a
blocking caller (a DoFn, a test) can POST to it from any thread.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType

from aiohttp import web

from transforms.core.batches import verify_signature

SIGNATURE_HEADER = "x-crawler-signature"
IDEMPOTENCY_HEADER = "idempotency-key"
_CALL_TIMEOUT = 10.0  # seconds to start or stop the server on its loop thread


@dataclass(frozen=True)
class ReceivedPost:
    """One POST the receiver got.

    Attributes:
        at: ``time.time()`` once the body had been read.
        path: the request-target as sent.
        headers: the request's header fields, names lower-cased.
        body: the raw body.
        status: what the receiver answered (500 forced failure, 401 bad signature, 400 not
            JSON, 200 accepted).
        signature_ok: the signature verified (always True when the receiver has no secret).
        redelivery: accepted, with an ``Idempotency-Key`` accepted before.
    """

    at: float
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    signature_ok: bool
    redelivery: bool

    @property
    def accepted(self) -> bool:
        return self.status == 200


class WebhookReceiver:
    """A webhook endpoint on ``127.0.0.1`` at a free port.

    Example::

        with WebhookReceiver(secret="s3cret", fail_first=2) as hook:
            post_webhook(hook.url, body, secret="s3cret", ...)  # 500
            ...
            assert hook.accepted_bodies() == [json.loads(body)]

    Args:
        secret: the client's signing secret; ``""`` means the client signs nothing, and no
            signature is checked.
        fail_first: answer 500 to this many POSTs before behaving normally.
        path: the path the receiver listens on (POSTs elsewhere get 404).
    """

    def __init__(self, secret: str = "", *, fail_first: int = 0, path: str = "/hook") -> None:
        self.secret = secret
        self.fail_first = fail_first
        self.path = path
        self._received: list[ReceivedPost] = []
        self._accepted_keys: set[str] = set()
        self._failed = 0  # forced 500s sent so far (not reset by clear())
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def url(self) -> str:
        """The URL to give as a batch's ``notify``.

        Raises:
            RuntimeError: the receiver is not running.
        """
        if self._runner is None:
            raise RuntimeError("start() the receiver first")
        return f"http://127.0.0.1:{self._port}{self.path}"

    def start(self) -> str:
        """Starts serving (idempotent) and returns :attr:`url`."""
        if self._runner is not None:
            return self.url
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="webhook-receiver",
                                  daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._runner = asyncio.run_coroutine_threadsafe(
                self._serve(sock), loop).result(_CALL_TIMEOUT)
        except BaseException:
            sock.close()
            self.stop()
            raise
        return self.url

    def stop(self) -> None:
        """Stops serving and closes the loop (idempotent); what was received stays."""
        loop, thread, runner = self._loop, self._thread, self._runner
        self._loop = self._thread = self._runner = None
        if loop is None or thread is None:
            return
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(_CALL_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=_CALL_TIMEOUT)
        loop.close()

    def __enter__(self) -> WebhookReceiver:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def received(self) -> list[ReceivedPost]:
        """Every POST so far, in arrival order, whatever it was answered."""
        with self._changed:
            return list(self._received)

    def accepted_bodies(self) -> list[object]:
        """The parsed bodies of accepted POSTs, one per ``Idempotency-Key`` (redeliveries
        left out: see :meth:`redeliveries`), in arrival order."""
        return [json.loads(p.body) for p in self.received if p.accepted and not p.redelivery]

    def redeliveries(self) -> int:
        """How many accepted POSTs repeated an ``Idempotency-Key`` accepted before."""
        return sum(1 for p in self.received if p.accepted and p.redelivery)

    def wait_for_accepted(self, count: int, timeout: float = 10.0) -> bool:
        """Waits until ``count`` distinct notifications have been accepted; False on timeout
        (a pipeline POSTs from its own threads, after the test has moved on)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: sum(1 for p in self._received if p.accepted and not p.redelivery)
                >= count, timeout)

    def clear(self) -> None:
        """Forgets what was received (and which keys were accepted)."""
        with self._changed:
            self._received.clear()
            self._accepted_keys.clear()

    async def _serve(self, sock: socket.socket) -> web.AppRunner:
        app = web.Application()
        app.router.add_post(self.path, self._on_post)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.05)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        return runner

    async def _on_post(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        with self._changed:
            post = self._judge(request.raw_path, headers, body)
            self._received.append(post)
            self._changed.notify_all()
        return web.Response(status=post.status, text=_REASONS[post.status])

    def _judge(self, path: str, headers: dict[str, str], body: bytes) -> ReceivedPost:
        """Decides the answer to one POST (under the lock: the failure budget and the set of
        accepted keys are shared by concurrent POSTs)."""
        signed = not self.secret or verify_signature(self.secret, body,
                                                     headers.get(SIGNATURE_HEADER))
        redelivery = False
        if self._failed < self.fail_first:
            self._failed += 1
            status = 500
        elif not signed:
            status = 401
        elif not _is_json(body):
            status = 400
        else:
            status = 200
            key = headers.get(IDEMPOTENCY_HEADER, "")
            redelivery = bool(key) and key in self._accepted_keys
            if key:
                self._accepted_keys.add(key)
        return ReceivedPost(time.time(), path, headers, body, status, signed, redelivery)


_REASONS = {200: "accepted", 400: "body is not JSON", 401: "signature does not verify",
            500: "failing on purpose"}


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True
