"""The before/after benchmark of issue 15 runs (one crawl per version of the two generated hosts,
about forty seconds): the baseline runs from its own git worktree and imports its own packages,
both crawls fetch the sites, the ratios come from the runs, and the worktree is gone after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.analysts_e2e import BenchError, Variant, main, probe_imports, summarize
from benchmarks.e2e import REPO
from benchmarks.testbed import find_nginx

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def fake_run(variant: str, pages_per_s: float, cpu_ms: float, exit_code: int = 0
             ) -> dict[str, Any]:
    return {"variant": variant, "pages": 40, "pages_per_s": pages_per_s,
            "pages_per_wall_s": pages_per_s / 2, "cpu_per_page_ms": cpu_ms,
            "stack_cpu_per_page_ms": 1.0,
            "usage": {"wall_s": 10.0, "peak_rss_mb": 100.0, "exit_code": exit_code,
                      "timed_out": False}}


def test_ratios_are_of_the_medians_and_of_each_pair_and_failed_runs_are_left_out():
    runs = [fake_run("before", 100, 10), fake_run("now", 90, 12),
            fake_run("before", 120, 11), fake_run("now", 80, 13),
            fake_run("before", 110, 9), fake_run("now", 1, 99, exit_code=1)]
    summary = summarize(runs)
    assert summary["before"]["runs"] == 3 and summary["now"]["runs"] == 2
    assert summary["now"]["failed"] == 1
    assert summary["before"]["pages_per_s"] == {"median": 110, "min": 100, "max": 120}
    assert summary["ratio"]["pages_per_s"] == round(85 / 110, 3)
    assert summary["ratio"]["cpu_per_page_ms"] == round(12.5 / 10, 3)
    assert summary["ratio"]["pages_per_s_paired"] == [0.9, round(80 / 120, 3)]
    assert summary["slowdown_pct"] == round(100 * (1 - 85 / 110), 1)
    assert not summary["meets_goal"]
    assert summarize([fake_run("before", 100, 10), fake_run("now", 90, 11)])["meets_goal"]


def test_a_variant_whose_packages_come_from_elsewhere_is_refused(tmp_path):
    # An empty tree: the child imports the editable install's packages, which must be caught.
    with pytest.raises(BenchError, match="imported from"):
        probe_imports(Variant("before", tmp_path))


def test_the_baseline_and_the_working_tree_crawl_alternately_from_their_own_packages(tmp_path):
    assert find_nginx(), "nginx is installed by `make test` (python -m benchmarks.testbed)"
    out = tmp_path / "analysts_e2e.json"
    work = tmp_path / "work"
    lines: list[str] = []
    try:
        result = main(["--repeat", "1", "--out", str(out), "--work-dir", str(work)],
                      progress=lines.append)
    except BenchError as e:
        if "worktree add" in str(e) and ("invalid reference" in str(e) or "not a git" in str(e)):
            pytest.skip(f"the baseline commit is not in this clone: {e}")
        raise
    written = json.loads(out.read_text())
    assert written["summary"] == json.loads(json.dumps(result["summary"]))
    imports = written["meta"]["imports"]
    before_tree = work / "before"
    assert imports["before"]["transforms"].startswith(str(before_tree))
    assert not imports["before"]["marker"]  # the baseline has no duplicates module
    assert imports["now"]["transforms"].startswith(str(REPO)) and imports["now"]["marker"]
    assert [r["variant"] for r in written["runs"]] == ["before", "now"]
    for run in written["runs"]:
        assert run["usage"]["exit_code"] == 0 and not run["usage"]["timed_out"], run["variant"]
        assert run["pages"] >= 25 and run["disallowed"] == 0, run["variant"]
        assert run["pages_per_s"] > 0 and run["cpu_per_page_ms"] > 0, run["variant"]
        assert len(run["load_before"]) == 3
    before, now = written["runs"]
    ratio = written["summary"]["ratio"]["pages_per_s"]
    assert ratio == round(now["pages_per_s"] / before["pages_per_s"], 3)
    assert len(written["meta"]["load_avg_start"]) == 3
    assert "\nslowdown " in lines[-1] and "now/before: pages/s" in lines[-1]
    assert not before_tree.exists()  # the worktree is removed
    registered = [g.read_text() for g in (Path(REPO) / ".git" / "worktrees").glob("*/gitdir")]
    assert not any(str(before_tree) in g for g in registered)
