"""The deployment templates agree with the code: the Dataflow Flex Template's metadata with
``CrawlerOptions`` (both ways), the Beam version everywhere it is written, and the Flink
Kubernetes manifests' pipeline arguments with ``CrawlerOptions``."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    PortableOptions,
    StandardOptions,
)
from google.cloud.dataflow_v1beta3.types import TemplateMetadata

from pipeline.options import NOT_TEMPLATE_PARAMETERS, CrawlerOptions

ROOT = Path(__file__).resolve().parents[3]
METADATA = ROOT / "templates" / "dataflow" / "metadata.json"
K8S = ROOT / "templates" / "flink" / "k8s"
REQUIRED = {"input_subscription", "frontier_topic", "warc_prefix"}


def _flags() -> dict[str, argparse.Action]:
    parser = argparse.ArgumentParser()
    CrawlerOptions._add_argparse_args(parser)
    return {a.dest: a for a in parser._actions if a.dest != "help"}


def _metadata() -> dict:
    return json.loads(METADATA.read_text())


def _example(help_text: str) -> str:
    match = re.search(r"Example: (.+)$", help_text)
    assert match, f"no 'Example: ...' at the end of {help_text!r}"
    return match.group(1)


def test_metadata_parses_strictly_as_dataflow_template_metadata():
    parsed = TemplateMetadata.from_json(METADATA.read_text(), ignore_unknown_fields=False)
    assert parsed.streaming and parsed.supports_at_least_once
    assert parsed.name and parsed.description and len(parsed.parameters) >= 20


def test_every_option_is_a_parameter_and_every_parameter_an_option():
    names = [p["name"] for p in _metadata()["parameters"]]
    assert len(names) == len(set(names))
    flags = set(_flags())
    assert set(names) == flags - set(NOT_TEMPLATE_PARAMETERS), (
        f"missing from the template: {flags - set(NOT_TEMPLATE_PARAMETERS) - set(names)}, "
        f"not options: {set(names) - flags}")
    assert set(NOT_TEMPLATE_PARAMETERS) <= flags


def test_every_parameter_has_a_label_help_regex_and_type():
    for p in _metadata()["parameters"]:
        assert p["label"] and len(p["helpText"]) > 20 and p["regexes"] and p["paramType"], p


def test_every_regex_compiles_and_accepts_its_example_and_the_option_parses_it():
    flags = _flags()
    for p in _metadata()["parameters"]:
        example = _example(p["helpText"])
        for regex in p["regexes"]:
            assert re.fullmatch(regex, example), (p["name"], regex, example)
        parsed = CrawlerOptions([f"--{p['name']}={example}"]).get_all_options()[p["name"]]
        action = flags[p["name"]]
        if action.type is not None:
            assert parsed == action.type(example), p["name"]


def test_regexes_reject_obvious_garbage():
    regexes = {p["name"]: p["regexes"][0] for p in _metadata()["parameters"]}
    assert not re.fullmatch(regexes["input_subscription"], "frontier-crawler")
    assert not re.fullmatch(regexes["frontier_topic"], "projects/p/subscriptions/s")
    assert not re.fullmatch(regexes["warc_prefix"], "/tmp/warc")
    assert not re.fullmatch(regexes["max_lease_urls"], "-3")


def test_required_parameters_and_defaults_match_the_options():
    flags = _flags()
    for p in _metadata()["parameters"]:
        assert p["isOptional"] == (p["name"] not in REQUIRED), p["name"]
        default = flags[p["name"]].default
        if "defaultValue" in p:
            assert str(default).lower() == p["defaultValue"].lower() or \
                float(p["defaultValue"]) == float(default), p["name"]
        else:
            assert default is None, f"{p['name']}: the template omits default {default!r}"


def test_typed_parameters():
    types = {p["name"]: p["paramType"] for p in _metadata()["parameters"]}
    assert types["input_subscription"] == "PUBSUB_SUBSCRIPTION"
    assert types["frontier_topic"] == "PUBSUB_TOPIC"
    assert types["warc_prefix"] == "GCS_WRITE_FOLDER"
    assert types["allow_private_networks"] == "BOOLEAN"


def _beam_version() -> str:
    match = re.search(r"^apache-beam\[gcp\]==(\S+)$", (ROOT / "requirements.txt").read_text(),
                      re.M)
    assert match
    return match.group(1)


def test_the_beam_version_agrees_everywhere():
    version = _beam_version()
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"apache/beam_python3.11_sdk:{version}" in dockerfile
    assert f"Apache Beam {version}" in _metadata()["description"]
    deployment = yaml.safe_load((K8S / "flink-deployment.yaml").read_text())
    assert deployment["metadata"]["annotations"]["beam.apache.org/sdk-version"] == version
    major_minor = ".".join(version.split(".")[:2])
    assert f">={major_minor}" in (ROOT / "setup.py").read_text()


def test_the_image_is_launcher_and_worker():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "/opt/google/dataflow/python_template_launcher" in dockerfile
    assert "FLEX_TEMPLATE_PYTHON_PY_FILE" in dockerfile
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in dockerfile


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="the Google Cloud SDK is not installed")
def test_gcloud_builds_the_template_spec_offline(tmp_path):
    result = subprocess.run(
        ["gcloud", "dataflow", "flex-template", "build", "gs://my-bucket/templates/crawler.json",
         "--image=us-docker.pkg.dev/my-project/crawler/beam-crawler:0.1",
         "--sdk-language=PYTHON", f"--metadata-file={METADATA}", "--print-only",
         "--project=my-project", "--format=json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    spec = json.loads(result.stdout)
    if isinstance(spec, str):  # gcloud prints the spec file's text as a JSON string
        spec = json.loads(spec)
    assert spec["sdkInfo"]["language"] == "PYTHON"
    # This gcloud's spec model drops streaming/supportsAtLeastOnce (the strict TemplateMetadata
    # parse above checks them); it does check the parameters' shape.
    assert len(spec["metadata"]["parameters"]) == len(_metadata()["parameters"])


# ---- Flink on Kubernetes ----

def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _driver_argv() -> list[str]:
    config = _docs("configmap.yaml")[0]["data"]
    job = _docs("driver-job.yaml")[0]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "pipeline"]
    # Kubernetes expands $(NAME) from the container's environment (the ConfigMap).
    return [re.sub(r"\$\((\w+)\)", lambda m: config[m.group(1)], a) for a in container["args"]]


def test_the_driver_arguments_are_valid_crawler_options():
    argv = _driver_argv()
    assert not any("$(" in a for a in argv)
    options = CrawlerOptions(argv)
    options.validate_crawler()
    assert options.view_as(StandardOptions).runner == "FlinkRunner"
    assert options.view_as(StandardOptions).streaming
    portable = options.view_as(PortableOptions)
    assert portable.environment_type == "EXTERNAL"
    assert portable.environment_config == "localhost:50000"
    flink = options.view_as(FlinkRunnerOptions)
    assert flink.flink_master == "crawler-flink-rest:8081" and flink.flink_submit_uber_jar
    o = options.get_all_options()
    assert o["checkpointing_interval"] > 0 and o["finish_bundle_before_checkpointing"] is True
    assert not options.uses_native_pubsub()
    assert not o["allow_private_networks"]


def test_every_driver_flag_is_known_to_beam_or_the_crawler():
    known = set(_flags())
    parser = argparse.ArgumentParser()
    for cls in (StandardOptions, PortableOptions, FlinkRunnerOptions):
        cls._add_argparse_args(parser)
    known |= {a.dest for a in parser._actions}
    known |= {"project", "parallelism"}  # GoogleCloudOptions / Flink's own
    for arg in _driver_argv():
        name = arg[2:].split("=", 1)[0].replace("-", "_")
        assert name in known, arg


def test_the_flink_cluster_has_a_worker_pool_sidecar_on_the_port_the_driver_names():
    deployment = _docs("flink-deployment.yaml")[0]
    assert deployment["apiVersion"] == "flink.apache.org/v1beta1"
    assert deployment["kind"] == "FlinkDeployment"
    containers = deployment["spec"]["taskManager"]["podTemplate"]["spec"]["containers"]
    sidecar = next(c for c in containers if c["name"] == "beam-worker-pool")
    assert sidecar["args"] == ["--worker_pool"]
    assert {p["containerPort"] for p in sidecar["ports"]} == {50000}
    flink_version = next(a.split("=")[1] for a in _driver_argv()
                         if a.startswith("--flink_version="))
    assert deployment["spec"]["flinkVersion"] == "v" + flink_version.replace(".", "_")
    assert flink_version in deployment["spec"]["image"]
    assert "job" not in deployment["spec"], "a session cluster: the driver Job submits"


def test_kustomization_lists_every_manifest_and_sets_the_crawler_image():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests
    assert kustomization["images"][0]["name"] == "crawler-image"
