"""The DirectRunner's DoFn spec lookups are memoized per DoFn class, with the same answers; its
timer walk passes over keys without timers and finds the same timers."""

from __future__ import annotations

import gc

import apache_beam as beam
import pytest
from apache_beam.runners.direct import transform_evaluator
from apache_beam.transforms import userstate
from apache_beam.transforms.userstate import BagStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp

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


def test_a_dofn_object_with_its_own_process_is_looked_up_by_itself():
    calls: list[object] = []

    def counting_lookup(dofn):
        calls.append(dofn)
        return userstate.get_dofn_specs(dofn)

    memo = local_tuning.SpecMemo(counting_lookup)
    odd = Plain()
    odd.process = lambda element: [element]  # type: ignore[method-assign]
    memo.get_dofn_specs(odd)
    memo.get_dofn_specs(odd)
    memo.get_dofn_specs(Plain())
    assert calls == [odd, calls[1]] and isinstance(calls[1], Plain) and calls[1] is not odd


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
    from apache_beam.runners.direct import watermark_manager

    marks = watermark_manager._TransformWatermarks
    monkeypatch.setattr(marks, "extract_transform_timers", marks.extract_transform_timers)
    for module, name in ((userstate, "get_dofn_specs"), (userstate, "is_stateful_dofn"),
                         (transform_evaluator, "get_dofn_specs"),
                         (transform_evaluator, "is_stateful_dofn")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    local_tuning.install()
    local_tuning.install()
    assert local_tuning.installed()
    assert transform_evaluator.is_stateful_dofn == local_tuning.memoized_is_stateful_dofn
    assert marks.extract_transform_timers is local_tuning.extract_timers_of_keys_with_timers
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
