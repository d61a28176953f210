"""Two costs of a long local run that the end-to-end benchmark's profile found, and their fixes.

1. DoFn specs. The DirectRunner asks ``userstate.get_dofn_specs(dofn)`` several times per bundle
of every ParDo (``is_stateful_dofn`` when it schedules consumers and when a bundle starts,
``validate_stateful_dofn``, the timer specs). Each call wraps every method of the DoFn and reads
its signature with ``inspect``: in the end-to-end benchmark profile (``benchmarks/profile_crawl``)
that was about 14% of the pipeline process's CPU. The answer depends only on the DoFn object's
methods, which do not change while a pipeline runs, so it is memoized per DoFn object.

The local runs install it (``pipeline.local.driver``); it only matters to the DirectRunner, whose
evaluators make these calls. Dataflow and Flink workers run the portable SDK harness, which
computes the specs once per DoFn already.

2. Garbage-collector pauses. The local job is one process holding Beam, gRPC, the Google clients
and the crawl's state: millions of tracked objects. With CPython's default thresholds a full
(generation 2) collection ran every few seconds and took 0.12 s growing to 0.68 s as the heap
grew, and every pause stalls the fetch loop of every host: in the benchmark's polite regime the
crawl reached 92.0% of the politeness bound with them and 96.9% without. ``tune_gc`` moves the
objects that live as long as the job (everything built at start-up) to the permanent generation
(``gc.freeze``) and makes the young generations larger and full collections rarer;
``freeze_started_job`` does the same once more for the objects the runner creates as the job
starts. Cyclic garbage that exists at those two moments is never collected: a bounded, one-time
cost.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

from apache_beam.runners.direct import transform_evaluator
from apache_beam.transforms import userstate

GC_THRESHOLDS = (10_000, 10, 50)  # CPython's defaults are (700, 10, 10)
SpecLookup = Callable[[Any], tuple[set[Any], set[Any]]]


class SpecMemo:
    """``lookup`` (Beam's ``get_dofn_specs``) memoized per DoFn object; thread-safe.

    The DoFn object is kept with its entry, so its id cannot be reused by another object while
    the entry lives (a local job holds a handful of DoFns).
    """

    def __init__(self, lookup: SpecLookup) -> None:
        self._lookup = lookup
        self._lock = threading.Lock()
        self._cache: dict[int, tuple[Any, tuple[frozenset[Any], frozenset[Any]]]] = {}

    def get_dofn_specs(self, dofn: Any) -> tuple[set[Any], set[Any]]:
        entry = self._cache.get(id(dofn))
        if entry is None or entry[0] is not dofn:
            states, timers = self._lookup(dofn)  # raises for an invalid DoFn; not cached
            entry = (dofn, (frozenset(states), frozenset(timers)))
            with self._lock:
                self._cache[id(dofn)] = entry
        states_f, timers_f = entry[1]
        return set(states_f), set(timers_f)  # callers get their own sets, as from Beam

    def is_stateful_dofn(self, dofn: Any) -> bool:
        states, timers = self.get_dofn_specs(dofn)
        return bool(states or timers)


MEMO = SpecMemo(userstate.get_dofn_specs)
memoized_get_dofn_specs = MEMO.get_dofn_specs
memoized_is_stateful_dofn = MEMO.is_stateful_dofn


def install() -> None:
    """Idempotent. Patches the module attributes the DirectRunner reads."""
    userstate.get_dofn_specs = memoized_get_dofn_specs  # used by validate_stateful_dofn
    userstate.is_stateful_dofn = memoized_is_stateful_dofn
    transform_evaluator.get_dofn_specs = memoized_get_dofn_specs
    transform_evaluator.is_stateful_dofn = memoized_is_stateful_dofn


def installed() -> bool:
    return transform_evaluator.get_dofn_specs == memoized_get_dofn_specs


def tune_gc() -> None:
    """Freezes what exists now and sets ``GC_THRESHOLDS``."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def freeze_started_job() -> None:
    """Called once, a few seconds into the run, when the runner's long-lived objects exist."""
    gc.freeze()
