"""Start and stop the local Google Cloud stack the crawler runs against on the DirectRunner.

Three emulators, each a detached process in its own process group, all on 127.0.0.1:

- Pub/Sub: ``gcloud beta emulators pubsub start`` (a Java program behind a gcloud wrapper);
- Bigtable: ``gcloud beta emulators bigtable start`` (``cbtemulator``);
- GCS: ``gcp-storage-emulator`` from PyPI, run with this interpreter.

Everything lives in a state directory (``default_state_dir()``), written through
``pipeline.local.state_file``::

    local.json                  what runs: ports, process group ids, resource names
    local.lock                  serializes start and stop
    logs/<service>.log          emulator output
    pubsub/                     data dir of the Pub/Sub emulator (its env.yaml)
    gcloud/                     gcloud's configuration directory for the emulators (and logs)
    gcs/                        objects of the GCS emulator, on disk to bound its memory
    emulator-credentials.json   a static token for Beam's gcsio (see ``LocalStack.env``)

Which emulator processes belong to the stack, and how they start, is in
``pipeline.local.emulators``. The stack is a scratch environment: the Pub/Sub and Bigtable emulators
keep their data in memory and the GCS directory is wiped at every fresh start, so stopping the stack
discards everything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypedDict

from pipeline.local import emulators
from pipeline.local.emulators import missing_components
from pipeline.local.state_file import locked, read_json, write_json
from pipeline.ops import resources
from transforms.formats import schema

_LOG = logging.getLogger(__name__)

LOCAL_JSON = "local.json"
CREDENTIALS_JSON = "emulator-credentials.json"
SERVICES = ("pubsub", "bigtable", "storage")
_HOST = "127.0.0.1"
# A token that never expires, so google-auth never tries to refresh it (no network, no stall).
_STATIC_CREDENTIALS = {
    "type": "authorized_user",
    "client_id": "local-emulator",
    "client_secret": "local-emulator",
    "refresh_token": "local-emulator",
    "token": "local-emulator",
    "expiry": "2999-01-01T00:00:00Z",
}


class LocalStackError(RuntimeError):
    """The local stack cannot be started: a missing component, or an emulator that fails."""


class _ResourceNames(TypedDict):
    """The resource names a stack is started or reused with (fields of ``LocalStack``)."""

    project: str
    instance: str
    topic: str
    subscription: str
    bucket: str


@dataclasses.dataclass
class LocalStack:
    """A running local stack: where its emulators listen and what it provisioned.

    Attributes:
        state_dir: Directory of local.json, the logs and the emulator data.
        project: Project id used on every emulator.
        instance: Bigtable instance id (the emulator serves any instance).
        bucket: GCS bucket for WARC files and exports.
        topic: Frontier Pub/Sub topic id.
        subscription: The crawler's subscription on the frontier topic.
        pubsub_host: ``127.0.0.1:port`` of the Pub/Sub emulator.
        bigtable_host: ``127.0.0.1:port`` of the Bigtable emulator.
        storage_host: ``http://127.0.0.1:port`` of the GCS emulator.
        pids: Service name -> pid of the process group leader (its pid is the group id).
    """

    state_dir: Path
    project: str
    instance: str
    bucket: str
    topic: str
    subscription: str
    pubsub_host: str
    bigtable_host: str
    storage_host: str
    pids: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def credentials_file(self) -> Path:
        """The static-token credentials file that ``env()`` points Google auth at."""
        return self.state_dir / CREDENTIALS_JSON

    def address(self, service: str) -> str:
        """Returns where ``service`` (one of ``SERVICES``) listens, as in its variable."""
        return {"pubsub": self.pubsub_host, "bigtable": self.bigtable_host,
                "storage": self.storage_host}[service]

    def port(self, service: str) -> int:
        """Returns the port of ``service`` (one of ``SERVICES``)."""
        return int(self.address(service).rsplit(":", 1)[1])

    def env(self) -> dict[str, str]:
        """Returns the variables that point the Google client libraries at the emulators.

        ``GOOGLE_APPLICATION_CREDENTIALS`` names a file with a static, never-expiring token.
        Beam's gcsio asks google-auth for default credentials before it creates its storage
        client and, when there are none, retries for about 30 seconds before it falls back to
        anonymous access; with a developer's own credentials it would refresh them at Google's
        token endpoint (network) and send the token to the emulator. The static token makes the
        lookup instant and offline; the emulators ignore it, and a real Google API rejects it.
        """
        env = {
            "PUBSUB_EMULATOR_HOST": self.pubsub_host,
            "PUBSUB_PROJECT_ID": self.project,
            "BIGTABLE_EMULATOR_HOST": self.bigtable_host,
            "STORAGE_EMULATOR_HOST": self.storage_host,
            "GOOGLE_CLOUD_PROJECT": self.project,
            "GOOGLE_APPLICATION_CREDENTIALS": str(self.credentials_file),
        }
        if any(os.environ.get(k) for k in ("http_proxy", "https_proxy", "HTTP_PROXY",
                                           "HTTPS_PROXY", "grpc_proxy")):
            # requests and gRPC honor proxy variables; loopback must bypass them.
            current = os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or ""
            no_proxy = ",".join(p for p in (current, "127.0.0.1,localhost") if p)
            env["NO_PROXY"] = env["no_proxy"] = no_proxy
        return env

    def pipeline_args(self, argv: list[str]) -> list[str]:
        """``argv`` with the flags that aim a run at this stack in front, unless given."""
        given = {a.split("=", 1)[0].replace("-", "_") for a in argv if a.startswith("--")}
        defaults = {
            "--project": self.project,
            "--input_subscription": f"projects/{self.project}/subscriptions/{self.subscription}",
            "--frontier_topic": f"projects/{self.project}/topics/{self.topic}",
            "--notifications_topic":
                f"projects/{self.project}/topics/{schema.DEFAULT_NOTIFICATIONS_TOPIC}",
            "--bigtable_instance": self.instance,
            "--warc_prefix": f"gs://{self.bucket}/warc",
            "--export_roll_seconds": "10",  # a local run stops when idle: files come sooner
        }
        return [f"{k}={v}" for k, v in defaults.items()
                if k.replace("-", "_") not in given] + argv

    def export_lines(self) -> str:
        """Returns ``export K=V`` lines to paste into a shell (one per variable of ``env()``)."""
        return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in self.env().items())

    @contextlib.contextmanager
    def activate(self) -> Iterator[LocalStack]:
        """Sets ``env()`` in ``os.environ`` for the duration of the block, then restores it.

        The client libraries read these variables when a client is created, so create clients
        inside the block. Not isolated from other threads of the process.
        """
        with environ(self.env()):
            yield self

    def to_json(self) -> dict:
        """Returns the local.json form (everything but the state directory)."""
        data = dataclasses.asdict(self)
        del data["state_dir"]
        return data

    @classmethod
    def from_json(cls, state_dir: Path, data: Mapping) -> LocalStack:
        """Builds a stack from the local.json form written by ``to_json``."""
        fields = {f.name for f in dataclasses.fields(cls)} - {"state_dir"}
        kwargs = {k: data[k] for k in fields}
        kwargs["pids"] = {str(k): int(v) for k, v in kwargs["pids"].items()}
        return cls(state_dir=state_dir, **kwargs)


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """Sets ``values`` in ``os.environ`` for the block and restores the previous values."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def default_state_dir() -> Path:
    """Returns ``$CRAWLER_HOME``, or ``.crawler`` in the current directory."""
    home = os.environ.get("CRAWLER_HOME")
    return Path(home).expanduser().resolve() if home else Path.cwd() / ".crawler"


