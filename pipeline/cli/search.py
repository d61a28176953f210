"""``crawler search``: full-text search over the exported pages (index: ``pipeline.ops.search``).

    crawler search "query" [--exports PATH] [--limit N] [--index FILE] [--rebuild] [--lang L]

``--exports`` defaults to the local stack's exports folder (``gs://<bucket>/exports``, next to
its ``--warc_prefix``); with a stack up, ``gs://`` is read from its GCS emulator. Exit status 0
with results or none, 2 for a bad query or flags, 1 when the exports cannot be read.
"""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cli.common import state_dir, use_local_stack

if TYPE_CHECKING:  # the index module loads pyarrow: imported when the command runs
    from pipeline.ops.search import SearchResult

_LOG = logging.getLogger(__name__)
_WIDTH = 100


def register(sub: Any) -> None:
    search = sub.add_parser(
        "search", help="full-text search over the exported pages (SQLite FTS5, BM25): "
        "ranked URLs with titles and snippets; noindex pages are never in the index")
    search.add_argument("query", help='FTS5 syntax: words (all must match), "a phrase", '
                        "prefix*, OR, NOT, title:word")
    search.add_argument("--exports", help="the exports folder, gs://bucket/prefix or a local "
                        "directory, whose pages/dt=*/hour=*/*.parquet are indexed (default: "
                        "the local stack's gs://<bucket>/exports)")
    search.add_argument("--limit", type=int, default=10, help="results to print (default: 10)")
    search.add_argument("--index", help="the index file (default: <state dir>/search/"
                        "<sha1 of the exports location>.sqlite)")
    search.add_argument("--rebuild", action="store_true",
                        help="start the index over instead of adding the new files")
    search.add_argument("--lang", help="only pages in this language or a variant of it "
                        "(en matches en-GB)")
    search.set_defaults(handler=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    """Updates the index, prints the ranked results and a summary line."""
    from pipeline.ops import search

    if args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return 2
    stack = use_local_stack(args)  # points gs:// at the emulator when the stack is up
    exports = args.exports
    if not exports:
        if stack is None:
            print("error: no --exports and no local stack running (crawler local up)",
                  file=sys.stderr)
            return 2
        exports = search.default_exports(_warc_prefix(stack.pipeline_args([])))
    index = Path(args.index) if args.index else search.default_index_path(state_dir(args), exports)
    try:
        result = search.run_search(args.query, exports, index, limit=args.limit, lang=args.lang,
                            rebuild=args.rebuild)
    except search.QuerySyntaxError as exc:
        print(f"error: {exc} (see https://sqlite.org/fts5.html#full_text_query_syntax)",
              file=sys.stderr)
        return 2
    except Exception as exc:  # listing or reading the exports failed: say so, exit 1
        _LOG.debug("search failed", exc_info=True)
        print(f"error: cannot search {exports}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(format_result(result, exports))
    return 0


def format_result(result: SearchResult, exports: str) -> str:
    """The hits (rank, URL, title, snippet), then one summary line."""
    lines: list[str] = []
    for hit in result.hits:
        lines.append(f"{hit.rank:>3}. {hit.url}")
        lines.append(f"     {hit.title or '(no title)'}")
        lines.extend(textwrap.wrap(hit.snippet, _WIDTH, initial_indent="     ",
                                   subsequent_indent="     "))
        lines.append("")
    update = result.update
    lines.append(
        f"{len(result.hits)} result(s) for {result.query!r}; {update.docs} docs from "
        f"{update.files_total} file(s) in {exports} ({update.files_new} new"
        + (f", {update.files_failed} unreadable" if update.files_failed else "")
        + (", rebuilt" if update.rebuilt else "")
        + f", {update.seconds:.2f} s); query {result.query_ms:.1f} ms")
    return "\n".join(lines)


def _warc_prefix(pipeline_args: list[str]) -> str:
    """The ``--warc_prefix`` value among a stack's pipeline flags."""
    for flag in pipeline_args:
        if flag.startswith("--warc_prefix="):
            return flag.split("=", 1)[1]
    raise ValueError("the local stack names no --warc_prefix")
