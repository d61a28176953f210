"""CrawlerOptions: flag spellings, defaults, validation, pass-through, FrontierConfig mapping."""

from __future__ import annotations

import argparse

import pytest
from apache_beam.options.pipeline_options import GoogleCloudOptions, StandardOptions

from pipeline.options import CrawlerOptions, validate_local_run
from transforms.core.robots import product_token as robots_token
from transforms.fetchers.http import FetchConfig
from transforms.formats.schema import DEADLETTER_TABLE, DEFAULT_INSTANCE, HOSTS_TABLE, WEBTABLE
from transforms.frontier.hostcore import FrontierConfig

VALID = {
    "input_subscription": "projects/p/subscriptions/frontier-crawler",
    "frontier_topic": "projects/p/topics/frontier",
    "warc_prefix": "gs://bucket/warc",
    "project": "p",
}


def _argv(**overrides) -> list[str]:
    """Flags of a valid configuration; an override of None leaves the flag out."""
    values = {**VALID, **overrides}
    return [f"--{name}={value}" for name, value in values.items() if value is not None]


def _options(**overrides) -> CrawlerOptions:
    return CrawlerOptions(_argv(**overrides))


@pytest.fixture(autouse=True)
def _no_ambient_project(monkeypatch):
    for name in ("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        monkeypatch.delenv(name, raising=False)


# --- spellings and defaults --------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--min_delay", "--min-delay"])
def test_both_spellings_of_a_flag(flag):
    assert CrawlerOptions([flag, "2.5"]).get_all_options()["min_delay"] == 2.5
    assert CrawlerOptions([f"{flag}=0.25"]).get_all_options()["min_delay"] == 0.25


@pytest.mark.parametrize(("flag", "value", "dest", "expected"), [
    ("--input-subscription", "projects/a/subscriptions/b", "input_subscription",
     "projects/a/subscriptions/b"),
    ("--frontier-topic", "projects/a/topics/b", "frontier_topic", "projects/a/topics/b"),
    ("--warc-prefix", "/tmp/warc", "warc_prefix", "/tmp/warc"),
    ("--max-lease-urls", "7", "max_lease_urls", 7),
    ("--max_lease_urls", "7", "max_lease_urls", 7),
    ("--warc-roll-seconds", "3", "warc_roll_seconds", 3.0),
    ("--crawl-user-agent", "bot/2", "crawl_user_agent", "bot/2"),
    ("--bigtable-project", "bt", "bigtable_project", "bt"),
])
def test_hyphenated_and_underscored_flags_reach_the_same_option(flag, value, dest, expected):
    got = CrawlerOptions([flag, value]).get_all_options()[dest]
    assert got == expected
    assert type(got) is type(expected)


def test_view_as_sees_the_parsed_values():
    options = CrawlerOptions(["--min-delay", "3", "--max_pages=9"])
    assert options.view_as(CrawlerOptions).min_delay == 3.0
    assert options.view_as(CrawlerOptions).max_pages == 9


def test_defaults():
    o = CrawlerOptions([]).get_all_options()
    assert o["input_subscription"] is None
    assert o["frontier_topic"] is None
    assert o["warc_prefix"] is None
    assert o["bigtable_project"] is None
    assert o["bigtable_instance"] == DEFAULT_INSTANCE
    assert (o["webtable"], o["hosts_table"], o["deadletter_table"]) == (
        WEBTABLE, HOSTS_TABLE, DEADLETTER_TABLE)
    assert o["warc_roll_bytes"] is None
    assert CrawlerOptions([]).settings().warc_roll_bytes == 3 * 10 * 1024 * 1024
    assert CrawlerOptions(["--max_body_bytes=1000"]).settings().warc_roll_bytes == 3000
    assert CrawlerOptions(["--warc_roll_bytes=5000"]).settings().warc_roll_bytes == 5000
    assert o["warc_roll_seconds"] == 10.0
    assert o["warc_shards"] == 4
    assert o["min_delay"] is None  # the policy's default (1.0) applies
    assert CrawlerOptions([]).settings().policy.defaults.min_delay == 1.0
    assert o["lease_seconds"] == 10.0
    assert o["max_lease_urls"] == 256
    assert o["frontier_head_size"] == 2000 and o["frontier_table"] == "frontier"
    assert o["max_seen_per_host"] == 1_000_000
    assert o["seen_error_rate"] == 1e-6
    assert o["robots_ttl"] == 86400.0
    assert o["retry_delay"] == 5.0
    assert o["crawl_user_agent"] == "beam-crawler/0.1"
    assert (o["connect_timeout"], o["read_timeout"], o["fetch_timeout"]) == (10.0, 20.0, 30.0)
    assert o["max_body_bytes"] == 10 * 1024 * 1024
    assert o["max_redirects"] == 5
    assert o["max_pages"] == 0
    assert o["idle_timeout"] == 20.0


def test_default_flags_give_the_default_frontier_config():
    assert CrawlerOptions([]).settings().frontier_config() == FrontierConfig()


# --- validation --------------------------------------------------------------------------------


def test_a_valid_configuration_passes():
    _options().validate_crawler()


def test_bigtable_project_alone_is_enough():
    options = _options(project=None, bigtable_project="bt")
    options.validate_crawler()
    assert options.settings().project == "bt"


def test_bigtable_project_defaults_to_project():
    assert _options().settings().project == "p"
    assert _options(bigtable_project="bt").settings().project == "bt"


@pytest.mark.parametrize("value", [None, "", "frontier-crawler", "projects/p/topics/t",
                                   "projects/p/subscriptions/", "projects//subscriptions/s",
                                   "projects/p/subscriptions/s/extra"])
def test_bad_subscription(value):
    with pytest.raises(ValueError, match="--input_subscription must look like "
                                         "projects/PROJECT/subscriptions/NAME"):
        _options(input_subscription=value).validate_crawler()


@pytest.mark.parametrize("value", [None, "", "frontier", "projects/p/subscriptions/s",
                                   "projects/p/topics/", "projects/p/topics/t/extra"])
def test_bad_topic(value):
    with pytest.raises(ValueError, match="--frontier_topic must look like "
                                         "projects/PROJECT/topics/NAME"):
        _options(frontier_topic=value).validate_crawler()


def test_bad_subscription_message_shows_the_value():
    with pytest.raises(ValueError, match="got 'frontier-crawler'"):
        _options(input_subscription="frontier-crawler").validate_crawler()


@pytest.mark.parametrize("value", [None, ""])
def test_missing_warc_prefix(value):
    with pytest.raises(ValueError, match="--warc_prefix is required"):
        _options(warc_prefix=value).validate_crawler()


def test_missing_project():
    with pytest.raises(ValueError, match="--bigtable_project or --project is required"):
        _options(project=None).validate_crawler()


@pytest.mark.parametrize("name", ["min_delay", "retry_delay"])
def test_negative_delays(name):
    with pytest.raises(ValueError, match=f"--{name} must be >= 0, got -0.5"):
        _options(**{name: -0.5}).validate_crawler()


@pytest.mark.parametrize("name", ["min_delay", "retry_delay"])
def test_zero_delays_are_allowed(name):
    _options(**{name: 0}).validate_crawler()


@pytest.mark.parametrize("name", ["connect_timeout", "read_timeout", "fetch_timeout",
                                  "lease_seconds", "robots_ttl", "warc_roll_seconds",
                                  "idle_timeout"])
@pytest.mark.parametrize("value", [0, -1])
def test_non_positive_durations(name, value):
    with pytest.raises(ValueError, match=f"--{name} must be > 0"):
        _options(**{name: value}).validate_crawler()


@pytest.mark.parametrize("name", ["max_lease_urls", "frontier_head_size", "max_seen_per_host",
                                  "warc_roll_bytes", "warc_shards", "max_body_bytes"])
def test_counts_below_one(name):
    with pytest.raises(ValueError, match=f"--{name} must be >= 1, got 0"):
        _options(**{name: 0}).validate_crawler()


@pytest.mark.parametrize("name", ["max_redirects", "max_pages"])
def test_negative_redirects_or_pages(name):
    with pytest.raises(ValueError, match="--max_redirects and --max_pages must be >= 0"):
        _options(**{name: -1}).validate_crawler()


@pytest.mark.parametrize(("idle", "roll"), [(11, 10), (10, 10), (5, 10), (2, 1)])
def test_idle_timeout_must_exceed_warc_roll_seconds_plus_one_on_local_runs(idle, roll):
    options = _options(idle_timeout=idle, warc_roll_seconds=roll)
    options.validate_crawler()  # irrelevant to a Dataflow job
    settings = options.settings()
    with pytest.raises(ValueError, match="--idle_timeout must exceed --warc_roll_seconds"):
        validate_local_run(settings)


def test_idle_timeout_just_above_the_bound_is_fine():
    validate_local_run(_options(idle_timeout=11.5, warc_roll_seconds=10).settings())


@pytest.mark.parametrize("rate", [0, -1e-6, 0.5, 1, 2])
def test_seen_error_rate_out_of_range(rate):
    with pytest.raises(ValueError, match=r"--seen_error_rate must be in \(0, 0.5\)"):
        _options(seen_error_rate=rate).validate_crawler()


@pytest.mark.parametrize("rate", [1e-9, 0.01, 0.49])
def test_seen_error_rate_in_range(rate):
    _options(seen_error_rate=rate).validate_crawler()


def test_user_agent_without_product_token_is_rejected():
    with pytest.raises(ValueError, match="crawl_user_agent"):
        _options(crawl_user_agent="/0.1").validate_crawler()


# --- unknown flags -----------------------------------------------------------------------------


def test_unknown_flags_are_passed_through_to_beam():
    options = CrawlerOptions([*_argv(), "--runner=DirectRunner", "--streaming",
                              "--some_beam_flag=42", "--min-delay", "2"])
    options.validate_crawler()
    assert options.view_as(StandardOptions).runner == "DirectRunner"
    assert options.view_as(StandardOptions).streaming is True
    assert options.view_as(GoogleCloudOptions).project == "p"
    assert options.get_all_options(retain_unknown_options=True)["some_beam_flag"] == "42"
    assert options.get_all_options()["min_delay"] == 2.0


def test_flags_unknown_to_the_crawler_do_not_break_its_parsing():
    options = CrawlerOptions([*_argv(), "--experiments=use_runner_v2", "--not-a-flag", "x",
                              "--max_pages=3"])
    options.validate_crawler()
    assert options.get_all_options()["max_pages"] == 3
    assert options.get_all_options()["experiments"] == ["use_runner_v2"]


# --- frontier_config ---------------------------------------------------------------------------


def test_frontier_config_maps_every_flag():
    options = CrawlerOptions([
        "--min-delay=0.5", "--lease_seconds=4", "--max-lease-urls=8",
        "--frontier_head_size=50", "--max-seen-per-host=500", "--seen_error_rate=0.001",
        "--robots-ttl=60", "--retry_delay=2", "--crawl-user-agent=MyBot/3.1 (+http://m.example)",
        "--connect_timeout=1", "--read-timeout=2", "--fetch_timeout=3",
        "--max-body-bytes=1000", "--max_redirects=0"])
    config = options.settings().frontier_config()
    assert config.policy.defaults.min_delay == 0.5
    assert config.policy.for_host("any.example").min_delay == 0.5
    assert config.lease_seconds == 4.0
    assert config.max_lease_urls == 8
    assert config.head_size == 50 and config.refill_size == 25
    assert config.max_seen == 500
    assert config.seen_error_rate == 0.001
    assert config.robots_ttl == 60.0
    assert config.retry_delay == 2.0
    assert config.robots_agent == "MyBot"
    assert config.fetch == FetchConfig(
        user_agent="MyBot/3.1 (+http://m.example)", connect_timeout=1.0, read_timeout=2.0,
        total_timeout=3.0, max_body_bytes=1000, max_redirects=0)


def test_fetch_config_is_hashable():
    # One fetch service per distinct config: the config must work as a dict key.
    assert hash(CrawlerOptions(["--read-timeout=2"]).settings().frontier_config().fetch) == hash(
        CrawlerOptions(["--read_timeout=2"]).settings().frontier_config().fetch)


# --- robots_token ------------------------------------------------------------------------------


@pytest.mark.parametrize(("user_agent", "token"), [
    ("beam-crawler/0.1 (+http://x)", "beam-crawler"),
    ("beam-crawler/0.1", "beam-crawler"),
    ("MyBot", "MyBot"),
    ("MyBot (+http://m.example/bot)", "MyBot"),
    ("  spaced/1.0", "spaced"),
    ("", "*"),
    ("   ", "*"),
])
def test_robots_token(user_agent, token):
    assert robots_token(user_agent) == token


# --- settings ----------------------------------------------------------------------------------


def test_the_typed_settings_have_a_field_for_every_flag_and_no_other():
    from pipeline.settings import CrawlSettings

    parser = argparse.ArgumentParser()
    CrawlerOptions._add_argparse_args(parser)
    flags = {action.dest for action in parser._actions if action.dest != "help"}
    assert CrawlSettings.flag_names() == flags


def test_settings_read_the_policy_file_once(tmp_path, monkeypatch):
    import pipeline.options

    path = tmp_path / "policy.yaml"
    path.write_text("defaults: {min_delay: 3}\n")
    loads: list[str] = []
    original = pipeline.options.load_policy_file
    monkeypatch.setattr(pipeline.options, "load_policy_file",
                        lambda p: loads.append(str(p)) or original(p))
    options = _options(policy=str(path))
    options.validate_crawler()  # checks the flags without reading the file
    settings = options.settings()
    assert settings.frontier_config().policy is settings.policy  # one Policy for every step
    assert settings.policy.defaults.min_delay == 3.0 and loads == [str(path)]


@pytest.mark.parametrize("threshold", [0.5, 0.79, 1.01])
def test_near_duplicate_threshold_outside_what_the_lsh_bands_serve(threshold):
    with pytest.raises(ValueError, match=r"--near_duplicate_threshold must be in \[0.8, 1\]"):
        _options(near_duplicate_threshold=threshold).validate_crawler()


def test_exports_go_beside_the_warc_files_unless_told_otherwise():
    assert _options(warc_prefix="gs://b/warc").settings().exports_prefix() == "gs://b/exports"
    assert _options(warc_prefix="gs://b").settings().exports_prefix() == "gs://b/exports"
    assert _options(export_prefix="gs://c/x").settings().exports_prefix() == "gs://c/x"
    assert _options(export_prefix="none").settings().exports_prefix() == ""
