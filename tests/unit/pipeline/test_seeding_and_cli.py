"""Seed grouping (pipeline.ops.seeding.group_seeds) and the ``crawler`` command line
(pipeline.cli.main)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli.main import build_parser, main
from pipeline.local.stack import LocalStack
from pipeline.ops.seeding import group_seeds
from transforms.core.records import CrawlRequest
from transforms.core.url_keys import politeness_key
from transforms.core.urls import (
    INVALID_REASONS,
    REASON_EMPTY,
    REASON_RELATIVE,
    REASON_UNSUPPORTED_SCHEME,
    canonicalize_url,
)

# --- group_seeds -------------------------------------------------------------------------------


def test_seeds_are_canonicalized_and_grouped_by_politeness_key():
    groups, invalid = group_seeds(["HTTP://Example.COM/a/../b", "https://example.com/c",
                                   "http://example.com:8080/", "http://b.example/#frag"])
    assert invalid == []
    assert groups == {
        "example.com": [CrawlRequest("http://example.com/b"),
                        CrawlRequest("https://example.com/c")],
        "example.com:8080": [CrawlRequest("http://example.com:8080/")],
        "b.example": [CrawlRequest("http://b.example/")],
    }


def test_every_grouped_url_is_canonical_and_under_its_own_key():
    urls = ["http://A.example:80/x?b=1", "https://a.example:443/y", "http://127.0.0.2:8081/z",
            "http://[::1]:8080/w"]
    groups, _ = group_seeds(urls)
    for key, requests in groups.items():
        for request in requests:
            assert request.url == canonicalize_url(request.url)
            assert politeness_key(request.url) == key


def test_duplicates_after_canonicalization_are_dropped_first_one_kept():
    groups, invalid = group_seeds(["http://example.com:80/b", "http://EXAMPLE.com/./b",
                                   "http://example.com/b#x", "http://example.com/b"])
    assert invalid == []
    assert groups == {"example.com": [CrawlRequest("http://example.com/b")]}


def test_order_within_a_host_is_the_input_order():
    urls = [f"https://example.com/{i}" for i in (3, 1, 2)]
    groups, _ = group_seeds(urls)
    assert [r.url for r in groups["example.com"]] == urls


def test_depth_and_priority_apply_to_every_seed():
    groups, _ = group_seeds(["https://a.example/", "https://b.example/x"], depth=3, priority=9)
    requests = [r for rs in groups.values() for r in rs]
    assert len(requests) == 2
    assert {(r.depth, r.priority, r.discovered_from, r.attempt) for r in requests} == {
        (3, 9, None, 0)}


def test_invalid_urls_are_reported_with_their_reason():
    groups, invalid = group_seeds(["mailto:x@example.com", "not a url", "",
                                   "https://ok.example/"])
    assert list(groups) == ["ok.example"]
    assert [url for url, _ in invalid] == ["mailto:x@example.com", "not a url", ""]
    reasons = [reason for _, reason in invalid]
    assert reasons[0].startswith(REASON_UNSUPPORTED_SCHEME)
    assert reasons[1].startswith(REASON_RELATIVE)
    assert reasons[2].startswith(REASON_EMPTY)
    for reason in reasons:
        assert reason.split(":", 1)[0] in INVALID_REASONS


def test_no_seeds():
    assert group_seeds([]) == ({}, [])


def test_invalid_reason_names_the_reason_once():
    _, invalid = group_seeds(["mailto:x@example.com"])
    ((_, reason),) = invalid
    assert reason.count(REASON_UNSUPPORTED_SCHEME) == 1
    assert "mailto:x@example.com" in reason


# --- LocalStack.pipeline_args ------------------------------------------------------------------


def _stack(tmp_path: Path) -> LocalStack:
    return LocalStack(state_dir=tmp_path, project="proj-x", instance="inst-x",
                      bucket="bucket-x", topic="topic-x", subscription="sub-x",
                      pubsub_host="127.0.0.1:8085", bigtable_host="127.0.0.1:8086",
                      storage_host="http://127.0.0.1:9023")


def _flag_values(argv: list[str]) -> dict[str, list[str]]:
    """``--name=value`` flags -> {name with underscores: [values]} (other args ignored)."""
    values: dict[str, list[str]] = {}
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            name, value = arg[2:].split("=", 1)
            values.setdefault(name.replace("-", "_"), []).append(value)
    return values


def test_local_defaults_are_added(tmp_path):
    argv = _stack(tmp_path).pipeline_args([])
    assert _flag_values(argv) == {
        "project": ["proj-x"],
        "input_subscription": ["projects/proj-x/subscriptions/sub-x"],
        "frontier_topic": ["projects/proj-x/topics/topic-x"],
        "notifications_topic": ["projects/proj-x/topics/notifications"],
        "bigtable_instance": ["inst-x"],
        "warc_prefix": ["gs://bucket-x/warc"],
        "export_roll_seconds": ["10"],
    }


def test_user_flags_are_kept_after_the_defaults(tmp_path):
    user = ["--max_pages=10", "--min-delay", "0.5"]
    argv = _stack(tmp_path).pipeline_args(user)
    assert argv[-len(user):] == user
    assert len(argv) == len(user) + 7


@pytest.mark.parametrize("given", [
    ["--project=mine"], ["--project", "mine"],
    ["--warc_prefix=/tmp/w"], ["--warc-prefix=/tmp/w"], ["--warc-prefix", "/tmp/w"],
    ["--input_subscription=projects/m/subscriptions/s"],
    ["--input-subscription", "projects/m/subscriptions/s"],
    ["--frontier-topic=projects/m/topics/t"], ["--frontier_topic", "projects/m/topics/t"],
    ["--bigtable-instance=i"], ["--bigtable_instance", "i"],
])
def test_a_flag_the_user_gave_in_either_spelling_is_not_defaulted(tmp_path, given):
    argv = _stack(tmp_path).pipeline_args(given)
    name = given[0][2:].split("=", 1)[0].replace("-", "_")
    defaults = _flag_values(argv[:-len(given)])
    assert name not in defaults
    assert len(defaults) == 6
    assert argv[-len(given):] == given


def test_local_args_make_valid_crawler_options(tmp_path):
    from pipeline.options import CrawlerOptions

    options = CrawlerOptions(_stack(tmp_path).pipeline_args(["--max-pages=5"]))
    options.validate_crawler()
    o = options.get_all_options()
    assert o["project"] == "proj-x"
    assert o["bigtable_instance"] == "inst-x"
    assert o["max_pages"] == 5


# --- build_parser ------------------------------------------------------------------------------


def test_parse_seed():
    args = build_parser().parse_args(["seed", "https://a.example/", "https://b.example/",
                                      "--depth", "1", "--priority", "5", "--project", "p",
                                      "--topic", "t", "--file", "urls.txt"])
    assert args.command == "seed"
    assert args.urls == ["https://a.example/", "https://b.example/"]
    assert (args.depth, args.priority, args.project, args.topic, args.file) == (
        1, 5, "p", "t", "urls.txt")


def test_parse_seed_defaults():
    args = build_parser().parse_args(["seed"])
    assert args.urls == []
    assert (args.depth, args.priority, args.project, args.topic, args.file) == (
        0, 0, None, None, None)


def test_parse_show():
    args = build_parser().parse_args(["--state-dir", "/tmp/s", "show", "https://a.example/",
                                      "--instance", "i"])
    assert (args.command, args.url, args.instance, args.state_dir) == (
        "show", "https://a.example/", "i", "/tmp/s")
    assert args.table == "webtable"
    assert args.project is None


def test_parse_ls():
    args = build_parser().parse_args(["ls", "--host", "127.0.0.2:8081", "--limit", "7"])
    assert (args.command, args.host, args.limit) == ("ls", "127.0.0.2:8081", 7)
    assert build_parser().parse_args(["ls", "--host", "h"]).limit == 50


def test_ls_needs_a_host():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ls"])


@pytest.mark.parametrize("action", ["up", "down", "status"])
def test_parse_local(action):
    args = build_parser().parse_args(["local", action])
    assert (args.command, args.action) == ("local", action)


def test_local_rejects_an_unknown_action():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["local", "sideways"])


def test_parse_crawl_leaves_pipeline_flags_for_beam():
    args, rest = build_parser().parse_known_args(
        ["crawl", "https://a.example/", "--demo-hosts", "2", "--max_pages=5",
         "--runner", "DirectRunner"])
    assert args.command == "crawl"
    assert args.urls == ["https://a.example/"]
    assert (args.demo_hosts, args.demo_pages) == (2, 80)
    assert rest == ["--max_pages=5", "--runner", "DirectRunner"]


def test_parse_crawl_defaults():
    args = build_parser().parse_args(["crawl"])
    assert (args.urls, args.demo_hosts, args.demo_pages) == ([], 3, 80)


def test_the_dead_keep_stack_flag_is_gone():
    """The stack always stays up after ``crawl`` (for show/ls); the flag changed nothing."""
    args, rest = build_parser().parse_known_args(["crawl", "--keep-stack"])
    assert not hasattr(args, "keep_stack") and rest == ["--keep-stack"]


def test_a_command_is_required():
    with pytest.raises(SystemExit):
        build_parser().parse_args([])


# --- main --------------------------------------------------------------------------------------


def test_seed_without_urls_exits_2_with_a_message(tmp_path, capsys):
    assert main(["--state-dir", str(tmp_path), "seed"]) == 2
    assert "no URLs given" in capsys.readouterr().err


def test_seed_with_an_empty_file_exits_2(tmp_path, capsys):
    urls = tmp_path / "urls.txt"
    urls.write_text("# only a comment\n\n   \n")
    assert main(["--state-dir", str(tmp_path), "seed", "--file", str(urls)]) == 2
    assert "no URLs given" in capsys.readouterr().err


def test_seed_without_project_or_stack_exits_2(tmp_path, capsys):
    assert main(["--state-dir", str(tmp_path), "seed", "https://a.example/"]) == 2
    assert "no --project and no local stack" in capsys.readouterr().err


def test_run_without_stack_or_runner_exits_2(tmp_path, capsys):
    assert main(["--state-dir", str(tmp_path), "run", "--max_pages=1"]) == 2
    assert "crawler local up" in capsys.readouterr().err


def test_show_without_project_or_stack_exits(tmp_path):
    with pytest.raises(SystemExit, match="no --project and no local stack"):
        main(["--state-dir", str(tmp_path), "show", "https://a.example/"])


def test_unknown_flags_are_rejected_outside_run_and_crawl(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--state-dir", str(tmp_path), "seed", "https://a.example/", "--bogus"])
    assert exc.value.code == 2
    assert "--bogus" in capsys.readouterr().err


def test_local_status_without_stack_exits_1(tmp_path, capsys):
    assert main(["--state-dir", str(tmp_path), "local", "status"]) == 1
    assert "not running" in capsys.readouterr().out