def load_local_stack(state_dir: Path) -> LocalStack | None:
    """Returns the stack recorded in ``state_dir`` if all its emulators run and answer.

    A recorded pid counts only if its command line is still that emulator on that port, so a
    pid recycled by another program is never mistaken for it.
    """
    stack = _read_state(Path(state_dir).resolve())
    if stack is None:
        return None
    for service in SERVICES:
        pid = stack.pids.get(service)
        if pid is None or not emulators.is_emulator(pid, service, stack.port(service)):
            return None
    if not all(emulators.answers(service, stack.address(service), timeout=2.0)
               for service in SERVICES):
        return None
    return stack


def start_local_stack(
    state_dir: Path,
    *,
    project: str = schema.DEFAULT_PROJECT,
    instance: str = schema.DEFAULT_INSTANCE,
    topic: str = schema.DEFAULT_TOPIC,
    subscription: str = schema.DEFAULT_SUBSCRIPTION,
    bucket: str = schema.DEFAULT_BUCKET,
    search_path: str | None = None,
    timeout: float = 120.0,
) -> LocalStack:
    """Starts the emulators (unless they run already) and creates the crawler's resources.

    Idempotent: when ``state_dir`` records a stack whose emulators run and answer, nothing is
    started; the requested resources are ensured on it and it is returned (with the requested
    names, recorded in local.json).

    Args:
        state_dir: Directory for local.json, logs and data (created if needed).
        project: Project id on every emulator.
        instance: Bigtable instance id.
        topic: Frontier topic id.
        subscription: The crawler's subscription id.
        bucket: Bucket name.
        search_path: Directories to look for ``gcloud`` and ``java`` in, and the ``PATH`` of the
            emulator processes (default: ``$PATH``).
        timeout: Seconds to wait for the emulators to answer.

    Returns:
        The running stack.

    Raises:
        LocalStackError: A component is missing, or an emulator did not start; the message
            names what to install or quotes the end of the emulator's log.
    """
    started_at = time.monotonic()
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    names: _ResourceNames = {"project": project, "instance": instance, "topic": topic,
                             "subscription": subscription, "bucket": bucket}
    with locked(state_dir / "local.lock"):
        stack = load_local_stack(state_dir)
        if stack is not None:
            stack = dataclasses.replace(stack, **names)
            _provision(stack)
            _write_state(stack)
            _LOG.info("local stack already running in %s (pids %s)", state_dir, stack.pids)
            return stack
        missing = missing_components(search_path)
        if missing:
            raise LocalStackError("cannot start the local stack; install:\n  - "
                                  + "\n  - ".join(missing))
        stale = _stop_recorded(state_dir)
        if stale:
            _LOG.warning("stopped the remains of a broken local stack: %s", stale)
        stack = _spawn_all(state_dir, names, search_path, timeout)
        _provision(stack)
        _write_state(stack)
    _LOG.info("local stack up in %.1f s in %s: pubsub %s, bigtable %s, storage %s",
              time.monotonic() - started_at, state_dir, stack.pubsub_host, stack.bigtable_host,
              stack.storage_host)
    return stack


