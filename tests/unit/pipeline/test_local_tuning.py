"""The DirectRunner's DoFn spec lookups are memoized per DoFn class, with the same answers; its
timer walk passes over keys without timers and finds the same timers."""

from __future__ import annotations

import gc

import apache_beam as beam
import pytest
from apache_beam.runners.direct import executor, transform_evaluator
from apache_beam.transforms import userstate
from apache_beam.transforms.userstate import BagStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp

from pipeline.local import runner_queues
from pipeline.local import tuning as local_tuning


class Counting(beam.DoFn):
    BAG = BagStateSpec("bag", beam.coders.StrUtf8Coder())
    TIMER = TimerSpec("t", userstate.TimeDomain.REAL_TIME)

    def process(self, element, bag=beam.DoFn.StateParam(BAG),
                timer=beam.DoFn.TimerParam(TIMER)):
        timer.set(Timestamp(0))
        yield element

    @on_timer(TIMER)
    def fire(self):
        yield "t"


class Plain(beam.DoFn):
    def process(self, element):
        yield element


def test_specs_are_computed_once_per_dofn_and_match_beams():
    calls: list[object] = []

    def counting_lookup(dofn):
        calls.append(dofn)
        return userstate.get_dofn_specs(dofn)

    memo = local_tuning.SpecMemo(counting_lookup)
    stateful, plain = Counting(), Plain()
    for _ in range(5):
        states, timers = memo.get_dofn_specs(stateful)
        assert states == {Counting.BAG} and timers == {Counting.TIMER}
        assert memo.is_stateful_dofn(stateful)
        assert not memo.is_stateful_dofn(plain)
    assert calls == [stateful, plain]  # once each, however often the runner asks
    states.add("mutated")  # a caller's set is its own
    assert memo.get_dofn_specs(stateful)[0] == {Counting.BAG}
    assert memo.get_dofn_specs(Counting())[1] == {Counting.TIMER}
    assert len(calls) == 2  # another object of the class (a bundle's copy): no new lookup


def test_copies_of_a_dofn_with_its_own_stateless_process_are_looked_up_once():
    """``beam.Map`` wraps its function in a DoFn object whose ``process`` is its own; the runner
    hands each bundle a copy (a new object, a new function of the same code)."""
    calls: list[object] = []

    def counting_lookup(dofn):
        calls.append(dofn)
        return userstate.get_dofn_specs(dofn)

    def wrapped() -> Plain:
        dofn = Plain()
        dofn.process = lambda element: [element]  # type: ignore[method-assign]
        return dofn

    memo = local_tuning.SpecMemo(counting_lookup)
    first = wrapped()
    assert memo.get_dofn_specs(first) == (set(), set())
    assert memo.get_dofn_specs(wrapped()) == (set(), set())  # a copy: same code, no lookup
    memo.get_dofn_specs(Plain())
    assert len(calls) == 2 and calls[0] is first and type(calls[1]) is Plain


def test_the_timer_walk_skips_keys_without_timers_and_finds_what_beam_finds():
    from apache_beam.runners.direct import watermark_manager
    from apache_beam.transforms.trigger import InMemoryUnmergedState
    from apache_beam.transforms.window import GlobalWindow

    class Clock:
        def time(self):
            return 100.0

    def walker(fn):
        states = {f"k{i}".encode(): InMemoryUnmergedState() for i in range(1000)}
        states[b"k3"].set_timer(GlobalWindow(), "lease", userstate.TimeDomain.REAL_TIME, 50.0)
        states[b"k7"].set_timer(GlobalWindow(), "lease", userstate.TimeDomain.REAL_TIME, 500.0)
        marks = watermark_manager._TransformWatermarks(Clock(), states, "t")
        return fn(marks)

    def plain(result):
        fired, realtime = result
        return [(f.encoded_key, f.window, f.name, f.time_domain, f.timestamp) for f in fired], \
            realtime

    expected = plain(walker(local_tuning._ORIGINAL_EXTRACT))
    got = plain(walker(local_tuning.extract_timers_of_keys_with_timers))
    assert got == expected
    assert [key for key, *_ in got[0]] == [b"k3"] and got[1]


def test_the_memo_answers_as_beam_does_for_a_stateful_dofn_with_timers():
    dofn = Counting()
    assert local_tuning.memoized_get_dofn_specs(dofn) == userstate.get_dofn_specs(dofn)
    assert local_tuning.memoized_is_stateful_dofn(dofn) is userstate.is_stateful_dofn(dofn)


