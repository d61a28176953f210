"""``WakePendingKeys``: a new job touches every key that has work pending, once, at its start.

A key rebuilds its state from the tables when it is touched with empty state
(``transforms.frontier.rebuild``), but a key whose URLs were all in an earlier job's state is
touched by nothing in the new job: its URLs sit in the index while no message comes for it. The
hosts table marks such keys (``h:pending``, written by the frontier whenever a key's pending work
starts or ends), so at the start of a job this step reads the marked keys and sends each an
empty element; the key rebuilds and carries on.

    Impulse -> read the hosts table's pending keys (one scan) -> (key, FrontierWork(()))

The impulse fires once per job: a Flink job restored from a checkpoint does not scan again
(its state is there), and waking a key that has state is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms import METRICS_NAMESPACE
from transforms.core.records import FrontierWork
from transforms.frontier.store import StoreSpec

_LOG = logging.getLogger(__name__)


class _PendingKeysFn(beam.DoFn):
    def __init__(self, store: StoreSpec) -> None:
        self._spec = store

    def setup(self) -> None:
        self._store = self._spec.open()
        self._woken = Metrics.counter(METRICS_NAMESPACE, "keys_woken")

    def teardown(self) -> None:
        self._store.close()

    def process(self, _: bytes) -> Iterator[tuple[str, FrontierWork]]:
        keys = self._store.pending_keys()
        self._woken.inc(len(keys))
        if keys:
            _LOG.info("waking keys with pending work", extra={"keys": len(keys)})
        for key in keys:
            yield key, FrontierWork(())


class WakePendingKeys(beam.PTransform):
    """PBegin -> one empty (key, FrontierWork) per key the hosts table marks pending."""

    def __init__(self, store: StoreSpec) -> None:
        super().__init__()
        self._store = store

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (pbegin
                | "Start" >> beam.Impulse()
                | "PendingKeys" >> beam.ParDo(_PendingKeysFn(self._store)).with_output_types(
                    tuple[str, FrontierWork]))
