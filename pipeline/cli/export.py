"""``crawler export``: the webtable as Parquet or JSON Lines files, by a batch Beam job.

    crawler export --out gs://bucket/exports [--since ISO] [--until ISO] [--format parquet|jsonl]

Like ``crawler run`` it aims at the local stack when one is up and runs on the DirectRunner
unless ``--runner`` says otherwise; other flags go to Beam (``--runner FlinkRunner
--flink_master=[local]``, Dataflow's ``--region``, ...). The job is in
``pipeline.ops.export``; the layout and schemas in ``transforms.formats.exports``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

from pipeline.cli.common import add_table_flags, bigtable_target
from transforms.formats.schema import WEBTABLE

_LOG = logging.getLogger(__name__)


def register(sub: Any) -> None:
    export = sub.add_parser(
        "export", help="the webtable's pages, outcomes and near duplicates as Hive-partitioned "
        "Parquet or JSON Lines files (a batch Beam job; other flags go to Beam, e.g. --runner)")
    export.add_argument("--since", help="only rows whose event time (fetched_at for pages, "
                        "the outcome's time otherwise) is at or after this ISO 8601 date or "
                        "time, UTC unless it names a zone (default: the beginning)")
    export.add_argument("--until", help="... and before this one (default: no end)")
    export.add_argument("--format", default="parquet",
                        help="parquet (zstd) or jsonl (default: parquet)")
    export.add_argument("--out", required=True,
                        help="where the datasets go: gs://bucket/prefix or a local directory")
    export.add_argument("--shards", type=int, default=1,
                        help="files per dataset and hour partition (default: 1)")
    add_table_flags(export, WEBTABLE)
    export.set_defaults(handler=cmd_export, pipeline_flags=True)


def cmd_export(args: argparse.Namespace, beam_argv: list[str]) -> int:
    """Validates the flags (exit 2 with a message when wrong), runs the export, prints its
    summary; exit 1 when the job failed."""
    from pipeline.main import is_embedded_flink, is_local_flink_cluster
    from pipeline.ops.export import ExportSpec, parse_time, run_export
    from pipeline.options import CrawlerOptions

    try:
        since = parse_time(args.since, "--since") if args.since else None
        until = parse_time(args.until, "--until") if args.until else None
        ExportSpec("-", "-", "-", args.out, args.format, since, until, args.shards).validate()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    project, instance, table = bigtable_target(args)
    spec = ExportSpec(project, instance, table, args.out, args.format, since, until,
                      args.shards)
    options = CrawlerOptions([f"--project={project}", *beam_argv])
    with contextlib.ExitStack() as stack:
        if is_local_flink_cluster(options):
            from pipeline.local import flink_submit

            stack.enter_context(flink_submit.local_cluster_job(options))
        elif is_embedded_flink(options):
            from apache_beam.options.pipeline_options import FlinkRunnerOptions

            from pipeline.runners.flink_job_server import ensure_job_server

            flink = options.view_as(FlinkRunnerOptions)
            if not flink.flink_job_server_jar:
                flink.flink_job_server_jar = str(ensure_job_server().jar)
        print(f"exporting {table} of {project}/{instance} to {spec.out} ({spec.fmt}) ...",
              flush=True)
        try:
            summary = run_export(spec, options)
        except Exception as exc:  # the job failed: say so, with the cause, and exit 1
            _LOG.debug("export failed", exc_info=True)
            print(f"export failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    print(summary.format(spec))
    return 0
