"""Submitting the crawl to a Flink cluster on this machine, under the local driver.

``--flink_master`` naming a loopback address (``127.0.0.1:<rest port>``, ``localhost:...``; the
cluster of ``crawler flink up`` prints it) makes ``pipeline.main`` run the job like an embedded
Flink: progress, stop on idle or ``--max_pages``, summary. ``local_cluster_job`` sets what such a
submission needs unless the user gave it:

- ``--environment_type=EXTERNAL`` with a ``worker_pool`` this process starts (and stops): each
  TaskManager gets an SDK worker *process* that ends when its TaskManager's connection does,
  as on a real cluster, where the harness goes with the TaskManager's machine. LOOPBACK (the
  harness as threads of this process; pass ``--environment_type=LOOPBACK`` to get it) runs a
  crawl just as well, but it outlives a killed TaskManager, and with it the process-wide state
  of the dead job's harness: the Pub/Sub reader's lease keeper (``transforms.pubsub_source``)
  goes on extending the ack deadline of the messages the dead job pulled after its last
  checkpoint, for up to 10 minutes, so the restored job never sees them again (measured: 10
  URLs lost in one run of three), and its fetch service finishes the leases in flight;
- ``--flink_version`` and ``--flink_job_server_jar``: a job server for the cluster's Flink
  (``pipeline.local.flink_dist.FLINK_VERSION``): the published Beam 2.77 one if Maven has it, else
  the one ``pipeline.runners.flink_job_server`` assembles; the job server ships the runner's jars to
  the cluster with the job (``--flink_submit_uber_jar`` would need a self-contained jar, which the
  assembled one is not);
- ``--checkpointing_interval`` is set by ``pipeline.main`` for every Flink run; state backend,
  checkpoint directory and restart strategy come from the cluster's configuration
  (``pipeline.local.flink_dist.flink_config``).

When the driver stops, the job is cancelled through Flink's REST API, found by its job name
(``--job_name``, unique per run unless given): Beam's own cancel ends the job server's invocation
but leaves the Flink job running, which would then restart forever against a harness that is
gone.

Measured on the 2-core development machine (tests/integration/test_flink_cluster.py): from
``run`` to the Flink job's start about 24 s (some 5 s for Maven to find no published job server
before the assembled one is used, a few to start the job server and the worker pool, the rest
for the job server to translate the pipeline and upload its ~150 MB of runner jars to the
JobManager), and to the first request about 32 s (deployment, the SDK worker, robots.txt).
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
)

from pipeline.local import emulators
from pipeline.local.flink_dist import FLINK_VERSION, HOST

_LOG = logging.getLogger(__name__)
_TERMINAL = {"FINISHED", "CANCELED", "FAILED", "SUSPENDED"}
REST_ERRORS = (OSError, http.client.HTTPException, ValueError, KeyError)


def is_loopback_master(master: str | None) -> bool:
    """True for a ``--flink_master`` on this machine: ``127.x.x.x``, ``::1`` or ``localhost``,
    with or without ``http://`` and a port."""
    if not master or re.fullmatch(r"\[[a-z]+\]", master):  # [local], [auto]: embedded
        return False
    host = urlsplit(master if "//" in master else f"//{master}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def rest_url(master: str) -> str:
    """``http://host:port`` of a ``--flink_master`` value."""
    return master.rstrip("/") if "//" in master else f"http://{master}"


def call_rest(url: str, method: str = "GET", timeout: float = 5.0) -> Any:
    """Calls Flink's REST API at ``url`` (never through a proxy); returns the decoded JSON.

    Raises:
        One of ``REST_ERRORS``.
    """
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url, method=method), timeout=timeout) as reply:
        body = reply.read()
    return json.loads(body) if body else None


def active_jobs(master: str, name: str | None = None) -> list[str]:
    """Ids of the cluster's jobs (named ``name``, if given) not in a terminal state."""
    jobs = call_rest(f"{rest_url(master)}/jobs/overview")["jobs"]
    return [j["jid"] for j in jobs
            if j["state"] not in _TERMINAL and (name is None or j["name"] == name)]


