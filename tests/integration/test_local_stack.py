"""The local stack against the real emulators: resources, client round trips, idempotent start,
clean stop, and clear errors for missing components. No mocks."""

from __future__ import annotations

import datetime
import gzip
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from google.cloud import bigtable, pubsub_v1, storage
from google.cloud.bigtable import column_family

from pipeline.local import emulators
from pipeline.local.stack import (
    LOCAL_JSON,
    SERVICES,
    LocalStack,
    LocalStackError,
    load_local_stack,
    start_local_stack,
    stop_local_stack,
)
from pipeline.ops import resources
from tests.conftest import running_local_stack
from transforms.formats import schema

pytestmark = pytest.mark.integration


def test_topic_and_subscription_carry_a_message(local_stack: LocalStack) -> None:
    marker = uuid.uuid4().hex
    with pubsub_v1.PublisherClient() as publisher:
        topic = publisher.topic_path(local_stack.project, local_stack.topic)
        publisher.publish(topic, b"https://example.com/", marker=marker).result(timeout=30)
    received = []
    with pubsub_v1.SubscriberClient() as subscriber:
        path = subscriber.subscription_path(local_stack.project, local_stack.subscription)
        assert subscriber.get_subscription(subscription=path).ack_deadline_seconds == 60
        deadline = time.monotonic() + 30
        while not received and time.monotonic() < deadline:
            reply = subscriber.pull(request={"subscription": path, "max_messages": 10}, timeout=10)
            if reply.received_messages:
                subscriber.acknowledge(request={
                    "subscription": path,
                    "ack_ids": [m.ack_id for m in reply.received_messages]})
            received += [m.message for m in reply.received_messages
                         if m.message.attributes.get("marker") == marker]
    assert [m.data for m in received] == [b"https://example.com/"]


def test_bigtable_tables_and_families_have_the_schema_gc_rules(local_stack: LocalStack) -> None:
    client = bigtable.Client(project=local_stack.project, admin=True)
    instance = client.instance(local_stack.instance)
    assert {t.table_id for t in instance.list_tables()} >= set(schema.TABLE_FAMILIES)
    for table_name, families in schema.TABLE_FAMILIES.items():
        got = instance.table(table_name).list_column_families()
        assert set(got) == {f.name for f in families}, table_name
        for family in families:
            assert got[family.name].gc_rule.to_pb() == resources.gc_rule(family).to_pb()
    fetch = instance.table(schema.WEBTABLE).list_column_families()[schema.FETCH_FAMILY]
    assert isinstance(fetch.gc_rule, column_family.MaxVersionsGCRule)
    assert fetch.gc_rule.max_num_versions == 3
    dead = instance.table(schema.DEADLETTER_TABLE).list_column_families()
    assert isinstance(dead[schema.DEADLETTER_FAMILY].gc_rule, column_family.MaxAgeGCRule)
    assert dead[schema.DEADLETTER_FAMILY].gc_rule.max_age == datetime.timedelta(days=30)


def test_ensure_bigtable_adds_missing_families_and_fixes_rules(local_stack: LocalStack) -> None:
    table = f"t{uuid.uuid4().hex[:8]}"
    one = schema.Family("a", max_versions=1)
    resources.ensure_bigtable(local_stack.project, local_stack.instance, {table: (one,)})
    wanted = (schema.Family("a", max_versions=2),
              schema.Family("b", max_versions=5, max_age_days=7))
    resources.ensure_bigtable(local_stack.project, local_stack.instance, {table: wanted})
    got = (bigtable.Client(project=local_stack.project, admin=True)
           .instance(local_stack.instance).table(table).list_column_families())
    assert got["a"].gc_rule.max_num_versions == 2
    assert got["b"].gc_rule.to_pb() == resources.gc_rule(wanted[1]).to_pb()
    assert isinstance(got["b"].gc_rule, column_family.GCRuleUnion)


def test_ensure_all_again_is_harmless(local_stack: LocalStack) -> None:
    resources.ensure_all(local_stack.project, local_stack.instance, local_stack.topic,
                         local_stack.subscription, local_stack.bucket)


def test_subscription_on_another_topic_is_refused(local_stack: LocalStack) -> None:
    resources.ensure_topic(local_stack.project, "another-topic")
    with pytest.raises(resources.ResourceError, match="another-topic"):
        resources.ensure_subscription(local_stack.project, "another-topic",
                                      local_stack.subscription)


def test_bucket_round_trip_with_the_storage_client(local_stack: LocalStack) -> None:
    client = storage.Client(project=local_stack.project)
    bucket = client.bucket(local_stack.bucket)
    bucket.blob("probe/hello.txt").upload_from_string(b"hello", content_type="text/plain")
    assert bucket.blob("probe/hello.txt").download_as_bytes() == b"hello"
    assert local_stack.bucket in [b.name for b in client.list_buckets()]


