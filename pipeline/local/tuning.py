"""Costs of a long local run that the end-to-end benchmark found, and their fixes.

1. DoFn specs and signatures. The DirectRunner asks ``userstate.get_dofn_specs(dofn)`` several
times per bundle of every ParDo (``is_stateful_dofn`` when it schedules consumers and when a
bundle starts, ``validate_stateful_dofn``, the timer specs). Each call wraps every method of the
DoFn and reads its signature with ``inspect``: in the end-to-end benchmark profile
(``benchmarks/profile_crawl``) that was about 14% of the pipeline process's CPU. The answer
depends only on the DoFn's methods, which are its class's (state and timer specs are class
attributes named by the methods' defaults), so it is memoized per class: the runner hands every
bundle of a stateful step a fresh copy of its DoFn, so a memo per object missed every time (9%
of the CPU again, once the analysts' keyed stages made bundles many) and kept every copy alive.
An object that carries its own ``process`` is looked up by itself, as before. The same goes for
the argument lists a ``DoFnRunner`` reads with ``inspect`` for each of a DoFn's methods when a
bundle starts (``core.get_function_arguments``, 3.5%): memoized per class and method.

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

3. Timers of idle keys. On every pass of its monitor loop the DirectRunner asks every key that
ever held state in a stateful step for its expired timers (``_TransformWatermarks.
extract_transform_timers``), although most keys have none: the duplicate stages key by
content digest and by LSH band, ten band keys per page, and a message's acknowledgement parts
by its ack id, so after a few thousand pages each pass walked tens of thousands of keys, and
that walk (``get_timers``) was a quarter of the crawl's CPU; skipping keys without timers in
the walk still left it at 23%, the monitor loop passing constantly. ``install`` keeps, per
stateful step, the keys whose committed state holds a timer (updated where the runner commits
a bundle's state, ``EvaluationContext.handle_result``), walks only those, and reads the clock
once per pass; the timers it finds are the original's. It also drops a key's state once it
holds nothing (no value, no timer, no hold): the runner makes a new empty one when the key
comes back, so a crawl's memory no longer keeps an empty entry per message and per key.

4. Input starved by timers, and idle reads. The DirectRunner reads a source (its Pub/Sub read)
only in a pass of its monitor loop in which no timer fired and no bundle is runnable
(``_MonitorTask._add_work_if_necessary``). The frontier's keys poll their leases with timers,
so while hosts are busy some timer fires in almost every pass, and the frontier topic was read
seconds apart (a 7 s gap with messages waiting, measured): every link to another host waited
that long. And when the runner was idle, every pass read the topic, and the read slept 10 ms
when it found nothing, on the runner's only thread: a third of that thread's time in a site
crawl, and up to 15 ms late for every lease timer. ``install`` also schedules the sources'
reads when a pull is due (``pipeline.local.pubsub_read.pull_due``: every 50 ms, less often
while pulls find nothing), whatever else is going on, and such a read does not sleep
(``read_in_passing``); an idle read that is not due yields the thread for 5 ms only.

5. Watermarks of pending bundles. After every bundle the DirectRunner refreshes the watermark of
the step it ran and of everything downstream (``_TransformWatermarks.refresh``), and each
refresh reads every element of every bundle still waiting for that step to find the earliest
timestamp (its own TODO says so): 16% of the crawl's CPU, with ``Timestamp`` comparisons
another 11%. A committed bundle does not change, so ``install`` computes each bundle's
earliest timestamp once (a run of same-timestamp elements is one entry) and keeps it on the
bundle; the watermark is the original's.

6.-9. How the executor queues work: ``pipeline.local.runner_queues`` (installed with these).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from apache_beam.runners.direct import (
    evaluation_context,
    executor,
    transform_evaluator,
    watermark_manager,
)
from apache_beam.transforms import core, userstate

from pipeline.local import pubsub_read as local_pubsub
from pipeline.local import runner_queues

GC_THRESHOLDS = (10_000, 10, 50)  # CPython's defaults are (700, 10, 10)
SpecLookup = Callable[[Any], tuple[set[Any], set[Any]]]


class SpecMemo:
    """``lookup`` (Beam's ``get_dofn_specs``) memoized per DoFn class; thread-safe.

    A DoFn object with its own ``process`` attribute (``beam.Map``'s wrapper of a function, for
    one) is looked up per ``process`` code and the DoFn parameters its defaults declare, when
    those declare no state and no timer: every copy of it then answers the same (no specs).
    Otherwise it is looked up per object, kept with its entry so its id cannot be reused
    while the entry lives. Bound: one entry per DoFn class and per distinct ``process`` code
    of the pipeline, plus per-object entries of stateful DoFns with their own ``process``
    (none in this pipeline).
    """

    def __init__(self, lookup: SpecLookup) -> None:
        self._lookup = lookup
        self._lock = threading.Lock()
        self._by_class: dict[type, tuple[frozenset[Any], frozenset[Any]]] = {}
        self._stateless: set[tuple[Any, ...]] = set()
        self._by_object: dict[int, tuple[Any, tuple[frozenset[Any], frozenset[Any]]]] = {}

    def get_dofn_specs(self, dofn: Any) -> tuple[set[Any], set[Any]]:
        if "process" in getattr(dofn, "__dict__", {}):
            key = _process_key(dofn)
            if key is not None and key in self._stateless:
                return set(), set()
            entry = self._by_object.get(id(dofn))
            if entry is None or entry[0] is not dofn:
                frozen = self._frozen(dofn)
                if key is not None and not (frozen[0] or frozen[1]):
                    with self._lock:
                        self._stateless.add(key)
                    return set(), set()
                entry = (dofn, frozen)
                with self._lock:
                    self._by_object[id(dofn)] = entry
            specs = entry[1]
        else:
            cached = self._by_class.get(type(dofn))
            if cached is None:
                cached = self._frozen(dofn)
                with self._lock:
                    self._by_class[type(dofn)] = cached
            specs = cached
        states_f, timers_f = specs
        return set(states_f), set(timers_f)  # callers get their own sets, as from Beam

    def _frozen(self, dofn: Any) -> tuple[frozenset[Any], frozenset[Any]]:
        states, timers = self._lookup(dofn)  # raises for an invalid DoFn; not cached
        return frozenset(states), frozenset(timers)

    def is_stateful_dofn(self, dofn: Any) -> bool:
        states, timers = self.get_dofn_specs(dofn)
        return bool(states or timers)


def _process_key(dofn: Any) -> tuple[Any, ...] | None:
    """What an object's own ``process`` looks like to a spec lookup: its class, its code, and
    the ids of the DoFn parameters its defaults declare; None when it has no code."""
    func = getattr(dofn.process, "__func__", dofn.process)
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    params = tuple(getattr(d, "param_id", type(d).__qualname__)
                   for d in (getattr(func, "__defaults__", None) or ()))
    return type(dofn), code, params


_ORIGINAL_ARGUMENTS = core.get_function_arguments
_ARGUMENTS: dict[tuple[type, str], tuple[list[str], list[Any]]] = {}


def memoized_function_arguments(obj: Any, func: str) -> tuple[list[str], list[Any]]:
    """``core.get_function_arguments`` memoized per (class, method) for methods an object
    takes from its class (not its own attribute, and no ``_inspect_<method>`` hook); callers
    get their own lists."""
    if hasattr(obj, f"_inspect_{func}") or func in getattr(obj, "__dict__", {}):
        return _ORIGINAL_ARGUMENTS(obj, func)
    key = (type(obj), func)
    known = _ARGUMENTS.get(key)
    if known is None:
        known = _ARGUMENTS[key] = _ORIGINAL_ARGUMENTS(obj, func)
    return list(known[0]), list(known[1])


MEMO = SpecMemo(userstate.get_dofn_specs)
memoized_get_dofn_specs = MEMO.get_dofn_specs
memoized_is_stateful_dofn = MEMO.is_stateful_dofn
_ORIGINAL_EXTRACT = watermark_manager._TransformWatermarks.extract_transform_timers


# id(a step's keyed states) -> (those states, their keys with a timer) (3.). The states are kept
# with their index so that a later pipeline's dict that gets the same id is not taken for them;
# the last ``_TIMER_STEPS`` steps are kept (a process runs one job, tests run a few).
_TIMER_KEYS: dict[int, tuple[dict[Any, Any], set[Any]]] = {}
_TIMER_STEPS = 256


def timer_keys(states: dict[Any, Any], create: bool = False) -> set[Any] | None:
    """The index of ``states``' keys that hold a timer (None when there is none yet)."""
    entry = _TIMER_KEYS.get(id(states))
    if entry is not None and entry[0] is states:
        return entry[1]
    if not create:
        return None
    keys: set[Any] = set()
    _TIMER_KEYS[id(states)] = (states, keys)
    while len(_TIMER_KEYS) > _TIMER_STEPS:
        del _TIMER_KEYS[next(iter(_TIMER_KEYS))]
    return keys
_ORIGINAL_HANDLE_RESULT = evaluation_context.EvaluationContext.handle_result


def handle_result_indexing_timers(self: Any, completed_bundle: Any, completed_timers: Any,
                                  result: Any) -> Any:
    """``EvaluationContext.handle_result`` that then notes which of the bundle's keys hold a
    timer and drops the state of keys that hold nothing (see the module docstring, 3)."""
    committed = _ORIGINAL_HANDLE_RESULT(self, completed_bundle, completed_timers, result)
    if result.partial_keyed_state:
        states = self._transform_keyed_states[result.transform]
        with self._lock:
            keys = timer_keys(states, create=True)
            assert keys is not None
            for key in result.partial_keyed_state:
                state = states.get(key)
                if state is None:
                    keys.discard(key)
                elif state.timers:
                    keys.add(key)
                else:
                    keys.discard(key)
                    if not state.state and not state.global_state:
                        del states[key]
    return committed


def _firing_fields(firing: Any) -> tuple[Any, ...]:
    return (firing.encoded_key, firing.window, firing.name, firing.time_domain,
            firing.timestamp, firing.dynamic_timer_tag)


def extract_timers_of_keys_with_timers(self: Any) -> tuple[list[Any], bool]:
    """``_TransformWatermarks.extract_transform_timers`` that walks only the keys with a timer
    (see the module docstring, 3); what it returns is the original's."""
    with self._lock:
        fired = []
        has_realtime_timer = False
        now = self._clock.time()
        # TimerFiring compares by identity: what is pending is compared by its fields (7.)
        pending = {_firing_fields(f) for f in self._fired_timers}
        keys = timer_keys(self._keyed_states)
        walked = list(keys) if keys is not None else list(self._keyed_states)
        for encoded_key in walked:
            state = self._keyed_states.get(encoded_key)
            if state is None or not getattr(state, "timers", True):
                continue
            timers, had_realtime_timer = state.get_timers(watermark=self._input_watermark,
                                                          processing_time=now)
            has_realtime_timer = has_realtime_timer or had_realtime_timer
            for window, (name, time_domain, timestamp, dynamic_timer_tag) in timers:
                firing = watermark_manager.TimerFiring(
                    encoded_key, window, name, time_domain, timestamp,
                    dynamic_timer_tag=dynamic_timer_tag)
                if _firing_fields(firing) not in pending:  # pending already: not again (7.)
                    fired.append(firing)
        self._fired_timers.update(fired)
        return fired, has_realtime_timer


_UNKNOWN = object()
_ORIGINAL_REFRESH = watermark_manager._TransformWatermarks.refresh


def earliest_timestamp(bundle: Any) -> Any:
    """The earliest element timestamp of a bundle (None when empty); remembered on a committed
    bundle, which cannot change."""
    known = getattr(bundle, "_crawler_earliest", _UNKNOWN)
    if known is not _UNKNOWN:
        return known
    earliest = None
    for element in bundle._elements:  # WindowedValues, or runs of values of one timestamp
        if earliest is None or element.timestamp < earliest:
            earliest = element.timestamp
    if bundle._committed:
        bundle._crawler_earliest = earliest
    return earliest


def refresh_with_earliest_per_bundle(self: Any) -> bool:
    """``_TransformWatermarks.refresh`` reading each pending bundle's earliest timestamp once
    (see the module docstring, 5); the watermarks are the original's."""
    inf = watermark_manager.WatermarkManager.WATERMARK_POS_INF
    with self._lock:
        min_pending = inf
        has_pending = False
        for bundle in self._pending:
            earliest = earliest_timestamp(bundle)
            if earliest is not None:
                has_pending = True
                if earliest < min_pending:
                    min_pending = earliest
        pending_holder = (min_pending - watermark_manager.TIME_GRANULARITY if has_pending
                          else inf)
        producer = min([tw.output_watermark for tw in self._input_transform_watermarks] + [inf])
        self._input_watermark = max(self._input_watermark, min(pending_holder, producer))
        earliest_hold = inf
        for hold in self._keyed_earliest_holds.values():
            if hold < earliest_hold:
                earliest_hold = hold
        new_output = min(self._input_watermark, earliest_hold)
        advanced = new_output > self._output_watermark
        self._output_watermark = new_output
        return bool(advanced)


_MONITOR = executor._ExecutorServiceParallelExecutor._MonitorTask
_ORIGINAL_ADD_WORK = _MONITOR._add_work_if_necessary


def add_work_reading_sources_in_time(self: Any, timers_fired: bool) -> None:
    """``_MonitorTask._add_work_if_necessary`` that also schedules the sources' pending reads
    when a pull is due, whatever else runs (see the module docstring, 4); the original's rule
    holds otherwise."""
    runner = self._executor
    if local_pubsub.pull_due(time.monotonic()):
        for source in runner.root_nodes:
            pending = runner.node_to_pending_bundles.get(source)
            if pending and not runner.evaluation_context.is_done(source):
                runner.node_to_pending_bundles[source] = []
                local_pubsub.read_in_passing()
                for bundle in pending:
                    runner.schedule_consumption(source, bundle, [],
                                                runner.default_completion_callback)
    _ORIGINAL_ADD_WORK(self, timers_fired)


def install() -> None:
    """Idempotent. Patches the module attributes the DirectRunner reads."""
    core.get_function_arguments = memoized_function_arguments
    userstate.get_dofn_specs = memoized_get_dofn_specs  # used by validate_stateful_dofn
    userstate.is_stateful_dofn = memoized_is_stateful_dofn
    transform_evaluator.get_dofn_specs = memoized_get_dofn_specs
    transform_evaluator.is_stateful_dofn = memoized_is_stateful_dofn
    watermark_manager._TransformWatermarks.extract_transform_timers = (  # type: ignore[method-assign]
        extract_timers_of_keys_with_timers)
    _MONITOR._add_work_if_necessary = add_work_reading_sources_in_time  # type: ignore[method-assign]
    evaluation_context.EvaluationContext.handle_result = (  # type: ignore[method-assign]
        handle_result_indexing_timers)
    watermark_manager._TransformWatermarks.refresh = (  # type: ignore[method-assign]
        refresh_with_earliest_per_bundle)
    runner_queues.install()


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
