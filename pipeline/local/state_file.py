"""A local tool's JSON state file: read, written atomically, and a lock around start and stop.

``pipeline.local.stack`` keeps ``local.json`` this way, ``pipeline.local.flink_cluster``
``flink.json``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_LOG = logging.getLogger(__name__)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when there is none or it is unreadable (logged)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        _LOG.warning("ignoring unreadable %s: %s", path, exc)
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Writes ``data`` to ``path`` atomically (a reader sees the old or the new file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` (created if needed) for the block."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
