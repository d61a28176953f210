"""The payload digest of a fetched body, computed once per fetch (pure).

``sha1:`` + base32 of the SHA-1 of the payload as sent (content-coding intact): the form WARC
digests take, so the webtable's ``f:checksum`` equals the record's ``WARC-Payload-Digest`` and
can be matched against WARC files. The fetch service computes it when a body arrives
(``FetchResult.payload_digest``); recrawl change detection, the parsed page and the WARC writer
(which then skips its own payload digest) all read it from there.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib

from transforms.core.records import FetchResult


def payload_digest(body: bytes) -> str:
    """e.g. ``sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ`` (32 base32 characters) for ``b""``."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


def with_digest(result: FetchResult) -> FetchResult:
    """``result`` with its payload digest set, if it has a body and no digest yet."""
    if result.body is None or result.payload_digest is not None:
        return result
    return dataclasses.replace(result, payload_digest=payload_digest(result.body))


def digest_of(result: FetchResult) -> str | None:
    """The result's payload digest: the one computed at fetch time, or (for a result built
    elsewhere, e.g. in a test) computed now; None without a body."""
    if result.payload_digest is not None:
        return result.payload_digest
    return payload_digest(result.body) if result.body is not None else None
