"""The ``crawler`` command: local stack, seeding, running, inspecting, client batches.

    crawler local up|down|status     the emulators (Pub/Sub, Bigtable, GCS) on loopback ports
    crawler flink up|down|status     a local Flink session cluster (JobManager + TaskManager)
    crawler seed URL... [--file F]   publish crawl requests to the frontier topic
    crawler run [options]            run the streaming pipeline (locally by default)
    crawler crawl [URL...]           all of the above in one go (the demo site without URLs)
    crawler show URL                 a URL's webtable row and WARC location
    crawler ls --host HOST           a host's URLs with status and fetch time
    crawler status                   where the crawl stands (URLs by status, quiescence)
    crawler explain URL              why a URL would or would not be crawled
    crawler provision --project P    topics, subscription, Bigtable tables, bucket (idempotent)
    crawler submit --client C URL... a client batch (at most 10,000 URLs); prints its id
    crawler batch status ID | ls     a batch's progress by outcome and ETA; the batches
    crawler api --clients FILE       the batch API over HTTP (bearer token per client)
    crawler export --out PATH        the webtable as Parquet/JSON Lines files (a batch job)
    crawler search "QUERY"           full-text search over the exported pages (ranked, snippets)

One module per command group (``local``, ``run``, ``inspect``, ``provision``, ``batches``),
each with a ``register(subparsers)`` that adds its commands and their handlers.
"""

from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli import batches, export, inspect, local, provision, search
from pipeline.cli import run as running
from pipeline.local.memtrace import install_from_env
from pipeline.local.stack import LocalStackError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawler", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", help="where the local stack keeps its state "
                        "(default: $CRAWLER_HOME or ./.crawler)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (local, running, inspect, provision, batches, export, search):
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    install_from_env()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if getattr(args, "pipeline_flags", False):  # run, crawl: the rest goes to the pipeline
        return int(args.handler(args, rest))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return int(args.handler(args))
    except LocalStackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
