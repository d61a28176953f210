"""Loading the crawl policy file named by ``--policy``: a local path or any Beam filesystem URL
(``gs://bucket/policy.yaml`` on Dataflow), validated by ``transforms.core.policy_file``."""

from __future__ import annotations

from pathlib import Path

from transforms.core.policy import Policy
from transforms.core.policy_file import load_policy


def read_text(source: str) -> str:
    """The text of a local file or of a Beam filesystem URL."""
    if "://" not in source:
        return Path(source).read_text(encoding="utf-8")
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(source) as f:
        return f.read().decode("utf-8")


def load_policy_file(path: str | Path) -> Policy:
    """Reads and validates the policy file at ``path`` (local or ``gs://``).

    Raises:
        transforms.core.policy.PolicyError: unreadable, unparsable or invalid.
    """
    return load_policy(path, read_text)
