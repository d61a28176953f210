"""``WriteRows``: rows -> one Bigtable table, durably, and what waited for them.

Each element is a :class:`RowWrite`: a ``transforms.formats.rows.Row``, optionally the frontier
index entry its URL settles (deleted only after the row is written, so the index never loses work
whose terminal row did not make it) and the Pub/Sub acknowledgements that waited for the row.
The DoFn buffers a bundle's rows and writes them with the store's blocking ``MutateRows``
(``transforms.stores.bigtable``; the emulator when ``BIGTABLE_EMULATOR_HOST`` is set), at the
end of the bundle or every ``flush_rows`` rows, then deletes the index entries and releases the
acknowledgements: the transform's output, for ``transforms.acks.AcknowledgeMessages``. A client
batch URL's outcome cells go to the batches table in the same write, and its ``BatchEvent``s
come out after it (``RowsWritten.batch_events``: one element per batch per write, keyed by batch
id, so a busy sink adds an element per batch, not per URL, to the runner's queues).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from transforms import METRICS_NAMESPACE
from transforms.core.records import AckToken, BatchEvent, by_batch
from transforms.formats.batch_rows import outcome_rows
from transforms.formats.row_writes import RowWrite
from transforms.formats.rows import Row
from transforms.frontier import drain
from transforms.frontier.store import StoreBatch, StoreSpec


class _WriteRowsFn(beam.DoFn):
    def __init__(self, store: StoreSpec, table: str, webtable: bool, flush_rows: int) -> None:
        self._spec, self._table, self._webtable = store, table, webtable
        self._flush_rows = flush_rows

    def setup(self) -> None:
        self._store = self._spec.open()
        self._rows_written = Metrics.counter(METRICS_NAMESPACE, f"rows_written_{self._table}")

    def teardown(self) -> None:
        self._store.close()

    def start_bundle(self) -> None:
        self._rows: list[Row] = []
        self._deletes: list[str] = []
        self._tokens: list[AckToken] = []
        self._events: list[BatchEvent] = []

    def process(self, write: RowWrite | Row) -> Iterator[AckToken]:
        if isinstance(write, Row):
            write = RowWrite(write)
        self._rows.append(write.row)
        if write.index_delete:
            self._deletes.append(write.index_delete)
        self._tokens.extend(write.tokens)
        self._events.extend(write.events)
        if len(self._rows) >= self._flush_rows:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        now = Timestamp.now()
        for element in self._flush():
            if isinstance(element, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(element.tag, WindowedValue(
                    element.value, now, (GlobalWindow(),)))
            else:
                yield WindowedValue(element, now, (GlobalWindow(),))

    def _flush(self) -> list[Any]:
        if self._webtable:
            self._store.write(StoreBatch(rows=self._rows, batch_rows=outcome_rows(self._events),
                                         index_deletes=self._deletes))
            drain.note_settled(len(self._deletes))
        elif self._rows:
            self._store.write_rows(self._table, self._rows)
        self._rows_written.inc(len(self._rows))
        out: list[Any] = list(self._tokens)
        out += [beam.pvalue.TaggedOutput(BATCH_EVENTS_TAG, item)
                for item in by_batch(self._events)]
        self._rows, self._deletes, self._tokens, self._events = [], [], [], []
        return out


BATCH_EVENTS_TAG = "batch_events"


class RowsWritten(NamedTuple):
    tokens: beam.PCollection  # AckToken: what waited for the rows, once they are durable
    batch_events: beam.PCollection  # (batch id, (BatchEvent, ...)) of the rows' batch URLs


class WriteRows(beam.PTransform):
    """Writes ``RowWrite``s (or plain rows) to ``table``; outputs the ``AckToken``s they carried
    and their batch events, once their rows are durable.

    Args:
        store: where the tables are (``transforms.stores.bigtable.BigtableStoreSpec``).
        table: the table's name.
        webtable: the table is the store's webtable, whose rows settle index entries.
        flush_rows: write at most this many rows at once.
    """

    def __init__(self, store: StoreSpec, table: str, *, webtable: bool = False,
                 flush_rows: int = 2000) -> None:
        super().__init__()
        self._store, self._table, self._webtable = store, table, webtable
        self._flush_rows = flush_rows

    def expand(self, writes: beam.PCollection) -> RowsWritten:
        outputs = writes | "MutateRows" >> beam.ParDo(
            _WriteRowsFn(self._store, self._table, self._webtable, self._flush_rows)
        ).with_outputs(BATCH_EVENTS_TAG, main="tokens")
        return RowsWritten(outputs.tokens, outputs[BATCH_EVENTS_TAG])
