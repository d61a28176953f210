"""``crawler provision`` against the emulators: every resource, twice (idempotent)."""

from __future__ import annotations

import uuid

import pytest
from google.cloud import bigtable, pubsub_v1, storage

from pipeline.cli.main import main as cli_main
from pipeline.ops.resources import gc_rule
from transforms.formats import schema

pytestmark = pytest.mark.integration


def test_provision_creates_everything_and_can_run_again(local_stack, tmp_path, capsys):
    suffix = uuid.uuid4().hex[:8]
    project = local_stack.project
    argv = ["--state-dir", str(tmp_path), "provision", "--project", project,
            "--instance", f"prov-{suffix}", "--topic", f"prov-{suffix}",
            "--subscription", f"prov-{suffix}-sub", "--bucket", f"prov-{suffix}"]
    assert cli_main(argv) == 0
    first = capsys.readouterr().out
    assert cli_main(argv) == 0  # idempotent
    assert capsys.readouterr().out == first
    assert f"--input_subscription=projects/{project}/subscriptions/prov-{suffix}-sub" in first

    subscriber = pubsub_v1.SubscriberClient()
    sub = subscriber.get_subscription(
        subscription=f"projects/{project}/subscriptions/prov-{suffix}-sub")
    assert sub.topic == f"projects/{project}/topics/prov-{suffix}"
    instance = bigtable.Client(project=project, admin=True).instance(f"prov-{suffix}")
    for table, families in schema.TABLE_FAMILIES.items():
        got = instance.table(table).list_column_families()
        for family in families:
            assert family.name in got, (table, family.name)
            expected = gc_rule(family)
            if expected is not None:
                assert got[family.name].gc_rule.to_pb() == expected.to_pb(), family.name
    assert storage.Client(project=project).lookup_bucket(f"prov-{suffix}") is not None


def test_provision_without_a_project_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit):
        cli_main(["--state-dir", str(tmp_path), "provision"])
