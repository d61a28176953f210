"""The frontier microbenchmark runs (tiny corpus) and really queues and dedups URLs."""

from __future__ import annotations

import json

from benchmarks.frontier_bench import main


def test_the_frontier_benchmark_accepts_each_url_once_and_drops_the_repeat(tmp_path, capsys):
    out = tmp_path / "frontier.json"
    main(["--quick", "--hosts", "5", "--out", str(out)])
    r = json.loads(out.read_text())
    handled = 2 * r["links"]  # every link is sent twice
    assert r["accepted"] + r["dedup_dropped"] + r["filtered"] == handled
    assert r["accepted"] > 0 and r["dedup_dropped"] >= r["accepted"]  # every repeat dropped
    assert r["urls_per_s"]["median"] > 0 and r["elements_per_s"]["median"] > 0
    assert "frontier DoFn body" in capsys.readouterr().out
