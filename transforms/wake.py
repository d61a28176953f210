"""``WakePendingKeys`` and ``WakeRunningBatches``: a new job touches, once at its start, every
key that has work pending.

A key rebuilds its state from the tables when it is touched with empty state
(``transforms.frontier.rebuild``), but a key whose URLs were all in an earlier job's state is
touched by nothing in the new job: its URLs sit in the index while no message comes for it. The
hosts table marks such keys (``h:pending``, written by the frontier whenever a key's pending work
starts or ends), so at the start of a job this step reads the marked keys and sends each an
empty element; the key rebuilds and carries on.

    Impulse -> read the hosts table's pending keys (one scan) -> (key, FrontierWork(()))

``WakeRunningBatches`` does the same for client batches: every batch whose record says
``running`` gets a ``BatchWake``, so its progress key re-reads the row and finishes a batch whose
last outcomes were written by the earlier job.

The impulse fires once per job: a Flink job restored from a checkpoint does not scan again
(its state is there), and waking a key that has state is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms import METRICS_NAMESPACE
from transforms.core.records import BatchWake, FrontierWork
from transforms.formats.schema import BATCH_META_FAMILY
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


class _RunningBatchesFn(beam.DoFn):
    def __init__(self, store: StoreSpec, table: str) -> None:
        self._spec, self._table = store, table

    def setup(self) -> None:
        self._store = self._spec.open()

    def process(self, _: bytes) -> Iterator[tuple[str, BatchWake]]:
        try:
            rows = self._store.scan_rows(self._table, BATCH_META_FAMILY)
        except Exception as exc:  # a project provisioned before batches: no table, no batch
            _LOG.warning("could not read the batches table %s: %s", self._table, exc)
            return
        for batch_id, cells in rows:
            if cells.get(BATCH_META_FAMILY, {}).get("state") == "running":
                yield batch_id, BatchWake()


class WakeRunningBatches(beam.PTransform):
    """PBegin -> (batch id, BatchWake) for every batch the table says is running."""

    def __init__(self, store: StoreSpec, table: str) -> None:
        super().__init__()
        self._store, self._table = store, table

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (pbegin | "Start" >> beam.Impulse()
                | "RunningBatches" >> beam.ParDo(_RunningBatchesFn(self._store, self._table))
                .with_output_types(tuple[str, Any]))
