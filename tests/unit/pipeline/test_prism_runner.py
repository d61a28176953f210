"""Beam's Prism on this machine: the binary built with ``go install`` (a stand-in ``go`` here, the
real build in ``make prism``), the job service started for a run and stopped after it, and the
fallback to the DirectRunner when there is no Prism."""

from __future__ import annotations

import io
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from pipeline import main as pipeline_main
from pipeline.options import CrawlerOptions
from pipeline.runners import prism


def test_the_module_version_follows_beams_release_spelling():
    assert prism.prism_version("2.77.0") == "v2.77.0"
    assert prism.prism_version("2.78.0rc2") == "v2.78.0-RC2"
    with pytest.raises(prism.PrismUnavailable):
        prism.prism_version("2.79.0.dev0")


def _fake_go(tmp_path: Path, script: str) -> Path:
    go = tmp_path / "go"
    go.write_text("#!/bin/sh\n" + script)
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return go


def test_go_install_is_run_once_into_the_bin_folder(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    go = _fake_go(tmp_path, f'echo "$@" >> {calls}\nprintf "#!/bin/sh\\n" > "$GOBIN/prism"\n')
    monkeypatch.setattr(prism, "go_executable", lambda: str(go))
    bin_dir = tmp_path / "bin"
    built = prism.ensure_prism(bin_dir, "2.77.0")
    assert built == bin_dir / "prism-v2.77.0" and built.exists()
    assert calls.read_text().split() == [
        "install", "github.com/apache/beam/sdks/v2/go/cmd/prism@v2.77.0"]
    assert prism.ensure_prism(bin_dir, "2.77.0") == built
    assert len(calls.read_text().splitlines()) == 1  # the second call built nothing
    assert [p.name for p in bin_dir.iterdir() if not p.name.startswith(".")] == ["prism-v2.77.0"]


def test_a_failed_build_says_why_and_leaves_nothing(tmp_path, monkeypatch):
    go = _fake_go(tmp_path, 'echo "module lookup disabled" >&2\nexit 1\n')
    monkeypatch.setattr(prism, "go_executable", lambda: str(go))
    with pytest.raises(prism.PrismUnavailable, match="module lookup disabled"):
        prism.ensure_prism(tmp_path / "bin", "2.77.0")
    assert not prism.binary_path(tmp_path / "bin", "2.77.0").exists()
    assert not [p for p in (tmp_path / "bin").iterdir() if not p.name.startswith(".")]


def test_without_go_there_is_no_prism(tmp_path, monkeypatch):
    monkeypatch.setattr(prism, "go_executable", lambda: None)
    with pytest.raises(prism.PrismUnavailable, match="go is not on PATH"):
        prism.ensure_prism(tmp_path / "bin", "2.77.0")


def test_a_run_without_prism_falls_back_to_the_direct_runner_with_a_notice(monkeypatch):
    def unavailable() -> Path:
        raise prism.PrismUnavailable("go is not on PATH; it builds Beam's Prism runner")

    monkeypatch.setattr(prism, "ensure_prism", unavailable)
    options = CrawlerOptions(["--runner=PrismRunner"])
    out = io.StringIO()
    with pipeline_main.local_prism(options, out):
        assert options.get_all_options()["runner"] == "DirectRunner"
        assert not options.runs_on_prism()
    assert out.getvalue() == ("Prism unavailable (go is not on PATH; it builds Beam's Prism "
                              "runner): running on the DirectRunner\n")


def _listening(endpoint: str) -> bool:
    host, port = endpoint.split(":")
    try:
        with socket.create_connection((host, int(port)), 0.5):
            return True
    except OSError:
        return False


def test_the_job_service_listens_for_the_run_and_is_gone_after_it():
    binary = prism.binary_path()
    assert binary.exists(), "`make prism` (part of `make test`) builds it"
    options = CrawlerOptions(["--runner=PrismRunner"])
    with pipeline_main.local_prism(options, io.StringIO()):
        endpoint = options.get_all_options()["job_endpoint"]
        assert options.get_all_options()["environment_type"] == "LOOPBACK"
        assert options.runs_on_prism() and _listening(endpoint)
    assert options.get_all_options()["job_endpoint"] is None
    limit = time.monotonic() + 5
    while _listening(endpoint) and time.monotonic() < limit:
        time.sleep(0.05)
    assert not _listening(endpoint)
    assert not [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob(
        f"crawler-prism-{endpoint.split(':')[1]}-*.log")]  # a clean run keeps no log
