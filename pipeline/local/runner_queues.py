"""How the DirectRunner queues its work, and three fixes found by the soak benchmark
(``benchmarks.soak``), installed with ``pipeline.local.tuning`` (whose items 1-5 come first).

6. Stateful steps served newest first. The DirectRunner runs a stateful step's bundles one at a
time from a queue per step (``executor._SerialEvaluationState``), and takes the *newest* work
from it (``deque.pop``). While new bundles keep coming, the oldest never run: in a soak crawl
the WARC writer's first bundles waited for minutes behind fresh ones (their pages unwritten,
holding memory and, with backpressure, stopping the crawl), and the export writer's queue grew
without end. ``install`` makes the queue first in, first out, as a queue is.

7. Timers fired again while pending. The monitor loop fires every expired timer on every pass
(``get_timers`` does not clear them; the evaluator does when it runs the firing), so a timer
whose firing waits in a step's queue was fired again on each pass: a new bundle each time,
piling up in front of the step's elements. ``install`` fires a timer only when the same firing
is not pending already (``_TransformWatermarks._fired_timers``); that is done in the timer walk
of ``pipeline.local.tuning`` (3.).

8. Empty bundles scheduled. Every bundle a step runs commits an output bundle per output, empty
or not, and the executor schedules each downstream step on each of them
(``_ExecutorServiceParallelExecutor.schedule_consumers``), although the watermark manager
ignores empty bundles ("they do not impact watermarks and should not trigger downstream
execution", its ``_update_pending`` says). The frontier runs thousands of timer firings a
second that output nothing to most of its outputs, so the serial queues of the stateful steps
downstream filled with empty work: in a soak crawl, 13,000 queued for the export writer, 10,000
for the batch tracker and 4,000 for the WARC writer, the real bundles among them (the pages)
waiting behind, the queues growing with the crawl. ``install`` schedules consumers only for
bundles with elements while the local driver runs a crawl (``skip_empty_bundles``; a
``TestStream`` pipeline in the tests needs its empty bundles to advance its test clock).

9. Empty read bundles kept pending. Each read of the Pub/Sub source hands back an empty bundle to
read from again, which the watermark manager adds to the source's pending bundles and never
removes (it removes only bundles with elements): one more per read, 20 a second, for the life
of the job, and every watermark refresh walked them all. ``install`` does not add empty bundles
to a step's pending set; they hold no watermark (``refresh`` looks at elements only).
"""

from __future__ import annotations

from typing import Any

from apache_beam.runners.direct import executor, watermark_manager


def update_serially_first_in_first_out(self: Any, new_work: Any, completed_work: Any) -> None:
    """``_SerialEvaluationState._update_currently_evaluating`` taking the oldest work first
    (see the module docstring, 6); otherwise the original's."""
    with self._lock:
        if new_work:
            self.serial_queue.append(new_work)
        if completed_work:
            assert self.currently_evaluating == completed_work
            self.currently_evaluating = None
        if self.serial_queue and not self.currently_evaluating:
            next_work = self.serial_queue.popleft()
            self.currently_evaluating = next_work
            executor._TransformEvaluationState.schedule(self, next_work)


_ORIGINAL_ADD_PENDING = watermark_manager._TransformWatermarks.add_pending


def add_pending_with_elements(self: Any, pending: Any) -> None:
    """``_TransformWatermarks.add_pending`` that skips empty bundles (see the module docstring,
    9)."""
    if pending.has_elements():
        _ORIGINAL_ADD_PENDING(self, pending)


_ORIGINAL_SCHEDULE_CONSUMERS = executor._ExecutorServiceParallelExecutor.schedule_consumers


_SKIPPING = [False]  # set by the local driver for the run (see skip_empty_bundles)


def skip_empty_bundles(on: bool) -> None:
    """Turns 8. on for a local crawl job and off after it: a ``TestStream`` pipeline (the tests)
    drives its test clock, and the timers downstream, with empty bundles."""
    _SKIPPING[0] = on


def schedule_consumers_of_bundles_with_elements(self: Any, committed_bundle: Any) -> None:
    """``_ExecutorServiceParallelExecutor.schedule_consumers`` that skips empty bundles while
    the local driver runs a job (see the module docstring, 8)."""
    if committed_bundle.has_elements() or not _SKIPPING[0]:
        _ORIGINAL_SCHEDULE_CONSUMERS(self, committed_bundle)


def install() -> None:
    """Idempotent. Patches the executor and watermark classes the DirectRunner uses."""
    executor._SerialEvaluationState._update_currently_evaluating = (  # type: ignore[method-assign]
        update_serially_first_in_first_out)
    executor._ExecutorServiceParallelExecutor.schedule_consumers = (  # type: ignore[method-assign]
        schedule_consumers_of_bundles_with_elements)
    watermark_manager._TransformWatermarks.add_pending = (  # type: ignore[method-assign]
        add_pending_with_elements)
