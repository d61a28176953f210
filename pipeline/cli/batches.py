"""``crawler submit``, ``crawler batch status|ls`` and ``crawler api``: client batches.

    crawler submit --client acme [--batch-id ID] URL... | --file F
    crawler batch status ID [--json]
    crawler batch ls [--client NAME] [--json]
    crawler api --clients clients.json [--host 127.0.0.1] [--port 8080]

The project, topic and Bigtable instance default to the local stack's, as for ``crawler seed``
and ``crawler show``; on Google Cloud pass ``--project`` (and ``--instance``, ``--topic``).
The work itself is in ``pipeline.ops.batches`` (shared with the API in ``pipeline.api``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cli.common import add_table_flags, bigtable_target, use_local_stack
from transforms.core.batches import DEFAULT_MILESTONE_STEP, BatchError, BatchSpec, new_batch_id
from transforms.formats.schema import BATCHES_TABLE, DEFAULT_TOPIC

if TYPE_CHECKING:
    from pipeline.ops.batches import BatchTable


def register(sub: Any) -> None:
    submit = sub.add_parser("submit", help="submit a client batch (at most 10,000 URLs) to the "
                            "frontier topic; prints its id")
    submit.add_argument("urls", nargs="*", metavar="URL")
    submit.add_argument("--file", help="file with one URL per line ('-' for stdin; blank lines "
                        "and lines starting with '#' are skipped)")
    submit.add_argument("--client", required=True, help="the client's name, e.g. acme")
    submit.add_argument("--batch-id", help="the batch's id (default: a new random one); the "
                        "same id again submits nothing new")
    submit.add_argument("--priority", type=int, default=0,
                        help="added to each URL's priority within the client's share "
                             "(default: 0)")
    submit.add_argument("--cache-hours", type=float, help="answer URLs fetched less than this "
                        "many hours ago from the webtable (default: the response's freshness)")
    submit.add_argument("--notify", metavar="URL", help="webhook URL for the notifications")
    submit.add_argument("--milestone-step", type=int, default=DEFAULT_MILESTONE_STEP,
                        help="a notification every this many percent; 0: only when done "
                             f"(default: {DEFAULT_MILESTONE_STEP})")
    submit.add_argument("--topic", help=f"frontier topic (default: {DEFAULT_TOPIC})")
    add_table_flags(submit, BATCHES_TABLE)
    submit.set_defaults(handler=cmd_submit)

    batch = sub.add_parser("batch", help="a client batch's status, or the list of batches")
    actions = batch.add_subparsers(dest="batch_command", required=True)
    status = actions.add_parser("status", help="a batch's state, counts by outcome, progress "
                                "and ETA (exit status 1 if it is not recorded yet)")
    status.add_argument("batch_id", metavar="ID")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    add_table_flags(status, BATCHES_TABLE)
    status.set_defaults(handler=cmd_batch_status)
    listing = actions.add_parser("ls", help="the recorded batches, newest first")
    listing.add_argument("--client", help="only this client's batches")
    listing.add_argument("--json", action="store_true", help="print one JSON list")
    add_table_flags(listing, BATCHES_TABLE)
    listing.set_defaults(handler=cmd_batch_ls)

    api = sub.add_parser("api", help="serve the batch API over HTTP (POST /batches, "
                         "GET /batches/ID, GET /healthz)")
    api.add_argument("--clients", required=True, metavar="FILE",
                     help='clients file: {"clients": {"NAME": {"token": ..., "secret": ...}}}')
    api.add_argument("--host", default="127.0.0.1",
                     help="address to listen on (default: 127.0.0.1; 0.0.0.0 in a container)")
    api.add_argument("--port", type=int, default=8080, help="port (default: 8080)")
    api.add_argument("--topic", help=f"frontier topic (default: {DEFAULT_TOPIC})")
    add_table_flags(api, BATCHES_TABLE)
    api.set_defaults(handler=cmd_api)


def url_lines(text: str) -> list[str]:
    """The URLs of a file: one per line, without blank lines and ``#`` comments."""
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _topic(args: argparse.Namespace) -> str:
    stack = use_local_stack(args)
    return args.topic or (stack.topic if stack else DEFAULT_TOPIC)


def cmd_submit(args: argparse.Namespace) -> int:
    from pipeline.ops.batches import pubsub_publisher, submit_batch

    if args.urls and args.file:
        print("error: give URLs or --file, not both", file=sys.stderr)
        return 2
    urls = list(args.urls)
    if args.file:
        urls = url_lines(sys.stdin.read() if args.file == "-" else Path(args.file).read_text())
    spec = BatchSpec(batch_id=args.batch_id or new_batch_id(), client=args.client,
                     priority=args.priority, cache_hours=args.cache_hours, notify=args.notify,
                     milestone_step=args.milestone_step)
    store, table, project = _store(args)
    try:
        result = submit_batch(spec, urls, publish=pubsub_publisher(project, _topic(args)),
                              store=store, table=table)
    except BatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if result.existing:
        print(f"{result.batch_id}: exists already, nothing new submitted "
              f"({result.unique:,} unique URLs, {result.invalid:,} invalid)")
    else:
        print(f"{result.batch_id}: submitted {result.sent:,} URLs ({result.unique:,} unique, "
              f"{result.invalid:,} invalid)")
    return 0


def _store(args: argparse.Namespace) -> tuple[BatchTable, str, str]:
    """The batches table of ``--project``/``--instance``/``--table`` (else the local
    stack's): (store, table name, project)."""
    from transforms.stores.bigtable import BigtableStoreSpec

    project, instance, table = bigtable_target(args)
    return BigtableStoreSpec(project, instance, batches=table).open(), table, project


def cmd_batch_status(args: argparse.Namespace) -> int:
    from pipeline.ops.batches import batch_status, format_status

    store, table, _ = _store(args)
    doc = batch_status(store, args.batch_id, time.time(), table=table)
    if doc is None:
        print(f"no batch {args.batch_id} (never submitted, or not yet taken in by the "
              "pipeline)", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=2) if args.json else format_status(doc))
    return 0


def cmd_batch_ls(args: argparse.Namespace) -> int:
    from pipeline.ops.batches import format_list, list_batches

    store, table, _ = _store(args)
    docs = list_batches(store, args.client, table=table)
    print(json.dumps(docs, indent=2) if args.json else format_list(docs))
    return 0


def cmd_api(args: argparse.Namespace) -> int:
    from pipeline.api import serve
    from pipeline.ops.batches import pubsub_publisher
    from transforms.core.clients import ClientsError, parse_clients

    try:
        clients = parse_clients(Path(args.clients).read_text())
    except (OSError, ClientsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store, table, project = _store(args)
    serve(clients, pubsub_publisher(project, _topic(args)), store, host=args.host,
          port=args.port, table=table)
    return 0
