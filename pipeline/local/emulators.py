"""The local stack's emulators as processes: what they need, how they are started, recognized,
probed and stopped.

A service's processes are recognized by a word of their command line and their port, so a pid
recycled by another program is never taken for an emulator: the gcloud wrapper
(``... emulators pubsub start --host-port=127.0.0.1:PORT``), its child
(``java -jar .../cloud-pubsub-emulator-*.jar --port=PORT``,
``.../bigtable-emulator/cbtemulator --port=PORT``) and
``python -m gcp_storage_emulator ... --port=PORT`` all match.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import grpc

_LOG = logging.getLogger(__name__)

_KEYWORDS = {"pubsub": "pubsub", "bigtable": "bigtable", "storage": "gcp_storage_emulator"}


def missing_components(search_path: str | None = None) -> list[str]:
    """Lists what must be installed before the stack can start, with the command to install it.

    Args:
        search_path: Directories to look for ``gcloud`` and ``java`` in (default: ``$PATH``).

    Returns:
        One line per missing component; empty when everything is there.
    """
    path = os.environ.get("PATH", os.defpath) if search_path is None else search_path
    missing = []
    gcloud = shutil.which("gcloud", path=path)
    if gcloud is None:
        missing.append("the Google Cloud SDK (`gcloud` on PATH): "
                       "https://cloud.google.com/sdk/docs/install (apt package google-cloud-cli)")
    else:
        root = Path(os.path.realpath(gcloud)).parent.parent
        install_dir = root / ".install"
        if install_dir.is_dir() and not (install_dir / "beta.manifest").exists():
            missing.append("gcloud beta commands: `gcloud components install beta`")
        if not (root / "platform/pubsub-emulator/bin/cloud-pubsub-emulator").exists():
            missing.append("the Pub/Sub emulator: `gcloud components install pubsub-emulator` "
                           "(apt package google-cloud-cli-pubsub-emulator)")
        if not (root / "platform/bigtable-emulator/cbtemulator").exists():
            missing.append("the Bigtable emulator: `gcloud components install bigtable` "
                           "(apt package google-cloud-cli-bigtable-emulator)")
    java_home = os.environ.get("JAVA_HOME")
    has_java_home = bool(java_home and os.access(Path(java_home, "bin", "java"), os.X_OK))
    if not has_java_home and shutil.which("java", path=path) is None:
        missing.append("a Java runtime (8 or later) for the Pub/Sub emulator: "
                       "`apt-get install default-jre-headless`, or set JAVA_HOME")
    if importlib.util.find_spec("gcp_storage_emulator") is None:
        missing.append("the GCS emulator: `pip install gcp-storage-emulator` "
                       "(or `pip install 'beam-crawler[local]'`)")
    return missing


def commands(host: str, ports: Mapping[str, int], state_dir: Path, project: str,
             search_path: str | None = None) -> dict[str, list[str]]:
    """Returns the command line of each emulator (``state_dir/pubsub`` must exist)."""
    path = os.environ.get("PATH", os.defpath) if search_path is None else search_path
    gcloud = shutil.which("gcloud", path=path) or "gcloud"
    return {
        "pubsub": [gcloud, "beta", "emulators", "pubsub", "start",
                   f"--host-port={host}:{ports['pubsub']}", f"--data-dir={state_dir / 'pubsub'}",
                   f"--project={project}"],
        "bigtable": [gcloud, "beta", "emulators", "bigtable", "start",
                     f"--host-port={host}:{ports['bigtable']}"],
        "storage": [sys.executable, "-m", "gcp_storage_emulator",
                    "--data-dir", str(state_dir / "gcs"),
                    "start", f"--host={host}", f"--port={ports['storage']}"],
    }


def child_env(state_dir: Path, search_path: str | None = None) -> dict[str, str]:
    """Returns the environment of the emulator processes.

    It is this process's, with gcloud kept offline and silent (no update checks, usage reports
    or prompts), ``PATH`` = ``search_path``, and a gcloud configuration directory of its own
    in ``state_dir/gcloud``: ``emulators bigtable start`` always writes an env.yaml there, and
    logs go there too, so the user's ``~/.config/gcloud`` is left alone.
    """
    env = dict(os.environ, CLOUDSDK_CONFIG=str(state_dir / "gcloud"),
               CLOUDSDK_CORE_DISABLE_PROMPTS="1",
               CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK="1",
               CLOUDSDK_CORE_DISABLE_USAGE_REPORTING="1")
    if search_path is not None:
        env["PATH"] = search_path
    return env


class Process(NamedTuple):
    """A live process: its pid, process group id and command line (arguments joined by spaces)."""

    pid: int
    pgid: int
    cmdline: str


def looks_like(cmdline: str, service: str, port: int) -> bool:
    """True if ``cmdline`` is one of ``service``'s emulator processes listening on ``port``."""
    return _KEYWORDS[service] in cmdline and re.search(rf"[:=]{port}(?!\d)", cmdline) is not None


def processes() -> list[Process]:
    """Returns every live (non-zombie) process, from /proc or, without it, from ``ps``."""
    found: list[Process] = []
    proc_root = Path("/proc")
    if proc_root.is_dir():
        for entry in proc_root.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:  # exited meanwhile
                continue
            state, _ppid, pgid = stat[stat.rindex(")") + 2:].split()[:3]
            if state != "Z":
                found.append(Process(int(entry.name), int(pgid),
                                     cmdline.replace(b"\0", b" ").decode(errors="replace")))
        return found
    out = subprocess.run(["ps", "-A", "-o", "pid=,pgid=,stat=,args="], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        pid, pgid, state, *args = line.split(None, 3)
        if not state.startswith("Z"):
            found.append(Process(int(pid), int(pgid), args[0] if args else ""))
    return found


def is_emulator(pid: int, service: str, port: int) -> bool:
    """True if ``pid`` runs and its command line is ``service``'s emulator on ``port``."""
    return any(p == pid and looks_like(cmd, service, port) for p, _, cmd in processes())


def group_members(pgid: int) -> list[Process]:
    """Returns the live processes of process group ``pgid``."""
    return [p for p in processes() if p.pgid == pgid]


def reap(pid: int) -> None:
    """Collects the exit status of ``pid`` if it is a child of this process."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop_group(pgid: int, service: str, port: int, timeout: float) -> bool:
    """SIGTERMs process group ``pgid`` if it is ``service``'s emulator, SIGKILLs what remains.

    Returns:
        True if the group was ours and is gone now.
    """
    reap(pgid)
    if not any(looks_like(cmd, service, port) for _, _, cmd in group_members(pgid)):
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            reap(pgid)
            if not group_members(pgid):
                return True
            time.sleep(0.1)
        _LOG.warning("%s emulator group %d survived %s", service, pgid, sig.name)
    return not group_members(pgid)


def spawn(argv: list[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen:
    """Starts ``argv`` detached: its own session and process group, output to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=dict(env), start_new_session=True)


def free_ports(count: int, host: str) -> list[int]:
    """Returns ``count`` distinct ports that were free on ``host`` a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def answers(service: str, address: str, timeout: float) -> bool:
    """True if the emulator at ``address`` answers its protocol (gRPC, or GCS's JSON API)."""
    if service == "storage":
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"{address}/storage/v1/b?project=ping", timeout=timeout) as reply:
                return reply.status == 200
        except (OSError, http.client.HTTPException):
            return False
    channel = grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)])
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a process's log, headed by its path, for an error message."""
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"(no log at {path})"
    return f"--- last lines of {path} ---\n" + "\n".join(tail)
