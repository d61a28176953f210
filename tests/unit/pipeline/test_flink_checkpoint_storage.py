"""An embedded Flink checkpoints to a temporary folder, not to the JobManager's 5 MB of memory."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipeline.main import local_checkpoint_storage
from pipeline.options import CrawlerOptions

BASE = ["--project=p", "--input_subscription=projects/p/subscriptions/s",
        "--frontier_topic=projects/p/topics/t", "--warc_prefix=gs://b/warc"]


def test_an_embedded_flink_gets_a_filesystem_backend_in_a_folder_removed_afterwards():
    options = CrawlerOptions([*BASE, "--runner=FlinkRunner"])
    with local_checkpoint_storage(options):
        o = options.get_all_options()
        assert o["state_backend"] == "filesystem"
        folder = Path(urlsplit(o["state_backend_storage_path"]).path)
        assert o["state_backend_storage_path"].startswith("file:///") and folder.is_dir()
    assert not folder.exists()


@pytest.mark.parametrize("argv", [
    [*BASE],  # DirectRunner
    [*BASE, "--runner=FlinkRunner", "--state_backend=rocksdb",
     "--state_backend_storage_path=file:///tmp/mine"],  # the user's choice stands
    [*BASE, "--runner=FlinkRunner", "--flink_master=flink-jm:8081"],  # a cluster's own config
])
def test_other_runs_keep_their_state_backend(argv):
    options = CrawlerOptions(argv)
    before = (options.get_all_options()["state_backend"],
              options.get_all_options()["state_backend_storage_path"])
    with local_checkpoint_storage(options):
        o = options.get_all_options()
        assert (o["state_backend"], o["state_backend_storage_path"]) == before


def test_the_state_backend_flag_accepts_only_what_flink_knows():
    with pytest.raises(SystemExit):
        CrawlerOptions([*BASE, "--state_backend=memory"]).get_all_options()
