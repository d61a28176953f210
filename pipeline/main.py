"""Entry point of the pipeline: parse and validate options, build the graph, run it.

Locally (DirectRunner, the default) the job runs in streaming mode against whatever the Google
client libraries point at (the emulators when ``*_EMULATOR_HOST`` is set) until a stopping
condition; on Dataflow the launcher returns once the job is submitted.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions

from pipeline.graph import build_pipeline
from pipeline.local_run import RunSummary, run_local
from pipeline.options import CrawlerOptions

LOCAL_RUNNERS = {None, "DirectRunner", "direct", "SwitchingDirectRunner", "BundleBasedDirectRunner"}


def run(argv: list[str] | None = None, out: TextIO = sys.stdout) -> RunSummary | object:
    """Runs the crawl. Returns the local run's summary, or the submitted job's result."""
    options = CrawlerOptions(argv)
    options.validate_crawler()
    standard = options.view_as(StandardOptions)
    standard.streaming = True
    if standard.runner in LOCAL_RUNNERS:
        options.validate_local_run()
        return run_local(options, out)
    p = beam.Pipeline(options=options)
    build_pipeline(p, options)
    return p.run()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    run(sys.argv[1:])


if __name__ == "__main__":
    main()
