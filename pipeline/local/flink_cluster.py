"""A local Flink session cluster: one JobManager and one TaskManager, separate processes.

The embedded Flink of ``--flink_master=[local]`` runs inside the job server's JVM, so nothing of
it can fail on its own. This cluster is the production shape on one machine: a JobManager
(``jobmanager.sh start-foreground``, the standalone session entrypoint) and a TaskManager
(``taskmanager.sh start-foreground``), each a JVM in its own process group, started from the
distribution ``pipeline.local.flink_dist`` installs from PyPI. ``crawler run --runner=FlinkRunner
--flink_master=127.0.0.1:<rest port>`` submits the crawl to it (``pipeline.main``,
``pipeline.local.flink_submit``); the Python SDK workers run in a worker pool the submitting process
starts, one process per TaskManager, reached over loopback gRPC.

Everything lives in a state directory (``crawler --state-dir``, default ``.crawler``)::

    flink.json                  what runs: ports, pids, the TaskManagers started so far
    flink.lock                  serializes start and stop
    flink-cluster/conf/         the generated config.yaml and log4j files (FLINK_CONF_DIR)
    flink-cluster/logs/         the JVMs' stdout and Flink's log files
    flink-cluster/checkpoints/  checkpoints of every job; kept across restarts of the cluster
    flink-cluster/tmp/          io.tmp.dirs, blobs; wiped at every fresh start

The generated configuration (``pipeline.local.flink_dist.flink_config``): loopback addresses and
free ports, one TaskManager with ``SLOTS`` slots, memory for a small machine, checkpoints on the
file system in ``checkpoints/`` (``hashmap`` state backend), a fixed-delay restart strategy that
keeps restarting every second, and one-second heartbeats (a killed TaskManager is declared lost
after two refused ones, a hung one after 10 s).

What a TaskManager failure costs: the job's state (frontier heads, seen filters, the lease
each host has out) and the portable Pub/Sub source's position are restored from the last
completed checkpoint, at most ``--checkpointing_interval`` old, and Pub/Sub redelivers the
messages read since (their SDK worker ended with its TaskManager and stopped extending their
ack deadline, see ``pipeline.local.flink_submit``). Of what the checkpoint covered, only the lease
each host had out at it is fetched again; URLs fetched after it are fetched again unless their
outcome reached the webtable before the restored job's lease re-checks their rows (measured: 4
to 7 URLs per host with 4-URL leases). A URL skipped on that re-check as already done has its
links in the frontier topic already: a page's links are published before its row is written
(``transforms.loop``), so nothing reached only through it is lost.

Timeline of a TaskManager failure (``kill_taskmanager`` then at once ``start_taskmanager``,
measured by tests/integration/test_flink_cluster.py on the 2-core development machine)::

    t0        SIGKILL; the last completed checkpoint is about 2 s old (the interval)
    t0+2s     the JobManager finds it unreachable (two refused heartbeats), fails the job and
              tries to restart it every second, waiting for slots
    t0+5s     the new TaskManager has registered (its scripts start three short JVMs before
              the TaskManager's own); the dead job's SDK worker exits soon after
    t0+11s    every task runs again, restored from the checkpoint (deployment, ~150 MB of job
              jars from the blob server, a new SDK worker); Pub/Sub redelivers what was read
              but not acknowledged once its 10 s ack deadline has passed
    t0+32s    the first request: a host whose lease was out at the checkpoint gets its URLs
              back only at that lease's deadline (start + --fetch_timeout, 30 s, + 2 s), when
              no request of it can still be open; hosts without one resume at t0+11s
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.local import emulators
from pipeline.local.flink_dist import (
    FLINK_VERSION,
    HOST,
    ensure_distribution,
    java_executable,
    write_conf_dir,
)
from pipeline.local.flink_submit import REST_ERRORS, active_jobs, call_rest
from pipeline.local.state_file import locked, read_json, write_json

_LOG = logging.getLogger(__name__)
STATE_JSON = "flink.json"
LOCK_FILE = "flink.lock"
CLUSTER_DIR = "flink-cluster"
JOBMANAGER_CLASS = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TASKMANAGER_CLASS = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"


class FlinkClusterError(RuntimeError):
    """The cluster cannot be started: no Java, no distribution, or a JVM that fails."""


@dataclasses.dataclass
class FlinkCluster:
    """A running local session cluster.

    Attributes:
        state_dir: Directory of flink.json; the cluster's files are in ``state_dir/flink-cluster``.
        flink_home: The distribution (``bin/``, ``lib/``).
        version: Its Flink release.
        rest_port: The REST endpoint (``--flink_master=127.0.0.1:<rest_port>``), also the UI.
        rpc_port: The JobManager's RPC port.
        blob_port: The blob server's port.
        jobmanager_pid: Pid (and process group) of the JobManager JVM.
        taskmanager_pid: Pid of the current TaskManager JVM; None after ``kill_taskmanager``.
        taskmanagers_started: How many TaskManagers were started (the next one's number).
    """

    state_dir: Path
    flink_home: Path
    version: str
    rest_port: int
    rpc_port: int
    blob_port: int
    jobmanager_pid: int
    taskmanager_pid: int | None = None
    taskmanagers_started: int = 0

    @property
    def cluster_dir(self) -> Path:
        return self.state_dir / CLUSTER_DIR

    @property
    def conf_dir(self) -> Path:
        return self.cluster_dir / "conf"

    @property
    def checkpoint_dir(self) -> Path:
        """Where jobs checkpoint (a job's checkpoints are in ``<job id>/chk-<n>``)."""
        return self.cluster_dir / "checkpoints"

    @property
    def master(self) -> str:
        """The ``--flink_master`` value that submits to this cluster."""
        return f"{HOST}:{self.rest_port}"

    def rest(self, path: str, method: str = "GET", timeout: float = 5.0) -> Any:
        """Calls the REST API at ``path`` (e.g. ``/overview``); returns the decoded JSON."""
        return call_rest(f"http://{self.master}{path}", method, timeout)

    def answers(self) -> bool:
        """True if the JobManager's REST endpoint answers."""
        try:
            self.rest("/overview", timeout=2.0)
            return True
        except REST_ERRORS:
            return False

    def taskmanagers(self) -> list[dict[str, Any]]:
        """The registered TaskManagers (``id``, ``slotsNumber``, ``freeSlots``, ...)."""
        return list(self.rest("/taskmanagers")["taskmanagers"])

    def jobs(self) -> list[dict[str, Any]]:
        """Every job the cluster knows (``jid``, ``name``, ``state``, ``start-time``, ...)."""
        return list(self.rest("/jobs/overview")["jobs"])

    def describe(self) -> str:
        """What runs and where, for ``crawler flink up|status``."""
        try:
            tms = ", ".join(f"{t['id']} ({t['freeSlots']}/{t['slotsNumber']} slots free)"
                            for t in self.taskmanagers()) or "none registered"
            active = set(active_jobs(self.master))
            jobs = [f"  {j['name']}  {j['state']}  {j['jid']}" for j in self.jobs()
                    if j["jid"] in active]
        except REST_ERRORS as exc:
            tms, jobs = f"(REST API: {exc})", []
        taskmanager = (f"pid {self.taskmanager_pid}: {tms}" if self.taskmanager_pid
                       else "none (`crawler flink up` starts one)")
        return "\n".join([
            f"Flink {self.version} session cluster (state: {self.state_dir / STATE_JSON})",
            f"  web UI, REST     http://{self.master}",
            f"  jobmanager       pid {self.jobmanager_pid}",
            f"  taskmanager      {taskmanager}",
            f"  checkpoints      {self.checkpoint_dir}",
            f"  logs             {self.cluster_dir / 'logs'}",
            f"  running jobs     {len(jobs)}", *jobs,
            "submit a crawl:   crawler run --runner=FlinkRunner "
            f"--flink_master={self.master} ..."])

    def kill_taskmanager(self) -> int:
        """SIGKILLs the TaskManager, as a crashed machine would end it; returns its pid."""
        pid = self.taskmanager_pid
        if pid is None or not _is_ours(pid, TASKMANAGER_CLASS, self.conf_dir):
            raise FlinkClusterError("no TaskManager of this cluster is running")
        os.killpg(pid, signal.SIGKILL)
        _wait_gone(pid, 10.0)
        self.taskmanager_pid = None
        _write_state(self)
        _LOG.info("killed TaskManager pid %d", pid)
        return pid

    def start_taskmanager(self, timeout: float = 60.0) -> int:
        """Starts a new TaskManager and waits until it registered with the JobManager.

        Returns:
            Its pid.

        Raises:
            FlinkClusterError: It exited or did not register within ``timeout`` seconds.
        """
        if self.taskmanager_pid is not None and _is_ours(self.taskmanager_pid,
                                                         TASKMANAGER_CLASS, self.conf_dir):
            raise FlinkClusterError(f"a TaskManager runs already (pid {self.taskmanager_pid})")
        self.taskmanagers_started += 1
        name = f"taskmanager-{self.taskmanagers_started}"
        child = _spawn(self, "taskmanager.sh", name,
                       [f"-Dtaskmanager.resource-id={name}"])
        self.taskmanager_pid = child.pid
        _write_state(self)
        deadline = time.monotonic() + timeout
        while not any(tm["id"] == name for tm in _quiet(self.taskmanagers, [])):
            if child.poll() is not None or time.monotonic() > deadline:
                raise FlinkClusterError(f"{name} did not register with the JobManager:\n"
                                        + _log_tail(self.cluster_dir, name))
            time.sleep(0.2)
        _LOG.info("%s (pid %d) registered", name, child.pid)
        return child.pid

    def stop(self, timeout: float = 20.0) -> list[str]:
        """Stops the TaskManager and the JobManager (SIGTERM, then SIGKILL); forgets them."""
        stopped = []
        for role, pid, cls in (("taskmanager", self.taskmanager_pid, TASKMANAGER_CLASS),
                               ("jobmanager", self.jobmanager_pid, JOBMANAGER_CLASS)):
            if pid is not None and _stop(pid, cls, self.conf_dir, timeout):
                stopped.append(f"{role} (pid {pid})")
        (self.state_dir / STATE_JSON).unlink(missing_ok=True)
        return stopped

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("state_dir")
        data["flink_home"] = str(self.flink_home)
        return data

    @classmethod
    def from_json(cls, state_dir: Path, data: Mapping[str, Any]) -> FlinkCluster:
        fields = {f.name for f in dataclasses.fields(cls)} - {"state_dir"}
        kwargs = {k: data[k] for k in fields if k in data}
        kwargs["flink_home"] = Path(kwargs["flink_home"])
        return cls(state_dir=state_dir, **kwargs)


def load_cluster(state_dir: Path) -> FlinkCluster | None:
    """The cluster recorded in ``state_dir`` if its JobManager runs and answers, else None.

    A recorded pid counts only if its command line is still that Flink role with this
    cluster's configuration directory, so a recycled pid is never taken for it.
    """
    cluster = _read_state(Path(state_dir).resolve())
    if cluster is None or not _is_ours(cluster.jobmanager_pid, JOBMANAGER_CLASS,
                                       cluster.conf_dir):
        return None
    if cluster.taskmanager_pid is not None and not _is_ours(
            cluster.taskmanager_pid, TASKMANAGER_CLASS, cluster.conf_dir):
        cluster.taskmanager_pid = None
    return cluster if cluster.answers() else None


def start_cluster(state_dir: Path, timeout: float = 120.0) -> FlinkCluster:
    """Starts the JobManager and a TaskManager unless they run; waits until a TaskManager is
    registered. Idempotent: a running cluster is returned (with a TaskManager started if it
    has none). The distribution is installed on first use.

    Raises:
        FlinkClusterError: No Java, the distribution could not be installed (pip's output is
            quoted), or a JVM exited or did not answer in ``timeout`` seconds (its log quoted).
    """
    started = time.monotonic()
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    with locked(state_dir / LOCK_FILE):
        cluster = load_cluster(state_dir)
        if cluster is None:
            java_executable()  # fail early, with the install hint, before a 230 MB download
            home = ensure_distribution()
            leftover = _read_state(state_dir)
            if leftover is not None:
                _LOG.warning("stopped the remains of a broken cluster: %s", leftover.stop())
            cluster = _start_jobmanager(state_dir, home, timeout)
        if cluster.taskmanager_pid is None:
            cluster.start_taskmanager(timeout)
    _LOG.info("Flink cluster up in %.1f s: %s", time.monotonic() - started, cluster.master)
    return cluster


def stop_cluster(state_dir: Path) -> list[str]:
    """Stops the cluster recorded in ``state_dir`` (only its own processes); harmless when
    nothing runs. The checkpoints stay."""
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return []
    with locked(state_dir / LOCK_FILE):
        cluster = _read_state(state_dir)
        return cluster.stop() if cluster else []


def _start_jobmanager(state_dir: Path, home: Path, timeout: float) -> FlinkCluster:
    rest, rpc, blob = emulators.free_ports(3, HOST)
    cluster = FlinkCluster(state_dir, home, FLINK_VERSION, rest, rpc, blob, jobmanager_pid=0)
    cluster_dir = cluster.cluster_dir
    for sub in ("conf", "logs", "checkpoints", "savepoints"):
        (cluster_dir / sub).mkdir(parents=True, exist_ok=True)
    shutil.rmtree(cluster_dir / "tmp", ignore_errors=True)
    (cluster_dir / "tmp").mkdir()
    write_conf_dir(cluster.conf_dir, home, cluster_dir, {"rest": rest, "rpc": rpc, "blob": blob})
    child = _spawn(cluster, "jobmanager.sh", "jobmanager", [])
    cluster.jobmanager_pid = child.pid
    _write_state(cluster)
    deadline = time.monotonic() + timeout
    while not cluster.answers():
        if child.poll() is not None or time.monotonic() > deadline:
            cluster.stop()
            raise FlinkClusterError("the JobManager did not answer on "
                                    f"http://{cluster.master}:\n"
                                    + _log_tail(cluster_dir, "jobmanager"))
        time.sleep(0.2)
    return cluster


def _spawn(cluster: FlinkCluster, script: str, name: str, args: list[str]) -> subprocess.Popen:
    """Starts ``bin/<script> start-foreground`` (it execs the JVM, so the pid is the JVM's)."""
    logs = cluster.cluster_dir / "logs"
    env = dict(os.environ, FLINK_CONF_DIR=str(cluster.conf_dir), FLINK_LOG_DIR=str(logs),
               FLINK_PID_DIR=str(cluster.cluster_dir / "tmp"), FLINK_IDENT_STRING=name)
    argv = ["bash", str(cluster.flink_home / "bin" / script), "start-foreground", *args]
    child = emulators.spawn(argv, logs / f"{name}.out", env)
    _LOG.info("started %s (pid %d), log %s", name, child.pid, logs / f"{name}.out")
    return child


def _quiet(call, default):
    try:
        return call()
    except REST_ERRORS:
        return default


def _is_ours(pid: int, java_class: str, conf_dir: Path) -> bool:
    """True if ``pid`` runs ``java_class`` with this cluster's configuration directory."""
    emulators.reap(pid)
    marker = f"--configDir {conf_dir}"
    return any(p == pid and java_class in cmd and marker in cmd
               for p, _, cmd in emulators.processes())


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        emulators.reap(pid)
        if not emulators.group_members(pid):
            return True
        time.sleep(0.05)
    return False


def _stop(pid: int, java_class: str, conf_dir: Path, timeout: float) -> bool:
    if not _is_ours(pid, java_class, conf_dir):
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        if _wait_gone(pid, wait):
            return True
    return False


def _read_state(state_dir: Path) -> FlinkCluster | None:
    data = read_json(state_dir / STATE_JSON)
    try:
        return FlinkCluster.from_json(state_dir, data) if data is not None else None
    except (KeyError, TypeError) as exc:
        _LOG.warning("ignoring unreadable %s: %s", state_dir / STATE_JSON, exc)
        return None


def _write_state(cluster: FlinkCluster) -> None:
    write_json(cluster.state_dir / STATE_JSON, cluster.to_json())


def _log_tail(cluster_dir: Path, name: str, lines: int = 30) -> str:
    logs = sorted((cluster_dir / "logs").glob(f"*{name}*"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return f"(no log of {name} in {cluster_dir / 'logs'})"
    return emulators.log_tail(logs[-1], lines)
