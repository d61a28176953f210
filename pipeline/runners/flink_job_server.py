"""The Beam Flink job server jar, fetched with Maven into a cache directory.

Beam's FlinkRunner starts ``java -jar <flink_job_server_jar>``. The published jar is
``org.apache.beam:beam-runners-flink-<flink>-job-server:<beam>``; ``ensure_job_server`` copies
it from Maven Central with ``mvn dependency:copy``. When that artifact cannot be resolved (the
Maven mirror of this project's CI has none of the ``*-job-server`` artifacts, and no Beam 2.77
Java artifact at all), it assembles an equivalent launcher from the runner artifact and its
dependencies with ``templates/flink/jobserver/pom.xml``: an empty jar whose manifest names
``FlinkJobServerDriver`` and a ``lib/`` classpath next to it.

The cache directory holds one sub-directory per choice, so a second call costs nothing.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_LOG = logging.getLogger(__name__)
REPO_ROOT = Path(__file__).resolve().parents[2]
ASSEMBLY_POM = REPO_ROOT / "templates" / "flink" / "jobserver" / "pom.xml"
DEFAULT_CACHE = REPO_ROOT / ".crawler" / "flink"
# The published job server Beam 2.77's FlinkRunner defaults to (--flink_version 2.2).
PUBLISHED = ("beam-runners-flink-2.2-job-server", "2.77.0")
# The newest Flink runner whose whole dependency closure the CI's Maven mirror resolves.
ASSEMBLED = ("beam-runners-flink-1.19", "2.62.0")


class JobServerError(RuntimeError):
    """Neither the published jar nor the assembled one could be obtained."""


@dataclass(frozen=True)
class JobServer:
    jar: Path
    artifact: str  # group:artifact:version it was made from
    assembled: bool  # True when built from the runner artifact and its classpath


def _mvn(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JobServerError("Maven (mvn) is not on PATH; it fetches the Flink job server")
    return subprocess.run([mvn, "-B", "-q", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def fetch_published(cache: Path, artifact: str, version: str,
                    timeout: float = 900) -> JobServer | None:
    """Copies the published job server jar into ``cache``; None if Maven cannot resolve it."""
    target = cache / f"{artifact}-{version}"
    jar = target / f"{artifact}-{version}.jar"
    if jar.exists():
        return JobServer(jar, f"org.apache.beam:{artifact}:{version}", False)
    target.mkdir(parents=True, exist_ok=True)
    result = _mvn(["org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy",
                   f"-Dartifact=org.apache.beam:{artifact}:{version}",
                   f"-DoutputDirectory={target}"], cwd=target, timeout=timeout)
    if result.returncode != 0 or not jar.exists():
        _LOG.info("published Flink job server %s:%s not resolvable: %s", artifact, version,
                  (result.stdout + result.stderr).strip().splitlines()[-1:])
        shutil.rmtree(target, ignore_errors=True)
        return None
    return JobServer(jar, f"org.apache.beam:{artifact}:{version}", False)


def assemble(cache: Path, runner: str, version: str, timeout: float = 900) -> JobServer:
    """Builds ``job-server.jar`` + ``lib/`` for ``runner:version`` into ``cache``."""
    target = cache / f"{runner}-{version}-assembled"
    jar = target / "job-server.jar"
    if jar.exists() and (target / "lib").is_dir():
        return JobServer(jar, f"org.apache.beam:{runner}:{version}", True)
    with tempfile.TemporaryDirectory(prefix="jobserver-") as work:
        shutil.copy(ASSEMBLY_POM, Path(work) / "pom.xml")
        result = _mvn(["package", f"-Dflink.runner={runner}",
                       f"-Dbeam.runner.version={version}"], cwd=Path(work), timeout=timeout)
        built = Path(work) / "target"
        if result.returncode != 0 or not (built / "job-server.jar").exists():
            raise JobServerError(f"could not assemble the Flink job server from "
                                 f"org.apache.beam:{runner}:{version}:\n"
                                 f"{(result.stdout + result.stderr)[-2000:]}")
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        shutil.copy(built / "job-server.jar", jar)
        shutil.copytree(built / "lib", target / "lib")
    return JobServer(jar, f"org.apache.beam:{runner}:{version}", True)


def ensure_job_server(cache: Path = DEFAULT_CACHE, published: tuple[str, str] = PUBLISHED,
                      assembled: tuple[str, str] = ASSEMBLED) -> JobServer:
    """The published job server if Maven can fetch it, else the assembled one."""
    cache.mkdir(parents=True, exist_ok=True)
    found = fetch_published(cache, *published)
    if found is not None:
        return found
    _LOG.warning("using a Flink job server assembled from org.apache.beam:%s:%s (the published "
                 "%s:%s is not on this Maven repository)", *assembled, *published)
    return assemble(cache, *assembled)
