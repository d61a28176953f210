"""Beam's Prism runner on this machine: the binary, built from the Go module proxy, and a server.

Beam's ``PrismRunner`` downloads its binary from GitHub releases unless ``--prism_location``
names one; GitHub is out of reach here, and the Go module proxy is not. :func:`ensure_prism`
builds ``github.com/apache/beam/sdks/v2/go/cmd/prism`` at the version of the installed Beam (the
one ``requirements.txt`` pins) with ``go install`` into ``.crawler/bin/prism-v<version>``, the way
``pipeline.runners.flink_job_server`` fetches the Flink job server with Maven. A second call costs
nothing; an interrupted build leaves nothing behind (the binary is moved into place when
complete), and concurrent callers wait for one build (a file lock).

:func:`prism_server` runs that binary as a job service for one local crawl. Beam would start it
too, but as an ordinary child: a driver killed with SIGKILL left its Prism running (and the job
in it pulling Pub/Sub messages nobody acknowledged). Started here, Prism gets the parent-death
signal (``PR_SET_PDEATHSIG``), so it ends with the process that started it, however that ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from apache_beam.version import __version__ as BEAM_VERSION

_LOG = logging.getLogger(__name__)
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO_ROOT / ".crawler" / "bin"
PRISM_PACKAGE = "github.com/apache/beam/sdks/v2/go/cmd/prism"
BUILD_TIMEOUT_SECONDS = 1200.0
START_TIMEOUT_SECONDS = 30.0
_PR_SET_PDEATHSIG = 1


class PrismUnavailable(RuntimeError):
    """No Prism binary and none can be built (no ``go``, or the build failed)."""


def prism_version(beam_version: str = BEAM_VERSION) -> str:
    """The module version of the Prism matching a Beam release: ``2.77.0`` -> ``v2.77.0``;
    a release candidate ``2.77.0rc1`` -> ``v2.77.0-RC1`` (the Go tag's spelling)."""
    if "rc" in beam_version:
        release, candidate = beam_version.split("rc", 1)
        return f"v{release}-RC{candidate}"
    if not beam_version[:1].isdigit() or "dev" in beam_version:
        raise PrismUnavailable(f"Beam {beam_version} is not a release; no Prism module matches it")
    return f"v{beam_version}"


def binary_path(bin_dir: Path = DEFAULT_BIN, beam_version: str = BEAM_VERSION) -> Path:
    return bin_dir / f"prism-{prism_version(beam_version)}"


def go_executable() -> str | None:
    return shutil.which("go")


def ensure_prism(bin_dir: Path = DEFAULT_BIN, beam_version: str = BEAM_VERSION,
                 timeout: float = BUILD_TIMEOUT_SECONDS) -> Path:
    """The Prism binary for ``beam_version``, built with ``go install`` on first use.

    Raises:
        PrismUnavailable: ``go`` is not on PATH, or the build failed (its output in the message).
    """
    target = binary_path(bin_dir, beam_version)
    if target.exists():
        return target
    go = go_executable()
    if go is None:
        raise PrismUnavailable("go is not on PATH; it builds Beam's Prism runner")
    bin_dir.mkdir(parents=True, exist_ok=True)
    with open(bin_dir / ".prism.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # built by the caller that held the lock
            return target
        module = f"{PRISM_PACKAGE}@{prism_version(beam_version)}"
        _LOG.info("building Prism: go install %s (about 2 minutes, once)", module)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="prism-build-", dir=bin_dir) as work:
            env = {**os.environ, "GOBIN": work, "CGO_ENABLED": "0"}
            try:
                result = subprocess.run([go, "install", module], env=env, capture_output=True,
                                        text=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired as exc:
                raise PrismUnavailable(f"go install {module} took over {timeout:.0f} s") from exc
            built = Path(work) / "prism"
            if result.returncode != 0 or not built.exists():
                raise PrismUnavailable(f"go install {module} failed:\n"
                                       f"{(result.stdout + result.stderr)[-2000:]}")
            os.replace(built, target)
        _LOG.info("built %s in %.0f s", target, time.monotonic() - started)
    return target


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child must not take the loader's lock


def _die_with_parent() -> None:
    """Runs in the child between fork and exec (one system call, no lock taken): SIGKILL it when
    the thread that started it ends."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        if process.poll() is not None:
            raise PrismUnavailable(f"Prism exited with {process.returncode} at start")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise PrismUnavailable(f"Prism did not listen on port {port} within {timeout:.0f} s")


@contextlib.contextmanager
def prism_server(binary: Path, log_level: str = "warn") -> Iterator[str]:
    """Runs Prism as a job service on a free loopback port; yields its ``host:port``. Prism
    ends when the block ends, or with this process if it is killed. Its own log goes to a file
    in the temporary folder (Prism logs every bundle a cancelled job cuts off), kept and named in
    this module's log if the block raised."""
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix=f"crawler-prism-{port}-", suffix=".log",
                                      delete=False)
    process = subprocess.Popen(
        [str(binary), "--job_port", str(port), "--serve_http=false", "--log_level", log_level,
         "--log_kind", "text"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent)
    failed = True
    try:
        _wait_for_port(port, process, START_TIMEOUT_SECONDS)
        yield f"localhost:{port}"
        failed = False
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        if failed:
            _LOG.warning("Prism's log: %s", log.name)
        else:
            Path(log.name).unlink(missing_ok=True)


def main() -> None:
    """``python -m pipeline.runners.prism``: builds the binary (``make``'s first use) or says
    why the local runs will use the DirectRunner."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        print(ensure_prism())
    except PrismUnavailable as exc:
        print(f"Prism not available ({str(exc).splitlines()[0]}); local crawls use the "
              "DirectRunner")


if __name__ == "__main__":
    main()
