"""One webhook POST (transforms.fetchers.webhook) against the real loopback receiver
(pipeline.demo.webhook_receiver): headers and signature, failures returned not raised, no
redirects, and the SSRF guard refusing before any connection."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from pipeline.demo.exchange import Reply, RequestView
from pipeline.demo.server import LoggedServers
from pipeline.demo.webhook_receiver import WebhookReceiver
from transforms.core.batches import signature, verify_signature
from transforms.fetchers.ssrf import SSRF_ERROR_KIND
from transforms.fetchers.webhook import (
    DEFAULT_USER_AGENT,
    ERROR_CONNECT,
    ERROR_HTTP,
    ERROR_INVALID_URL,
    ERROR_REDIRECT,
    ERROR_TIMEOUT,
    WebhookAttempt,
    attempt_from_status,
    attempt_to_json,
    post_webhook,
    webhook_headers,
)

SECRET = "s3cret"
BODY = json.dumps({"idempotency_key": "b-1:done", "batch_id": "b-1", "transition": "done",
                   "finished": 3, "total": 3}).encode()
KEY = "b-1:done"


def _post(url: str, *, secret: str = SECRET, key: str = KEY, allow: bool = True,
          timeout: float = 5.0) -> WebhookAttempt:
    return post_webhook(url, BODY, secret=secret, idempotency_key=key,
                        allow_private_networks=allow, timeout=timeout)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver(secret=SECRET) as hook:
        yield hook


def test_a_delivered_post_carries_a_signature_the_receiver_verifies(receiver):
    attempt = _post(receiver.url)

    assert (attempt.ok, attempt.status, attempt.error) == (True, 200, "")
    [post] = receiver.received
    assert post.signature_ok
    assert verify_signature(SECRET, post.body, post.headers["x-crawler-signature"])
    assert post.body == BODY
    assert post.headers["x-crawler-signature"] == signature(SECRET, BODY)
    assert post.headers["content-type"] == "application/json"
    assert post.headers["idempotency-key"] == KEY
    assert post.headers["user-agent"] == DEFAULT_USER_AGENT
    assert receiver.accepted_bodies() == [json.loads(BODY)]


def test_a_client_without_a_secret_gets_no_signature_header():
    assert "X-Crawler-Signature" not in webhook_headers(BODY, secret="", idempotency_key=KEY)
    with WebhookReceiver() as hook:
        assert _post(hook.url, secret="").ok
        [post] = hook.received
    assert "x-crawler-signature" not in post.headers


def test_a_signature_made_with_another_secret_is_refused(receiver):
    attempt = _post(receiver.url, secret="not-the-secret")

    assert (attempt.ok, attempt.status) == (False, 401)
    assert attempt.error == f"{ERROR_HTTP}: 401"
    assert not receiver.received[0].signature_ok
    assert receiver.accepted_bodies() == []


def test_a_receiver_failing_its_first_two_posts_gets_the_third():
    with WebhookReceiver(secret=SECRET, fail_first=2) as hook:
        attempts = [_post(hook.url) for _ in range(3)]
        received = hook.received

    assert [(a.ok, a.status) for a in attempts] == [(False, 500), (False, 500), (True, 200)]
    assert [a.error for a in attempts] == [f"{ERROR_HTTP}: 500"] * 2 + [""]
    assert [p.status for p in received] == [500, 500, 200]
    assert {p.headers["idempotency-key"] for p in received} == {KEY}  # one notification
    assert hook.accepted_bodies() == [json.loads(BODY)]


def test_a_redelivery_is_accepted_and_counted_apart(receiver):
    assert _post(receiver.url).ok
    assert _post(receiver.url).ok
    assert _post(receiver.url, key="b-1:25%").ok

    assert receiver.redeliveries() == 1
    assert len(receiver.accepted_bodies()) == 2
    assert receiver.wait_for_accepted(2, timeout=0.1)
    assert not receiver.wait_for_accepted(3, timeout=0.1)


def test_a_redirect_is_not_followed_and_fails(receiver):
    def respond(view: RequestView) -> Reply:
        return Reply(status=307, headers=(("Location", receiver.url),))

    with LoggedServers() as servers:
        base = servers.serve("127.0.0.1", respond)
        attempt = _post(f"{base}/hook")
        hits = servers.hits(base)

    assert (attempt.ok, attempt.status) == (False, 307)
    assert attempt.error.startswith(ERROR_REDIRECT)
    assert [(h.method, h.path) for h in hits] == [("POST", "/hook")]
    assert receiver.received == []  # the hop's target never heard of it


def test_a_loopback_target_is_refused_before_any_connection(receiver):
    attempt = _post(receiver.url, allow=False)

    assert (attempt.ok, attempt.status) == (False, None)
    assert attempt.error.startswith(f"{SSRF_ERROR_KIND}: 127.0.0.1 is loopback")
    assert receiver.received == []


@pytest.mark.parametrize("url", [
    "http://localhost:9/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/",
    "http://2130706433/",  # 127.0.0.1 spelled as a number
    "http://[::1]/hook",
])
def test_forbidden_targets_are_refused_without_network(url):
    attempt = _post(url, allow=False)

    assert not attempt.ok
    assert attempt.error.startswith(SSRF_ERROR_KIND)


def test_a_refused_connection_is_returned_not_raised():
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    attempt = _post(f"http://127.0.0.1:{port}/hook")

    assert (attempt.ok, attempt.status) == (False, None)
    assert attempt.error.startswith(ERROR_CONNECT)


def test_a_receiver_too_slow_to_answer_is_a_timeout():
    with LoggedServers() as servers:
        base = servers.serve("127.0.0.1", lambda view: Reply(status=200, delay=2.0))
        attempt = _post(f"{base}/hook", timeout=0.3)

    assert (attempt.ok, attempt.status) == (False, None)
    assert attempt.error.startswith(ERROR_TIMEOUT)


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "not a url", "http:///hook",
                                 "http://[::1/hook"])
@pytest.mark.parametrize("allow", [True, False])
def test_urls_that_cannot_be_posted_to_are_reported(url, allow):
    attempt = _post(url, allow=allow)

    assert not attempt.ok
    assert attempt.error.startswith(ERROR_INVALID_URL)


@pytest.mark.parametrize(("status", "ok", "error"), [
    (200, True, ""),
    (204, True, ""),
    (301, False, f"{ERROR_REDIRECT}: 301"),
    (404, False, f"{ERROR_HTTP}: 404"),
    (503, False, f"{ERROR_HTTP}: 503"),
])
def test_only_2xx_counts_as_delivered(status, ok, error):
    assert attempt_from_status(1.0, status) == WebhookAttempt(1.0, status, error, ok)


def test_an_attempt_as_the_batches_table_stores_it():
    attempt = WebhookAttempt(1714564800.12345, 500, f"{ERROR_HTTP}: 500", False)

    assert attempt_to_json(attempt) == {"at": 1714564800.123, "status": 500,
                                        "error": f"{ERROR_HTTP}: 500"}
    assert json.loads(json.dumps(attempt_to_json(attempt))) == attempt_to_json(attempt)
