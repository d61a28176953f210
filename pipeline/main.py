"""Entry point of the pipeline: parse and validate options, build the graph, run it.

Locally (DirectRunner, the default, Beam's Prism, ``--runner=PrismRunner``, built on first use
and started as a job service for the run, see ``pipeline.runners.prism``, or FlinkRunner with an
embedded Flink,
``--flink_master=[local]``, or a Flink cluster on this machine, ``--flink_master=127.0.0.1:PORT``,
see ``pipeline.local.flink_submit``) the job runs in streaming mode against whatever the Google
client libraries point at (the emulators when ``*_EMULATOR_HOST`` is set) until a stopping
condition, with progress and a summary. On Dataflow or a remote Flink cluster the launcher returns
once the job is submitted, unless ``--wait`` is given.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    PortableOptions,
    PrismRunnerOptions,
    StandardOptions,
)

from pipeline.graph import build_pipeline
from pipeline.local import flink_submit
from pipeline.local.driver import RunSummary, run_local
from pipeline.options import PRISM_RUNNERS, CrawlerOptions, validate_local_run
from pipeline.runners import prism

LOCAL_RUNNERS = {None, "DirectRunner", "direct", "SwitchingDirectRunner", "BundleBasedDirectRunner"}
FLINK_RUNNERS = {"FlinkRunner", "flink"}
EMBEDDED_FLINK = {"[local]", "[auto]"}
# Bundle finalization (and so Pub/Sub acknowledgement) happens after a completed checkpoint.
DEFAULT_CHECKPOINT_MS = 2000


def is_embedded_flink(options: CrawlerOptions) -> bool:
    """FlinkRunner on an embedded Flink started by the runner itself (no cluster, no endpoint)."""
    return (options.view_as(StandardOptions).runner in FLINK_RUNNERS
            and options.view_as(FlinkRunnerOptions).flink_master in EMBEDDED_FLINK
            and not options.view_as(PortableOptions).job_endpoint)


def is_local_flink_cluster(options: CrawlerOptions) -> bool:
    """FlinkRunner submitting to a Flink cluster on this machine (a loopback --flink_master)."""
    return (options.view_as(StandardOptions).runner in FLINK_RUNNERS
            and flink_submit.is_loopback_master(options.view_as(FlinkRunnerOptions).flink_master)
            and not options.view_as(PortableOptions).job_endpoint)


def is_local_prism(options: CrawlerOptions) -> bool:
    """PrismRunner with no job endpoint: the crawler starts Prism on this machine for the run."""
    return (options.view_as(StandardOptions).runner in PRISM_RUNNERS
            and not options.view_as(PortableOptions).job_endpoint)


@contextlib.contextmanager
def local_prism(options: CrawlerOptions, out: TextIO = sys.stdout) -> Iterator[None]:
    """Starts Prism (``--prism_location``, else the one ``pipeline.runners.prism`` builds) for a
    local run and points the job at it, its SDK worker in this process (LOOPBACK: the driver
    reads the fetch service's and the sinks' in-process counters to drain and stop). Without
    ``go`` (or if the build fails) the run falls back to the DirectRunner, with a notice."""
    standard = options.view_as(StandardOptions)
    location = options.view_as(PrismRunnerOptions).prism_location
    try:
        binary = Path(location) if location else prism.ensure_prism()
    except prism.PrismUnavailable as exc:
        print(f"Prism unavailable ({str(exc).splitlines()[0]}): running on the DirectRunner",
              file=out, flush=True)
        standard.runner = "DirectRunner"
        yield
        return
    portable = options.view_as(PortableOptions)
    if not portable.environment_type:
        portable.environment_type = "LOOPBACK"
    with prism.prism_server(binary) as endpoint:
        portable.job_endpoint = endpoint
        try:
            yield
        finally:
            portable.job_endpoint = None


@contextlib.contextmanager
def local_checkpoint_storage(options: CrawlerOptions) -> Iterator[None]:
    """An embedded Flink checkpoints to a temporary folder unless told otherwise: Flink's
    default keeps checkpoints in the JobManager's memory, capped at 5 MB, and a crawl's state
    (queues, seen filters, WARC buffers) outgrows that within seconds; every failed checkpoint
    then failed the job, which restarted and fetched URLs again."""
    crawler = options.view_as(CrawlerOptions)
    if not is_embedded_flink(options) or crawler.state_backend is not None:
        yield
        return
    folder = tempfile.mkdtemp(prefix="crawler-flink-checkpoints-")
    crawler.state_backend = "filesystem"
    crawler.state_backend_storage_path = Path(folder).as_uri()
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(argv: list[str] | None = None, out: TextIO = sys.stdout) -> RunSummary | object:
    """Runs the crawl. Returns the local run's summary, or the submitted job's result."""
    options = CrawlerOptions(argv)
    crawler = options.view_as(CrawlerOptions)
    if options.view_as(StandardOptions).runner in FLINK_RUNNERS:
        if crawler.checkpointing_interval is None:
            crawler.checkpointing_interval = DEFAULT_CHECKPOINT_MS
        if crawler.finish_bundle_before_checkpointing is None:
            crawler.finish_bundle_before_checkpointing = True
    options.validate_crawler()
    settings = options.settings()  # the policy file is read here, once
    standard = options.view_as(StandardOptions)
    standard.streaming = True
    if is_local_flink_cluster(options):
        validate_local_run(settings)
        with flink_submit.local_cluster_job(options):
            return run_local(options, settings, out)
    if is_local_prism(options):
        validate_local_run(settings)
        with local_prism(options, out):
            return run_local(options, settings, out)
    if standard.runner in LOCAL_RUNNERS or is_embedded_flink(options):
        validate_local_run(settings)
        flink = options.view_as(FlinkRunnerOptions)
        if is_embedded_flink(options) and not flink.flink_job_server_jar:
            from pipeline.runners.flink_job_server import ensure_job_server

            flink.flink_job_server_jar = str(ensure_job_server().jar)
        with local_checkpoint_storage(options):
            return run_local(options, settings, out)
    p = beam.Pipeline(options=options)
    build_pipeline(p, options, settings=settings)
    result = p.run()
    if settings.wait:
        result.wait_until_finish()
    return result


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    run(sys.argv[1:])


if __name__ == "__main__":
    main()
