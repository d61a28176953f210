"""What the row sink (``transforms.storage.WriteRows``) is given: a row, the frontier index entry
it settles, the acknowledgements that wait for it and, for a client batch's URL, the batch events
its terminal status makes (pure; no Beam).

A batch URL's outcome is written with its row: the webtable row gets ``b:<batch id>`` cells and
the sink writes the batches table's ``u:<url>`` cells in the same flush, before the events go
on to ``transforms.batch_progress``.
"""

from __future__ import annotations

from typing import NamedTuple

from transforms.core.records import AckToken, BatchEvent, DeadLetter, FetchResult, StoredPage
from transforms.core.status import FETCHED
from transforms.formats.batch_rows import events_for, with_batch_cells
from transforms.formats.rows import (
    Row,
    dead_letter_row,
    stored_page_row,
    unstored_result_row,
)


class RowWrite(NamedTuple):
    """A row to write, the index entry to delete after it, what waits for it, and the batch
    events it records."""

    row: Row
    index_delete: str | None = None
    tokens: tuple[AckToken, ...] = ()
    events: tuple[BatchEvent, ...] = ()


def page_write(stored: StoredPage) -> RowWrite:
    fetch = stored.page.fetch
    events = events_for(fetch.request, FETCHED, fetch.fetched_at,
                        http_status=fetch.status, fetched_at=fetch.fetched_at,
                        warc_file=stored.location.file, warc_offset=stored.location.offset)
    return RowWrite(with_batch_cells(stored_page_row(stored), events), fetch.index_key, (),
                    events)


def fetch_write(result: FetchResult) -> RowWrite:
    events = events_for(result.request, result.outcome, result.fetched_at,
                        http_status=result.status, fetched_at=result.fetched_at,
                        detail=result.error_detail or result.detail)
    return RowWrite(with_batch_cells(unstored_result_row(result), events), result.index_key,
                    (), events)


def dead_letter_write(letter: DeadLetter) -> RowWrite:
    return RowWrite(dead_letter_row(letter), None, letter.tokens)