def test_beam_filesystems_write_read_and_list_gs_files(local_stack: LocalStack) -> None:
    """gcsio is what the WARC writer uses. It looks up default credentials first; without the
    stack's static token that lookup retries for ~30 s before going anonymous.

    WARC files are gzipped per record, so they are written and read UNCOMPRESSED: the default
    (AUTO) would gzip the whole ``.warc.gz`` stream once more.
    """
    started = time.monotonic()
    prefix = f"gs://{local_stack.bucket}/beam-{uuid.uuid4().hex[:8]}"
    records = b"".join(gzip.compress(b"WARC/1.1\r\nrecord %d\r\n\r\n" % i) for i in range(3))
    raw = CompressionTypes.UNCOMPRESSED
    with FileSystems.create(f"{prefix}/part-0.warc.gz", compression_type=raw) as f:
        f.write(records)
    FileSystems.rename([f"{prefix}/part-0.warc.gz"], [f"{prefix}/final-0.warc.gz"])
    with FileSystems.open(f"{prefix}/final-0.warc.gz", compression_type=raw) as f:
        assert f.read() == records
    with FileSystems.open(f"{prefix}/final-0.warc.gz") as f:  # AUTO: all gzip members
        assert f.read().count(b"WARC/1.1") == 3
    listed = FileSystems.match([f"{prefix}/*"])[0].metadata_list
    assert [(m.path, m.size_in_bytes) for m in listed] == [
        (f"{prefix}/final-0.warc.gz", len(records))]
    assert time.monotonic() - started < 15, "gcsio stalled: is GOOGLE_APPLICATION_CREDENTIALS set?"


def test_cbt_lists_the_tables(local_stack: LocalStack) -> None:
    """``BIGTABLE_EMULATOR_HOST=127.0.0.1:PORT cbt -project PROJECT -instance INSTANCE ls``
    lists the emulator's tables (``cbt ... ls webtable`` its families and GC rules)."""
    cbt = shutil.which("cbt")
    if cbt is None:
        pytest.skip("cbt not installed (gcloud components install cbt)")
    out = subprocess.run(
        [cbt, "-project", local_stack.project, "-instance", local_stack.instance, "ls"],
        env=dict(os.environ, **local_stack.env()), capture_output=True, text=True, timeout=60,
        check=True).stdout
    assert set(out.split()) >= set(schema.TABLE_FAMILIES)


def test_export_lines_set_env_in_a_shell(local_stack: LocalStack) -> None:
    script = local_stack.export_lines() + "\nenv\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                         env={"PATH": os.defpath}).stdout
    shell_env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for key, value in local_stack.env().items():
        assert shell_env[key] == value
    assert json.loads(local_stack.credentials_file.read_text())["type"] == "authorized_user"


def test_second_start_returns_the_running_stack(local_stack: LocalStack) -> None:
    started = time.monotonic()
    again = start_local_stack(local_stack.state_dir)
    assert time.monotonic() - started < 10
    assert again == local_stack
    assert load_local_stack(local_stack.state_dir) == local_stack


def test_stop_leaves_no_emulator_process(tmp_path: Path) -> None:
    with running_local_stack(tmp_path) as stack:
        members = {s: emulators.group_members(stack.pids[s]) for s in SERVICES}
    # Each group holds the process we started and, for gcloud, its java / cbtemulator child.
    assert all(members.values())
    assert any("java" in p.cmdline for p in members["pubsub"])
    assert any("cbtemulator" in p.cmdline for p in members["bigtable"])
    live = {p.pid for p in emulators.processes()}
    assert not live & {p.pid for group in members.values() for p in group}
    assert not [p for p in emulators.processes() for s in SERVICES
                if emulators.looks_like(p.cmdline, s, stack.port(s))]
    assert not (tmp_path / LOCAL_JSON).exists()
    assert load_local_stack(tmp_path) is None
    assert stop_local_stack(tmp_path) == []


def test_a_recycled_pid_is_never_touched(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        fake = LocalStack(tmp_path, "p", "i", "b", "topic", "sub", "127.0.0.1:1",
                          "127.0.0.1:2", "http://127.0.0.1:3",
                          {s: stranger.pid for s in SERVICES})
        (tmp_path / LOCAL_JSON).write_text(json.dumps(fake.to_json()))
        assert load_local_stack(tmp_path) is None
        assert stop_local_stack(tmp_path) == []
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_missing_gcloud_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(LocalStackError, match="gcloud") as error:
        start_local_stack(tmp_path / "state", search_path=str(empty))
    assert "google-cloud-cli" in str(error.value)
    assert not (tmp_path / "state" / LOCAL_JSON).exists()


def test_missing_java_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        pytest.skip("needs gcloud")
    only_gcloud = tmp_path / "bin"
    only_gcloud.mkdir()
    (only_gcloud / "gcloud").symlink_to(gcloud)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(LocalStackError, match="Java runtime") as error:
        start_local_stack(tmp_path / "state", search_path=str(only_gcloud))
    assert "Google Cloud SDK" not in str(error.value)