def stop_local_stack(state_dir: Path, timeout: float = 15.0) -> list[str]:
    """Stops the emulators recorded in ``state_dir`` and removes its local.json.

    Only the recorded process groups are signalled, and only if a member's command line is
    still that emulator on that port: SIGTERM to the whole group (the gcloud wrapper and its
    java or cbtemulator child), then SIGKILL after ``timeout`` seconds. Harmless when nothing
    runs.

    Args:
        state_dir: The directory given to ``start_local_stack``.
        timeout: Seconds to wait after SIGTERM before SIGKILL.

    Returns:
        What was stopped, e.g. ``["pubsub (pid 123)", ...]``.
    """
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return []
    with locked(state_dir / "local.lock"):
        stopped = _stop_recorded(state_dir, timeout)
        (state_dir / LOCAL_JSON).unlink(missing_ok=True)
    if stopped:
        _LOG.info("stopped %s", ", ".join(stopped))
    return stopped


def _spawn_all(state_dir: Path, names: _ResourceNames, search_path: str | None,
               timeout: float) -> LocalStack:
    ports = emulators.free_ports(len(SERVICES), _HOST)
    port = dict(zip(SERVICES, ports, strict=True))
    shutil.rmtree(state_dir / "gcs", ignore_errors=True)
    commands = emulators.commands(_HOST, port, state_dir, names["project"], search_path)
    env = emulators.child_env(state_dir, search_path)
    (state_dir / "logs").mkdir(exist_ok=True)
    (state_dir / "pubsub").mkdir(exist_ok=True)
    stack = LocalStack(
        state_dir=state_dir, **names,
        pubsub_host=f"{_HOST}:{port['pubsub']}", bigtable_host=f"{_HOST}:{port['bigtable']}",
        storage_host=f"http://{_HOST}:{port['storage']}")
    children: dict[str, subprocess.Popen] = {}
    try:
        for service in SERVICES:
            log = _log_path(state_dir, service)
            children[service] = emulators.spawn(commands[service], log, env)
            stack.pids[service] = children[service].pid
            _LOG.info("started %s emulator (pid %d), log %s", service, children[service].pid, log)
        deadline = time.monotonic() + timeout
        for service in SERVICES:
            _wait_until_answering(stack, service, children[service], deadline)
    except BaseException:
        for service, child in children.items():
            emulators.stop_group(child.pid, service, port[service], timeout=5.0)
        raise
    return stack


def _wait_until_answering(stack: LocalStack, service: str, child: subprocess.Popen,
                          deadline: float) -> None:
    address = stack.address(service)
    while True:
        if emulators.answers(service, address, timeout=0.5):
            _LOG.debug("%s emulator answers on %s", service, address)
            return
        code = child.poll()
        if code is not None:
            raise LocalStackError(f"the {service} emulator exited with code {code}:\n"
                                  + emulators.log_tail(_log_path(stack.state_dir, service)))
        if time.monotonic() > deadline:
            raise LocalStackError(f"the {service} emulator did not answer on {address} in time:\n"
                                  + emulators.log_tail(_log_path(stack.state_dir, service)))
        time.sleep(0.1)


def _provision(stack: LocalStack) -> None:
    stack.credentials_file.write_text(json.dumps(_STATIC_CREDENTIALS, indent=2) + "\n")
    with stack.activate():
        resources.ensure_all(stack.project, stack.instance, stack.topic, stack.subscription,
                             stack.bucket)


def _stop_recorded(state_dir: Path, timeout: float = 15.0) -> list[str]:
    stack = _read_state(state_dir)
    if stack is None:
        return []
    stopped = []
    for service, pid in stack.pids.items():
        if service in SERVICES and emulators.stop_group(pid, service, stack.port(service), timeout):
            stopped.append(f"{service} (pid {pid})")
    return stopped


def _read_state(state_dir: Path) -> LocalStack | None:
    data = read_json(state_dir / LOCAL_JSON)
    try:
        return LocalStack.from_json(state_dir, data) if data is not None else None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        _LOG.warning("ignoring unreadable %s: %s", state_dir / LOCAL_JSON, e)
        return None


def _write_state(stack: LocalStack) -> None:
    write_json(stack.state_dir / LOCAL_JSON, stack.to_json())


def _log_path(state_dir: Path, service: str) -> Path:
    return state_dir / "logs" / f"{service}.log"
