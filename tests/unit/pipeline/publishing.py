"""A stand-in for a Pub/Sub publisher that keeps what it was given (batch API and CLI tests)."""

from __future__ import annotations

from collections.abc import Mapping


class Published:
    """A ``pipeline.ops.batches.Publish`` that records each message instead of sending it."""

    def __init__(self) -> None:
        self.messages: list[tuple[bytes, dict[str, str]]] = []

    def __call__(self, data: bytes, attributes: Mapping[str, str]) -> None:
        self.messages.append((data, dict(attributes)))
