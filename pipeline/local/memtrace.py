"""Where the crawler's memory goes: tracemalloc snapshots on demand, for long local crawls.

With ``CRAWLER_TRACEMALLOC=DIR`` in the environment, ``crawler`` starts ``tracemalloc`` (keeping
``CRAWLER_TRACEMALLOC_FRAMES`` frames, default 12) and, on each ``SIGUSR1``, writes
``DIR/snapshot-N.txt``: the live bytes by allocating line and by allocation traceback, largest
first. ``make bench-soak ARGS=--trace`` sends the signal at 1,000 and 10,000 pages fetched.
tracemalloc slows the process down 2-3x; it is for finding holders, not for measuring speed.
"""

from __future__ import annotations

import itertools
import os
import signal
import tracemalloc
from pathlib import Path
from types import FrameType

ENV_DIR = "CRAWLER_TRACEMALLOC"
ENV_FRAMES = "CRAWLER_TRACEMALLOC_FRAMES"
TOP_LINES = 40
TOP_TRACEBACKS = 15
_IGNORED = (tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"))


def report(snapshot: tracemalloc.Snapshot) -> str:
    """The top holders of ``snapshot`` as text: by line, then by traceback."""
    snapshot = snapshot.filter_traces(_IGNORED)
    lines = snapshot.statistics("lineno")
    total = sum(s.size for s in lines)
    out = [f"live traced memory: {total / 2**20:.1f} MiB in {sum(s.count for s in lines)} blocks",
           "", f"top {TOP_LINES} by line:"]
    out += [f"{s.size / 2**20:9.2f} MiB {s.count:9d} blocks  {s.traceback[0]}"
            for s in lines[:TOP_LINES]]
    out += ["", f"top {TOP_TRACEBACKS} by traceback:"]
    for stat in snapshot.statistics("traceback")[:TOP_TRACEBACKS]:
        out.append(f"{stat.size / 2**20:9.2f} MiB {stat.count:9d} blocks")
        out += [f"      {frame}" for frame in stat.traceback.format(most_recent_first=True)[:24]]
    return "\n".join(out) + "\n"


def install_from_env() -> bool:
    """Starts tracing and installs the ``SIGUSR1`` handler when ``CRAWLER_TRACEMALLOC`` is set."""
    target = os.environ.get(ENV_DIR)
    if not target:
        return False
    folder = Path(target)
    folder.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(int(os.environ.get(ENV_FRAMES, "12")))
    numbers = itertools.count(1)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        text = report(tracemalloc.take_snapshot())
        (folder / f"snapshot-{next(numbers)}.txt").write_text(text)

    signal.signal(signal.SIGUSR1, on_signal)
    return True
