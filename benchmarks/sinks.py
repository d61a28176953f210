"""Sink microbenchmarks against the emulators: WARC MB/s to GCS and webtable rows/s to Bigtable.

    python -m benchmarks.sinks --repeat 3 --out results/sinks.json     (``make bench-stages``)

Starts its own local stack (the emulators, in a temporary state folder) and writes with the code
the pipeline uses: ``WarcFileBuilder`` + Beam's ``FileSystems`` to ``gs://`` (WriteWarc's path),
and ``to_direct_row`` rows through the Bigtable client's ``mutate_rows`` in batches (what
``WriteToBigTable`` does). The inputs are the corpus pages of ``benchmarks.stages``. MB are page
bytes (before gzip) per second, so the figure compares with the crawl's download rate.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.stages import corpus_pages, corpus_parser, repetitions, timed, write_results
from transforms.core.records import CrawlRequest, FetchResult, ParsedPage, StoredPage, WarcLocation
from transforms.formats.rows import Row, stored_page_row
from transforms.formats.warc import WarcFileBuilder

PAGES_PER_WARC = 100
ROWS_PER_BATCH = 100


def as_fetch(url: str, body: bytes, at: float) -> FetchResult:
    headers = (("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body))))
    return FetchResult(request=CrawlRequest(url=url), host="docs.local", fetched_at=at,
                       final_url=url, status=200, content_type="text/html; charset=utf-8",
                       http_version="1.1", reason="OK", headers=headers, body=body,
                       content_length=len(body))


def build_warcs(results: Sequence[FetchResult]) -> list[bytes]:
    files = []
    for i in range(0, len(results), PAGES_PER_WARC):
        builder = WarcFileBuilder(f"bench-{i}.warc.gz", "beam-crawler-bench")
        for result in results[i:i + PAGES_PER_WARC]:
            builder.add(result)
        files.append(builder.getvalue())
    return files


def upload(files: Sequence[bytes], prefix: str) -> None:
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    for n, data in enumerate(files):
        with FileSystems.create(f"{prefix}/{n:05d}.warc.gz", mime_type="application/warc",
                                compression_type=CompressionTypes.UNCOMPRESSED) as out:
            out.write(data)


def write_rows(table: Any, rows: Sequence[Row]) -> int:
    """Writes ``rows`` as the pipeline's sinks do (``BigtableStore.write_rows``), in batches
    of ``ROWS_PER_BATCH`` rows; ``table`` is the data client's table."""
    from transforms.stores.bigtable import to_mutation_entry

    for i in range(0, len(rows), ROWS_PER_BATCH):
        table.bulk_mutate_rows([to_mutation_entry(r) for r in rows[i:i + ROWS_PER_BATCH]])
    return len(rows)


def _check_written(table: Any, row: Row, prefix: str, files: int) -> None:
    """The figures count only what really landed: the last row reads back, all files exist."""
    from apache_beam.io.filesystems import FileSystems

    got = table.read_row(row.key.encode())
    if got is None or got.cells["c"][b"warc_offset"][0].value.decode() != \
            row.cells["c"]["warc_offset"]:
        raise RuntimeError(f"row {row.key} did not read back")
    found = len(FileSystems.match([prefix + "**"])[0].metadata_list)
    if found != files:
        raise RuntimeError(f"{found} WARC files under {prefix}, expected {files}")


def run(pages: list[tuple[str, bytes]], repeat: int) -> dict[str, Any]:
    from google.cloud import bigtable

    from pipeline.local.stack import start_local_stack, stop_local_stack
    from transforms.formats.schema import WEBTABLE

    state = Path(tempfile.mkdtemp(prefix="crawl-sinks-"))
    try:
        stack = start_local_stack(state)
        os.environ.update(stack.env())
        now = time.time()
        results = [as_fetch(u, b, now) for u, b in pages]
        page_mb = sum(len(b) for _, b in pages) / 1e6
        files = build_warcs(results)
        runs = iter(range(1_000_000))
        build = timed(lambda: len(results) if build_warcs(results) else 0, repeat)
        def build_and_upload() -> int:
            upload(build_warcs(results), f"gs://{stack.bucket}/bench/{next(runs)}")
            return len(results)

        write = timed(build_and_upload, repeat)
        table = bigtable.Client(project=stack.project, admin=True) \
            .instance(stack.instance).table(WEBTABLE)
        rows = [stored_page_row(StoredPage(
                    ParsedPage(r.without_body(), f"page {i}", (), f"{i:016x}"),
                    WarcLocation(f"gs://{stack.bucket}/bench/x.warc.gz", i * 1000, 1000)))
                for i, r in enumerate(results)]
        from google.cloud.bigtable.data import BigtableDataClient

        writer = BigtableDataClient(project=stack.project).get_table(stack.instance, WEBTABLE)
        row_rate = timed(lambda: write_rows(writer, rows), repeat)
        _check_written(table, rows[-1], f"gs://{stack.bucket}/bench/", len(files) * repeat)
        return {
            "pages": len(pages), "page_mb": round(page_mb, 2),
            "warc_gzip_mb": round(sum(len(f) for f in files) / 1e6, 2),
            "warc_build_mb_per_s": _scaled(build, page_mb / len(pages)),
            "warc_to_gcs_mb_per_s": _scaled(write, page_mb / len(pages)),
            "bigtable_rows_per_s": row_rate,
            "cells_per_row": sum(len(v) for v in rows[0].cells.values()),
            "rows_per_batch": ROWS_PER_BATCH, "pages_per_warc": PAGES_PER_WARC,
        }
    finally:
        stop_local_stack(state)
        shutil.rmtree(state, ignore_errors=True)


def _scaled(rate: dict[str, float], factor: float) -> dict[str, float]:
    """Pages/s -> MB/s."""
    return {k: round(v * factor, 2) for k, v in rate.items()}


def report(r: dict[str, Any]) -> str:
    def cell(s: dict[str, float]) -> str:
        return f"{s['median']:,.1f} ({s['min']:,.1f}..{s['max']:,.1f})"

    return "\n".join([
        f"{r['pages']} pages, {r['page_mb']} MB of HTML ({r['warc_gzip_mb']} MB as gzipped WARC)",
        "| sink | median (min..max) |", "|---|---|",
        f"| WARC build (gzip level 6), page MB/s | {cell(r['warc_build_mb_per_s'])} |",
        "| WARC build + write to the GCS emulator, page MB/s | "
        f"{cell(r['warc_to_gcs_mb_per_s'])} |",
        f"| webtable rows to the Bigtable emulator ({r['cells_per_row']} cells), rows/s | "
        f"{cell(r['bigtable_rows_per_s'])} |"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = corpus_parser(__doc__ or "", "results/sinks.json").parse_args(argv)
    results = run(corpus_pages(args), repetitions(args))
    print(report(results))
    write_results(args.out, results)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
