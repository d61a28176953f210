"""``WriteRows``: ``transforms.rows.Row`` records -> a Bigtable table via ``WriteToBigTable``."""

from __future__ import annotations

from datetime import UTC, datetime

import apache_beam as beam
from apache_beam.io.gcp.bigtableio import WriteToBigTable
from google.cloud.bigtable.row import DirectRow

from transforms.rows import Row


def to_direct_row(row: Row) -> DirectRow:
    """A Bigtable mutation for a row; the cell timestamp is the event time (millisecond grain)."""
    direct = DirectRow(row_key=row.key.encode("utf-8"))
    at = datetime.fromtimestamp(int(row.at * 1000) / 1000, UTC)
    for family, columns in row.cells.items():
        for column, value in columns.items():
            direct.set_cell(family, column.encode(), value.encode("utf-8"), timestamp=at)
    return direct


class WriteRows(beam.PTransform):
    """Writes rows to one table (the Bigtable emulator when ``BIGTABLE_EMULATOR_HOST`` is set)."""

    def __init__(self, project: str, instance: str, table: str) -> None:
        super().__init__()
        self._project, self._instance, self._table = project, instance, table

    def expand(self, rows: beam.PCollection) -> beam.pvalue.PDone:
        return (rows
                | "ToMutation" >> beam.Map(to_direct_row)
                | "WriteToBigTable" >> WriteToBigTable(self._project, self._instance,
                                                       self._table))
