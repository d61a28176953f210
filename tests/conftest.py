"""Shared fixtures. ``local_stack`` runs the Google Cloud emulators for the whole test session.

Integration tests anywhere under ``tests/`` ask for ``local_stack``; the emulators start once
(about 4 s), the client libraries see them through ``os.environ`` for the session, and they are
stopped at the end. Without the SDK components the tests that need them are skipped, with the
install commands in the reason; under CI (``CI`` set) they fail instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.local.stack import (
    LocalStack,
    missing_components,
    start_local_stack,
    stop_local_stack,
)


@contextlib.contextmanager
def running_local_stack(state_dir: Path, **kwargs) -> Iterator[LocalStack]:
    """Starts a local stack in ``state_dir``, points ``os.environ`` at it, stops it at the end.

    Usable without pytest fixtures, e.g. by a test that needs a stack of its own.

    Args:
        state_dir: A fresh directory for the stack's state.
        **kwargs: Passed to ``start_local_stack`` (resource names, timeout).

    Yields:
        The running stack.
    """
    stack = start_local_stack(state_dir, **kwargs)
    try:
        with stack.activate():
            yield stack
    finally:
        stop_local_stack(state_dir)


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """The session's local stack (Pub/Sub, Bigtable and GCS emulators with the crawler's
    resources), with its variables set in ``os.environ`` until the session ends."""
    missing = missing_components()
    if missing:
        message = "local stack unavailable; install: " + "; ".join(missing)
        if os.environ.get("CI"):  # CI must exercise the emulators, never skip them silently
            pytest.fail(message)
        pytest.skip(message)
    with running_local_stack(tmp_path_factory.mktemp("crawler-local")) as stack:
        yield stack
