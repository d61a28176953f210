"""Running a pyftpdlib server on a thread of its own, for the FTP tests and the faults site."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def polled_in_thread(server: Any, name: str) -> Iterator[None]:
    """Polls ``server`` (an ``FTPServer`` with an ``IOLoop`` of its own) on a daemon thread until
    the block ends; the IOLoop is not thread-safe, so it is also closed from that thread."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            server.ioloop.loop(timeout=0.05, blocking=False)
        server.close_all()

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
