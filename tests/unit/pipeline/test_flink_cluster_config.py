"""The local Flink cluster's configuration and state file, and which ``--flink_master`` values
run under the local driver (no JVM is started here; tests/integration/test_flink_cluster.py
runs the cluster)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from pipeline.local.flink_cluster import FlinkCluster, load_cluster, stop_cluster
from pipeline.local.flink_dist import HOST, SLOTS, flink_config, write_conf_dir
from pipeline.local.flink_submit import is_loopback_master, rest_url
from pipeline.main import is_local_flink_cluster, run
from pipeline.options import CrawlerOptions

BASE = ["--project=p", "--input_subscription=projects/p/subscriptions/s",
        "--frontier_topic=projects/p/topics/t", "--warc_prefix=gs://b/warc"]
PORTS = {"rest": 18081, "rpc": 16123, "blob": 16124}


@pytest.mark.parametrize(("master", "local"), [
    ("127.0.0.1:8081", True), ("http://127.0.0.1:8081", True), ("localhost:8081", True),
    ("127.0.0.2:9000", True), ("[::1]:8081", True), ("http://localhost:8081/", True),
    ("[local]", False), ("[auto]", False), ("flink-rest:8081", False),
    ("http://10.0.0.5:8081", False), ("", False), (None, False),
])
def test_loopback_masters_are_local_clusters(master, local):
    assert is_loopback_master(master) is local


def test_only_a_flink_run_with_a_loopback_master_goes_to_the_local_cluster_driver():
    def local(*argv: str) -> bool:
        return is_local_flink_cluster(CrawlerOptions([*BASE, *argv]))

    assert local("--runner=FlinkRunner", "--flink_master=127.0.0.1:8081")
    assert not local("--runner=FlinkRunner", "--flink_master=[local]")  # embedded
    assert not local("--runner=FlinkRunner", "--flink_master=flink-rest:8081")  # remote
    assert not local("--flink_master=127.0.0.1:8081")  # the DirectRunner
    assert not local("--runner=FlinkRunner", "--flink_master=127.0.0.1:8081",
                     "--job_endpoint=localhost:8099")  # a job server of the user's


def test_a_run_against_a_cluster_that_does_not_answer_fails_with_a_clear_error():
    with socket.socket() as s:  # a port nothing listens on
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    with pytest.raises(ValueError, match="crawler flink up"):
        run([*BASE, "--runner=FlinkRunner", f"--flink_master={HOST}:{port}"])


def test_rest_url_adds_the_scheme_once():
    assert rest_url("127.0.0.1:8081") == "http://127.0.0.1:8081"
    assert rest_url("http://127.0.0.1:8081/") == "http://127.0.0.1:8081"


def test_the_config_checkpoints_to_the_cluster_directory_and_keeps_restarting(tmp_path):
    config = flink_config(tmp_path, PORTS, {"env.java.opts.all": "--add-opens=x"})
    assert config["env.java.opts.all"] == "--add-opens=x"  # Java 17 needs the dist's options
    assert config["rest.port"] == 18081 and config["jobmanager.rpc.port"] == 16123
    assert config["blob.server.port"] == 16124
    assert {config[k] for k in ("rest.address", "rest.bind-address", "jobmanager.rpc.address",
                                "jobmanager.bind-host", "taskmanager.host",
                                "taskmanager.bind-host")} == {HOST}
    assert config["state.checkpoints.dir"] == (tmp_path / "checkpoints").resolve().as_uri()
    assert config["state.backend.type"] == "hashmap"
    assert config["restart-strategy.type"] == "fixed-delay"
    assert config["restart-strategy.fixed-delay.attempts"] >= 1000
    assert config["heartbeat.interval"] <= 1000 and config["heartbeat.timeout"] <= 10000
    assert config["taskmanager.numberOfTaskSlots"] == SLOTS >= 1


def test_the_conf_dir_holds_the_config_and_the_log4j_files(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "config.yaml").write_text("env:\n  java:\n    opts:\n      all: -Dx=1\n"
                                               "rest:\n  port: 8081\n")
    (home / "conf" / "log4j-console.properties").write_text("rootLogger.level = INFO\n")
    conf = tmp_path / "conf"
    write_conf_dir(conf, home, tmp_path, PORTS)
    written = yaml.safe_load((conf / "config.yaml").read_text())
    assert written["env.java.opts.all"] == "-Dx=1" and written["rest.port"] == 18081
    assert (conf / "log4j-console.properties").read_text() == "rootLogger.level = INFO\n"


def test_the_state_file_round_trips_and_a_dead_cluster_is_not_loaded(tmp_path):
    cluster = FlinkCluster(tmp_path, Path("/opt/flink"), "1.19.0", 1, 2, 3,
                           jobmanager_pid=2**22 + 1, taskmanager_pid=None, taskmanagers_started=2)
    assert FlinkCluster.from_json(tmp_path, cluster.to_json()) == cluster
    (tmp_path / "flink.json").write_text(json.dumps(cluster.to_json()))
    assert load_cluster(tmp_path) is None  # no such process
    assert stop_cluster(tmp_path) == [] and not (tmp_path / "flink.json").exists()


def test_the_job_server_and_the_distribution_are_cached_in_the_repositorys_state_folder():
    from pipeline.runners.flink_job_server import DEFAULT_CACHE, REPO_ROOT

    assert (REPO_ROOT / "setup.py").is_file() and (REPO_ROOT / "templates").is_dir()
    assert DEFAULT_CACHE == REPO_ROOT / ".crawler" / "flink"
