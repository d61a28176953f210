"""The Flink distribution a local session cluster runs from, installed from PyPI on first use,
and the cluster's configuration.

PyPI's ``apache-flink`` wheel ships Flink's scripts (``pyflink/bin``: ``jobmanager.sh``,
``taskmanager.sh``, ``config.sh``, ...) and ``apache-flink-libraries`` ships its jars
(``pyflink/lib/flink-dist-*.jar``, log4j, ...). ``apache-flink`` requires ``apache-beam<2.49``,
so it never goes into the crawler's environment: both are installed with ``pip install --no-deps
--target`` into a directory of their own, and only the scripts and jars are used, with the Java
runtime on ``PATH`` (or ``JAVA_HOME``). The directory is complete once its marker file exists;
a second call costs nothing, and an interrupted install is redone.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from pipeline.runners.flink_job_server import DEFAULT_CACHE

# The Flink of the job server pipeline.runners.flink_job_server assembles: org.apache.beam:
# beam-runners-flink-1.19:2.62.0 depends on flink-runtime/flink-clients 1.19.0. The cluster must
# speak the client's version, so the distribution is pinned to the same release.
FLINK_VERSION = "1.19.0"
HOST = "127.0.0.1"
# Beam submits at --parallelism (1 unless given: the job server's own configuration sets no
# default), and with slot sharing a job takes one slot per parallel subtask: 2 slots fit a crawl
# at --parallelism=2, or two crawls.
SLOTS = 2
MIN_JAVA = 11  # Flink 1.19 runs on Java 11 and 17
MARKER = ".installed"


class FlinkDistError(RuntimeError):
    """The distribution cannot be installed or run: no Java, or pip could not fetch it."""


def packages(version: str = FLINK_VERSION) -> list[str]:
    """The PyPI requirements that make up the distribution (scripts + jars)."""
    return [f"apache-flink=={version}", f"apache-flink-libraries=={version}"]


def java_executable() -> Path:
    """The ``java`` that Flink's scripts will pick (``$JAVA_HOME/bin/java``, else ``PATH``).

    Raises:
        FlinkDistError: No Java, or one older than ``MIN_JAVA``.
    """
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home and Path(home, "bin", "java").exists() else None
    if java is None:
        found = shutil.which("java")
        java = Path(found) if found else None
    if java is None:
        raise FlinkDistError(f"a Java runtime ({MIN_JAVA} or 17) is needed to run Flink: "
                             "`apt-get install openjdk-17-jre-headless`, or set JAVA_HOME")
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    major = int(match.group(1)) if match else 0
    major = int(match.group(2) or 0) if major == 1 and match else major  # "1.8.0" is Java 8
    if major < MIN_JAVA:
        raise FlinkDistError(f"{java} is Java {major or '?'}; Flink {FLINK_VERSION} needs "
                             f"Java {MIN_JAVA} or 17 (set JAVA_HOME to one)")
    return java


def ensure_distribution(cache: Path = DEFAULT_CACHE, version: str = FLINK_VERSION,
                        timeout: float = 1800) -> Path:
    """Installs the distribution under ``cache`` unless it is there; returns its FLINK_HOME.

    Args:
        cache: Parent directory (default: ``.crawler/flink``, next to the job server).
        version: The Flink release.
        timeout: Seconds pip may take (the jars are a ~230 MB source distribution).

    Returns:
        The directory holding ``bin/``, ``lib/`` and ``conf/`` (``<target>/pyflink``).

    Raises:
        FlinkDistError: pip failed (the message quotes its output) or the result lacks the
            scripts or jars.
    """
    target = cache / f"apache-flink-{version}"
    home = target / "pyflink"
    if (target / MARKER).exists():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"apache-flink-{version}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two first uses at once install once
        if (target / MARKER).exists():
            return home
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                "--disable-pip-version-check", "--target", str(partial), *packages(version)]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                    check=False)
        except subprocess.TimeoutExpired as exc:
            raise FlinkDistError(f"`{' '.join(argv)}` took more than {timeout:.0f} s") from exc
        if result.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise FlinkDistError(f"could not install the Flink distribution with `pip install "
                                 f"{' '.join(packages(version))}` (exit {result.returncode}):\n"
                                 + (result.stdout + result.stderr)[-2000:])
        missing = [p for p in ("pyflink/bin/jobmanager.sh", "pyflink/bin/taskmanager.sh",
                               f"pyflink/lib/flink-dist-{version}.jar")
                   if not (partial / p).exists()]
        if missing:
            raise FlinkDistError(f"the Flink {version} packages lack {', '.join(missing)} "
                                 f"(in {partial})")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        (target / MARKER).write_text(" ".join(packages(version)) + "\n")
    return home


def flink_config(cluster_dir: Path, ports: Mapping[str, int],
                 base: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster's configuration, flat keys (Flink's ``config.yaml`` accepts them).

    Args:
        cluster_dir: The cluster's directory (checkpoints/ and tmp/ go there).
        ports: Free ports for ``rest``, ``rpc`` (the JobManager's) and ``blob``.
        base: The distribution's own configuration, flattened; its JVM options (the
            ``--add-opens`` Java 17 needs) are kept.
    """
    checkpoints = (cluster_dir / "checkpoints").resolve()
    return {
        "env.java.opts.all": base.get("env.java.opts.all", ""),
        "jobmanager.rpc.address": HOST, "jobmanager.bind-host": HOST,
        "jobmanager.rpc.port": ports["rpc"],
        "rest.address": HOST, "rest.bind-address": HOST, "rest.port": ports["rest"],
        "blob.server.port": ports["blob"],
        "taskmanager.host": HOST, "taskmanager.bind-host": HOST,
        "taskmanager.numberOfTaskSlots": SLOTS,
        # The Python SDK harness runs outside these JVMs, and the hashmap backend keeps state
        # on the heap: little managed memory, a modest heap each.
        "jobmanager.memory.process.size": "1024m",
        "taskmanager.memory.process.size": "2048m",
        "taskmanager.memory.managed.fraction": 0.05,
        "taskmanager.memory.jvm-metaspace.size": "512m",  # Beam's classes, per job
        "state.backend.type": "hashmap",
        "state.checkpoint-storage": "filesystem",
        "state.checkpoints.dir": checkpoints.as_uri(),
        "state.savepoints.dir": (cluster_dir / "savepoints").resolve().as_uri(),
        "state.checkpoints.num-retained": 3,  # a corrupt latest one falls back to the previous
        # A crawl never gives up on its own: restart every second, as long as it takes.
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 1_000_000,
        "restart-strategy.fixed-delay.delay": "1 s",
        # A killed TaskManager refuses the next heartbeats and is declared lost after two
        # (about 2 s); a hung one after 10 s without an answer (defaults: 10 s and 50 s).
        "heartbeat.interval": 1000,
        "heartbeat.timeout": 10000,
        "io.tmp.dirs": str((cluster_dir / "tmp").resolve()),
        "web.tmpdir": str((cluster_dir / "tmp" / "web").resolve()),
    }


def write_conf_dir(conf_dir: Path, home: Path, cluster_dir: Path,
                   ports: Mapping[str, int]) -> None:
    """Writes ``config.yaml`` (``flink_config``) and the distribution's log4j files into
    ``conf_dir``, the FLINK_CONF_DIR of the cluster's processes."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    for extra in (home / "conf").glob("log*"):
        (conf_dir / extra.name).write_bytes(extra.read_bytes())
    base = _flatten(yaml.safe_load((home / "conf" / "config.yaml").read_text()) or {})
    config = flink_config(cluster_dir, ports, base)
    (conf_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=True))


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