def cancel_job(master: str, job_id: str) -> None:
    """Asks the JobManager to cancel ``job_id``; returns at once."""
    call_rest(f"{rest_url(master)}/jobs/{job_id}?mode=cancel", method="PATCH")


def apply_defaults(options: PipelineOptions) -> None:
    """Sets a job server for the cluster's Flink and a unique job name (the Flink job's name,
    by which it is cancelled), unless given."""
    flink = options.view_as(FlinkRunnerOptions)
    flink.flink_version = FLINK_VERSION.rsplit(".", 1)[0]
    if not flink.flink_job_server_jar:
        from pipeline.runners.flink_job_server import PUBLISHED, ensure_job_server

        # The published job server of this Beam release for the cluster's Flink.
        published = (f"beam-runners-flink-{flink.flink_version}-job-server", PUBLISHED[1])
        flink.flink_job_server_jar = str(ensure_job_server(published=published).jar)
    google = options.view_as(GoogleCloudOptions)
    if not google.job_name:
        google.job_name = f"crawler-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def worker_pool(log: Path, timeout: float = 60.0) -> Iterator[str]:
    """Runs Beam's worker pool (``apache_beam.runners.worker.worker_pool_main``) in a process
    group of its own until the block ends; yields its address for ``--environment_config``.

    The pool starts one SDK worker process per TaskManager that asks for one; the worker ends
    when its TaskManager's connection does. It inherits this process's environment (the
    emulators' variables) with this interpreter first on ``PATH``, as the pool starts workers
    with ``python``.
    """
    port = emulators.free_ports(1, HOST)[0]
    address = f"{HOST}:{port}"
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", os.defpath)]))
    argv = [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
            f"--service_port={port}"]
    pool = emulators.spawn(argv, log, env)
    _LOG.info("SDK worker pool (pid %d) on %s, log %s", pool.pid, address, log)
    try:
        channel = grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)])
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
        except grpc.FutureTimeoutError as exc:
            raise RuntimeError(f"the SDK worker pool did not start; see {log}") from exc
        finally:
            channel.close()
        yield address
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pool.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                pool.wait(timeout=5)
                break


@contextlib.contextmanager
def local_cluster_job(options: PipelineOptions) -> Iterator[None]:
    """Applies the defaults and, unless ``--environment_type`` is given, runs the SDK workers
    in a ``worker_pool`` (``--environment_type=EXTERNAL``); when the block ends, cancels the
    job if it still runs, then stops the pool.

    Beam's own cancel (``pipeline.local.driver`` calls it) ends the job server's invocation but,
    measured with the Beam 2.62 Flink 1.19 job server, leaves the Flink job running.

    Raises:
        ValueError: Nothing answers at ``--flink_master`` (start it with `crawler flink up`).
    """
    master = options.view_as(FlinkRunnerOptions).flink_master
    try:
        active_jobs(master)
    except REST_ERRORS as exc:
        raise ValueError(f"no Flink cluster answers at {rest_url(master)} ({exc}); start one "
                         "with `crawler flink up`") from exc
    apply_defaults(options)
    name = options.view_as(GoogleCloudOptions).job_name
    portable = options.view_as(PortableOptions)
    with contextlib.ExitStack() as stack:
        if not portable.environment_type:
            log = Path(tempfile.gettempdir()) / f"{name}-sdk-workers.log"
            portable.environment_config = stack.enter_context(worker_pool(log))
            portable.environment_type = "EXTERNAL"
        try:
            yield
        finally:
            cancel_jobs(master, name)


def cancel_jobs(master: str, name: str, timeout: float = 30.0) -> None:
    """Cancels the cluster's jobs named ``name`` and waits until they are terminal; logs
    (never raises) when the cluster does not answer or a job outlives ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    try:
        jobs = active_jobs(master, name)
        for job in jobs:
            _LOG.info("cancelling Flink job %s (%s)", job, name)
            cancel_job(master, job)
        while jobs and time.monotonic() < deadline:
            time.sleep(0.2)
            jobs = active_jobs(master, name)
    except REST_ERRORS as exc:
        _LOG.warning("could not cancel the Flink job %s at %s: %s", name, master, exc)
        return
    if jobs:
        _LOG.warning("Flink job %s (%s) not cancelled after %.0f s", name, jobs, timeout)
