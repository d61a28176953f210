"""``WakePendingKeys`` on Beam's TestPipeline: a new job sends one empty element to each key the
hosts table marks as having work pending, and to no other."""

from __future__ import annotations

import uuid

from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from transforms.core.records import FrontierWork
from transforms.formats.rows import pending_host_row
from transforms.frontier.store import StoreBatch
from transforms.stores.memory import MemoryStoreSpec, memory_store
from transforms.wake import WakePendingKeys


def test_keys_marked_pending_are_woken_once_each():
    name = f"wake-{uuid.uuid4().hex}"
    memory_store(name).write(StoreBatch(host_rows=[
        pending_host_row("busy.example", True, 1.0),
        pending_host_row("done.example", True, 1.0),
        pending_host_row("done.example", False, 2.0),  # its work ended later
        pending_host_row("big.example#2", True, 1.0)]))
    with TestPipeline() as p:
        woken = p | WakePendingKeys(MemoryStoreSpec(name))
        assert_that(woken, equal_to([("big.example#2", FrontierWork(())),
                                     ("busy.example", FrontierWork(()))]))