def test_install_patches_what_the_direct_runner_reads(monkeypatch):
    from apache_beam.runners.direct import evaluation_context, watermark_manager
    from apache_beam.transforms import core

    marks = watermark_manager._TransformWatermarks
    monkeypatch.setattr(marks, "extract_transform_timers", marks.extract_transform_timers)
    monitor = local_tuning._MONITOR
    monkeypatch.setattr(monitor, "_add_work_if_necessary", monitor._add_work_if_necessary)
    monkeypatch.setattr(marks, "refresh", marks.refresh)
    context = evaluation_context.EvaluationContext
    monkeypatch.setattr(context, "handle_result", context.handle_result)
    serial = executor._SerialEvaluationState
    monkeypatch.setattr(serial, "_update_currently_evaluating",
                        serial._update_currently_evaluating)
    parallel = executor._ExecutorServiceParallelExecutor
    monkeypatch.setattr(parallel, "schedule_consumers", parallel.schedule_consumers)
    monkeypatch.setattr(marks, "add_pending", marks.add_pending)
    for module, name in ((userstate, "get_dofn_specs"), (userstate, "is_stateful_dofn"),
                         (transform_evaluator, "get_dofn_specs"),
                         (transform_evaluator, "is_stateful_dofn"),
                         (core, "get_function_arguments")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    local_tuning.install()
    local_tuning.install()
    assert local_tuning.installed()
    assert transform_evaluator.is_stateful_dofn == local_tuning.memoized_is_stateful_dofn
    assert marks.extract_transform_timers is local_tuning.extract_timers_of_keys_with_timers
    assert monitor._add_work_if_necessary is local_tuning.add_work_reading_sources_in_time
    assert core.get_function_arguments is local_tuning.memoized_function_arguments
    assert marks.refresh is local_tuning.refresh_with_earliest_per_bundle
    assert context.handle_result is local_tuning.handle_result_indexing_timers
    assert serial._update_currently_evaluating is runner_queues.update_serially_first_in_first_out
    assert parallel.schedule_consumers is runner_queues.schedule_consumers_of_bundles_with_elements
    assert marks.add_pending is runner_queues.add_pending_with_elements
    with pytest.raises(ValueError):  # validation still rejects a DoFn with a duplicate param
        userstate.validate_stateful_dofn(Duplicate())


class Duplicate(beam.DoFn):
    BAG = BagStateSpec("bag", beam.coders.StrUtf8Coder())
    OTHER = BagStateSpec("bag", beam.coders.StrUtf8Coder())

    def process(self, element, a=beam.DoFn.StateParam(BAG), b=beam.DoFn.StateParam(OTHER)):
        yield element


def test_tune_gc_freezes_what_lives_now_and_makes_full_collections_rarer():
    before = gc.get_threshold()

    def in_collected_generations(objects: list[object]) -> bool:
        ids = {id(o) for o in objects}
        return any(id(o) in ids for g in (0, 1, 2) for o in gc.get_objects(generation=g))

    try:
        gc.unfreeze()
        long_lived = [[i] for i in range(1000)]  # lists are always tracked
        assert in_collected_generations(long_lived)
        local_tuning.tune_gc()
        assert gc.get_threshold() == local_tuning.GC_THRESHOLDS
        cpython_defaults = (700, 10, 10)
        assert local_tuning.GC_THRESHOLDS[0] > cpython_defaults[0]
        assert local_tuning.GC_THRESHOLDS[2] > cpython_defaults[2]
        assert not in_collected_generations(long_lived)  # in the permanent generation now
        made_later = [[i] for i in range(1000)]
        assert in_collected_generations(made_later)
        local_tuning.freeze_started_job()
        assert not in_collected_generations(made_later)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


class _Context:
    def is_done(self, node):
        return False


class _Runner:
    """What the monitor task sees of the DirectRunner's executor."""

    def __init__(self):
        self.root_nodes = frozenset({"read"})
        self.node_to_pending_bundles = {"read": ["bundle-1"], "frontier": ["bundle-2"]}
        self.evaluation_context = _Context()
        self.default_completion_callback = object()
        self.scheduled: list[tuple[str, str]] = []

    def schedule_consumption(self, node, bundle, timers, callback):
        self.scheduled.append((node, bundle))


class _Monitor:
    def __init__(self, runner):
        self._executor = runner
        self.executing = False

    def _is_executing(self):
        return self.executing


def test_a_sources_pending_read_is_scheduled_in_time_while_timers_keep_firing(monkeypatch):
    from pipeline.local import pubsub_read

    runner = _Runner()
    monitor = _Monitor(runner)
    originals: list[bool] = []
    monkeypatch.setattr(local_tuning, "_ORIGINAL_ADD_WORK",
                        lambda self, fired: originals.append(fired))
    clock = [1000.0]
    monkeypatch.setattr(local_tuning.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(pubsub_read, "_LAST_PULL", [0.0])
    monkeypatch.setattr(pubsub_read, "_EMPTY_IN_A_ROW", [0])
    monkeypatch.setattr(pubsub_read, "_PASSING", [False])
    local_tuning.add_work_reading_sources_in_time(monitor, True)  # a timer fired: Beam waits
    assert runner.scheduled == [("read", "bundle-1")]  # the read goes anyway, in passing
    assert pubsub_read._PASSING == [True]
    assert runner.node_to_pending_bundles == {"read": [], "frontier": ["bundle-2"]}
    pubsub_read._LAST_PULL[0] = clock[0]  # the read pulled
    runner.node_to_pending_bundles["read"] = ["bundle-3"]
    clock[0] += pubsub_read.PULL_EVERY / 2
    local_tuning.add_work_reading_sources_in_time(monitor, True)
    assert runner.scheduled == [("read", "bundle-1")]  # not yet: a pull is not due
    assert runner.node_to_pending_bundles["read"] == ["bundle-3"]  # left to Beam's rule
    clock[0] += pubsub_read.PULL_EVERY
    local_tuning.add_work_reading_sources_in_time(monitor, True)
    assert runner.scheduled[-1] == ("read", "bundle-3")
    assert originals == [True, True, True]  # Beam's own rule still runs after


def test_committed_keys_with_timers_are_indexed_and_empty_states_dropped(monkeypatch):
    import threading

    from apache_beam.runners.direct import watermark_manager
    from apache_beam.runners.direct.evaluation_context import DirectUnmergedState
    from apache_beam.transforms.window import GlobalWindow

    def commit(self, bundle, timers, result):  # what Beam's handle_result does with state
        self._transform_keyed_states[result.transform].update(result.partial_keyed_state)
        return []

    monkeypatch.setattr(local_tuning, "_ORIGINAL_HANDLE_RESULT", commit)

    class Context:
        def __init__(self):
            self._transform_keyed_states = {"step": {}}
            self._lock = threading.RLock()

    class Result:
        def __init__(self, partial):
            self.transform, self.partial_keyed_state = "step", partial

    def with_timer(at: float) -> DirectUnmergedState:
        state = DirectUnmergedState()
        state.set_timer(GlobalWindow(), "lease", userstate.TimeDomain.REAL_TIME, at)
        return state

    class Clock:
        def time(self):
            return 100.0

    context = Context()
    states = context._transform_keyed_states["step"]
    kept = DirectUnmergedState()
    kept.set_global_state(_rmw_tag(), b"x")
    local_tuning.handle_result_indexing_timers(context, None, [], Result(
        {b"due": with_timer(50.0), b"later": with_timer(500.0), b"empty": DirectUnmergedState(),
         b"kept": kept}))
    assert set(states) == {b"due", b"later", b"kept"}  # the empty state is gone
    assert local_tuning.timer_keys(states) == {b"due", b"later"}
    assert local_tuning.timer_keys({}) is None  # another step's states: no index of its own
    marks = watermark_manager._TransformWatermarks(Clock(), states, "step")
    fired, realtime = local_tuning.extract_timers_of_keys_with_timers(marks)
    assert [f.encoded_key for f in fired] == [b"due"] and realtime
    local_tuning.handle_result_indexing_timers(context, None, [], Result(
        {b"due": DirectUnmergedState()}))  # its timer fired and was not set again
    assert local_tuning.timer_keys(states) == {b"later"} and b"due" not in states


def _rmw_tag():
    from apache_beam.transforms.trigger import _ReadModifyWriteStateTag

    return _ReadModifyWriteStateTag("v")


def test_watermarks_from_each_bundles_earliest_timestamp_equal_beams():
    from apache_beam.runners.direct import watermark_manager
    from apache_beam.runners.direct.bundle_factory import BundleFactory
    from apache_beam.transforms.window import GlobalWindow
    from apache_beam.utils.windowed_value import WindowedValue

    def bundle(*stamps: float):
        b = BundleFactory(stacked=True).create_bundle(beam.pvalue.PBegin(beam.Pipeline()))
        for t in stamps:
            b.add(WindowedValue(t, Timestamp(t), (GlobalWindow(),)))
        b.commit(None)
        return b

    pending = {bundle(30, 30, 30, 12), bundle(50), bundle(7.5, 99)}

    def watermarks(refresh):
        marks = watermark_manager._TransformWatermarks(None, {}, "t")
        marks._pending = set(pending)
        advanced = refresh(marks)
        return advanced, marks._input_watermark, marks._output_watermark

    assert watermarks(local_tuning.refresh_with_earliest_per_bundle) == watermarks(
        local_tuning._ORIGINAL_REFRESH)
    assert watermarks(local_tuning.refresh_with_earliest_per_bundle)[1] < Timestamp(7.5)
    assert all(b._crawler_earliest is not None for b in pending)
    assert local_tuning.earliest_timestamp(bundle()) is None


def test_function_arguments_are_read_once_per_class_and_method(monkeypatch):
    from apache_beam.transforms import core

    calls: list[tuple[object, str]] = []

    def counting(obj, func):
        calls.append((obj, func))
        return core.get_function_args_defaults(getattr(obj, func))

    monkeypatch.setattr(local_tuning, "_ORIGINAL_ARGUMENTS", counting)
    monkeypatch.setattr(local_tuning, "_ARGUMENTS", {})
    first = local_tuning.memoized_function_arguments(Counting(), "process")
    again = local_tuning.memoized_function_arguments(Counting(), "process")  # a bundle's copy
    assert first == again == core.get_function_args_defaults(Counting().process)
    assert len(calls) == 1
    first[0].append("mutated")  # a caller's lists are its own
    assert "mutated" not in local_tuning.memoized_function_arguments(Counting(), "process")[0]
    odd = Plain()
    odd.process = lambda element, extra=1: [element]  # type: ignore[method-assign]
    assert local_tuning.memoized_function_arguments(odd, "process")[0] == ["element", "extra"]
    assert len(calls) == 2  # an object's own method is read each time, past the memo


class Work(executor._ExecutorService.CallableTask):
    def __init__(self, name: str) -> None:
        self.label = name


class Service:
    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, work: Work) -> None:
        self.submitted.append(work.label)


def test_a_stateful_steps_queue_runs_its_oldest_work_first():
    service = Service()
    state = executor._SerialEvaluationState(service, set())
    works = [Work(f"w{i}") for i in range(4)]
    for work in works:
        runner_queues.update_serially_first_in_first_out(state, work, None)
    assert service.submitted == ["w0"]  # one at a time
    for done in works[:3]:
        runner_queues.update_serially_first_in_first_out(state, None, done)
    assert service.submitted == ["w0", "w1", "w2", "w3"]  # Beam's own pop() gives w3 second


class PCollection:
    def __init__(self, producer: object) -> None:
        self.producer = producer


class Bundle:
    def __init__(self, elements: list[object], producer: object = "step") -> None:
        self._elements = elements
        self.pcollection = PCollection(producer)

    def has_elements(self) -> bool:
        return bool(self._elements)


def test_empty_bundles_neither_schedule_consumers_nor_stay_pending(monkeypatch):
    from apache_beam.runners.direct import watermark_manager

    scheduled: list[Bundle] = []
    monkeypatch.setattr(runner_queues, "_ORIGINAL_SCHEDULE_CONSUMERS",
                        lambda self, bundle: scheduled.append(bundle))
    full, empty = Bundle([1]), Bundle([])
    runner_queues.schedule_consumers_of_bundles_with_elements(None, empty)  # not running a crawl
    assert scheduled == [empty]
    runner_queues.skip_empty_bundles(True)
    try:
        for bundle in (empty, full):
            runner_queues.schedule_consumers_of_bundles_with_elements(None, bundle)
    finally:
        runner_queues.skip_empty_bundles(False)
    assert scheduled == [empty, full]

    class Clock:
        def time(self):
            return 0.0

    marks = watermark_manager._TransformWatermarks(Clock(), {}, "t")
    runner_queues.add_pending_with_elements(marks, empty)
    runner_queues.add_pending_with_elements(marks, full)
    assert marks._pending == {full}


def test_a_timer_whose_firing_is_pending_is_not_fired_again():
    from apache_beam.runners.direct import watermark_manager
    from apache_beam.transforms.trigger import InMemoryUnmergedState
    from apache_beam.transforms.window import GlobalWindow

    class Clock:
        def time(self):
            return 100.0

    state = InMemoryUnmergedState()
    state.set_timer(GlobalWindow(), "flush", userstate.TimeDomain.REAL_TIME, 50.0)
    marks = watermark_manager._TransformWatermarks(Clock(), {b"k": state}, "t")
    first, _ = local_tuning.extract_timers_of_keys_with_timers(marks)
    again, realtime = local_tuning.extract_timers_of_keys_with_timers(marks)
    assert [f.encoded_key for f in first] == [b"k"] and again == [] and realtime
    marks.update_timers(first)  # its bundle ran; the timer, set again, fires again
    assert [f.encoded_key for f in local_tuning.extract_timers_of_keys_with_timers(marks)[0]] \
        == [b"k"]
