"""``--policy gs://...``: the pipeline reads a policy file from GCS (the emulator) through Beam's
filesystems; the pure loader refuses URLs it cannot read."""

from __future__ import annotations

import uuid

import pytest
from apache_beam.io.filesystems import FileSystems

from pipeline.policy_source import load_policy_file
from transforms.core.policy import PolicyError
from transforms.core.policy_file import load_policy

pytestmark = pytest.mark.integration


def test_a_policy_file_on_gcs_is_read_and_validated(local_stack):
    url = f"gs://{local_stack.bucket}/policies/{uuid.uuid4().hex}.yaml"
    with FileSystems.create(url) as out:
        out.write(b"defaults: {min_delay: 2.5}\nhosts: {example.com: {priority_boost: 3}}\n")
    policy = load_policy_file(url)
    assert policy.defaults.min_delay == 2.5
    assert policy.for_host("example.com").priority_boost == 3
    with pytest.raises(PolicyError, match="only local files"):
        load_policy(url)  # the core loader reads local files unless given a reader
