"""The crawl policy: defaults, layered resolution per host, and validation of policy files."""

from __future__ import annotations

import json
import pickle
import re
import textwrap

import pytest

from transforms.core import policy as policy_module
from transforms.core.policy import (
    DEFAULT_POLICY,
    DEFAULT_REMOVE_PARAMS,
    DEFAULT_SKIP_EXTENSIONS,
    HostPolicy,
    Policy,
    PolicyError,
    RecrawlBounds,
    TrapLimits,
    host_policy_dict,
    is_removed_param,
    policy_summary,
)
from transforms.core.policy_file import load_policy, parse_policy


def test_defaults_are_the_documented_ones():
    hp = DEFAULT_POLICY.for_host("example.com")
    assert hp == HostPolicy()
    assert (hp.min_delay, hp.max_pages_per_host, hp.max_depth, hp.priority_boost) == (
        1.0, 10_000, None, 0)
    assert hp.allowed_schemes == {"http", "https", "ftp"}
    assert hp.max_url_length == 2048
    assert hp.recrawl == RecrawlBounds(86400.0, 3600.0, 30 * 86400.0)
    assert hp.traps == TrapLimits(16, 2, 8, 2)
    assert hp.user_agent is None and hp.sort_query is False
    assert {"jpg", "png", "mp4", "zip", "exe", "woff2", "pdf", "docx"} <= hp.skip_extensions
    assert not {"html", "htm", "php", "xml", "txt", ""} & hp.skip_extensions
    assert hp.remove_params == DEFAULT_REMOVE_PARAMS


def test_host_policy_normalizes_its_collections():
    hp = HostPolicy(allow_domains=(".Example.COM",), deny_domains=("Ads.Example.com.",),
                    allowed_schemes=frozenset({"HTTPS"}), skip_extensions=frozenset({".JPG"}),
                    remove_params=("UTM_*",), min_delay=2)
    assert hp.allow_domains == ("example.com",)
    assert hp.deny_domains == ("ads.example.com",)
    assert hp.allowed_schemes == {"https"}
    assert hp.skip_extensions == {"jpg"}
    assert hp.remove_params == ("utm_*",)
    assert isinstance(hp.min_delay, float)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"min_delay": -1}, "min_delay: must be >= 0, got -1"),
    ({"min_delay": float("inf")}, "min_delay: must be finite"),
    ({"max_pages_per_host": 0}, "max_pages_per_host: must be >= 1, got 0"),
    ({"max_depth": -1}, "max_depth: must be >= 0, got -1"),
    ({"max_url_length": 0}, "max_url_length: must be >= 1"),
    ({"allowed_schemes": frozenset({"gopher"})}, "allowed_schemes: must be a non-empty subset"),
    ({"allowed_schemes": frozenset()}, "allowed_schemes: must be a non-empty subset"),
    ({"deny_url_patterns": ("ok", "(")}, "deny_url_patterns[1]: invalid regex '('"),
    ({"deny_domains": (".",)}, "deny_domains: empty domain"),
    ({"user_agent": " "}, "user_agent: must be a non-empty string"),
])
def test_host_policy_rejects_invalid_values(kwargs, message):
    with pytest.raises(PolicyError) as info:
        HostPolicy(**kwargs)
    assert str(info.value).startswith(message)


def test_recrawl_bounds_must_be_ordered_and_positive():
    with pytest.raises(PolicyError, match="min_interval <= default_interval <= max_interval"):
        RecrawlBounds(default_interval=60)
    with pytest.raises(PolicyError, match="min_interval: must be > 0, got 0"):
        RecrawlBounds(min_interval=0)
    assert RecrawlBounds(10, 10, 10).default_interval == 10.0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_path_depth": 0}, "max_path_depth: must be >= 1"),
    ({"max_repeated_segments": 0}, "max_repeated_segments: must be >= 1"),
    ({"max_query_params": -1}, "max_query_params: must be >= 0"),
    ({"calendar_window_years": -1}, "calendar_window_years: must be >= 0"),
])
def test_trap_limits_ranges(kwargs, message):
    with pytest.raises(PolicyError, match=re.escape(message)):
        TrapLimits(**kwargs)
    assert TrapLimits(max_query_params=0, calendar_window_years=0).calendar_window_years == 0


LAYERED = {
    "defaults": {"priority_boost": 1, "min_delay": 0.5, "traps": {"max_path_depth": 10}},
    "domains": {
        ".org": {"priority_boost": 2, "max_pages_per_host": 100},
        "example.org": {"priority_boost": 3, "traps": {"max_query_params": 3}},
    },
    "hosts": {
        "www.example.org": {"priority_boost": 4, "min_delay": 2},
        "www.example.org:8080": {"priority_boost": 5},
        "127.0.0.2": {"max_depth": 3},
    },
}


def test_layers_apply_defaults_then_suffixes_shortest_first_then_host_then_host_port():
    policy = parse_policy(LAYERED)
    assert policy.for_host("other.com").priority_boost == 1
    assert policy.for_host("org").priority_boost == 2
    assert policy.for_host("a.b.org").priority_boost == 2
    assert policy.for_host("example.org").priority_boost == 3
    assert policy.for_host("deep.sub.example.org").priority_boost == 3
    www = policy.for_host("www.example.org")
    assert (www.priority_boost, www.min_delay, www.max_pages_per_host) == (4, 2.0, 100)
    assert policy.for_host("www.example.org:8080").priority_boost == 5
    assert policy.for_host("www.example.org:8080").min_delay == 2.0  # from the bare host name
    assert policy.for_host("www.example.org:9999").priority_boost == 4


def test_nested_sections_merge_field_by_field():
    hp = parse_policy(LAYERED).for_host("www.example.org")
    assert hp.traps == TrapLimits(max_path_depth=10, max_query_params=3)


def test_domain_suffixes_match_on_label_boundaries_only():
    policy = parse_policy({"domains": {"example.org": {"priority_boost": 7}}})
    assert policy.for_host("example.org").priority_boost == 7
    assert policy.for_host("a.example.org").priority_boost == 7
    assert policy.for_host("badexample.org").priority_boost == 0
    assert policy.for_host("example.org.evil.com").priority_boost == 0


def test_ip_addresses_match_only_exact_entries():
    policy = parse_policy({"domains": {"0.0.2": {"priority_boost": 9},
                                       "127.0.0.3": {"priority_boost": 8}},
                           "hosts": {"127.0.0.2": {"max_depth": 3}}})
    assert policy.for_host("127.0.0.2").priority_boost == 0
    assert policy.for_host("127.0.0.3:8081").priority_boost == 8
    assert policy.for_host("127.0.0.2:8081").max_depth == 3
    assert policy.for_host("[::1]:8080") == HostPolicy()


def test_applied_overrides_names_the_entries_in_order():
    policy = parse_policy(LAYERED)
    assert policy.applied_overrides("www.example.org:8080") == (
        'domains."org"', 'domains."example.org"', 'hosts."www.example.org"',
        'hosts."www.example.org:8080"')
    assert policy.applied_overrides("example.com") == ()


def test_resolution_is_cached_and_the_policy_pickles_without_the_cache():
    policy = parse_policy(LAYERED)
    assert policy.for_host("www.example.org") is policy.for_host("www.example.org")
    for i in range(1000):
        policy.for_host(f"h{i}.example.org")
    data = pickle.dumps(policy)
    assert len(data) < len(pickle.dumps(HostPolicy())) * 10
    clone = pickle.loads(data)
    assert clone == policy and hash(clone) == hash(policy)
    assert clone.for_host("www.example.org") == policy.for_host("www.example.org")


def test_host_keys_are_normalized():
    policy = parse_policy({"hosts": {"WWW.Example.COM": {"priority_boost": 1},
                                     "bücher.de": {"priority_boost": 2}},
                           "domains": {".GOV.": {"priority_boost": 3}}})
    assert policy.for_host("www.example.com").priority_boost == 1
    assert policy.for_host("xn--bcher-kva.de").priority_boost == 2
    assert policy.for_host("data.gov").priority_boost == 3


@pytest.mark.parametrize(("data", "message"), [
    ({"hosts": {"example.com": {"min_delay": -1}}},
     'f: hosts."example.com".min_delay: must be >= 0, got -1'),
    ({"defaults": {"min_dealy": 1}},
     'f: defaults.min_dealy: unknown key (did you mean "min_delay"?)'),
    ({"hostz": {}}, 'f: hostz: unknown key (did you mean "hosts"?)'),
    ({"defaults": {"zzz": 1}}, "f: defaults.zzz: unknown key (known keys: min_delay, "),
    ({"defaults": {"traps": {"max_path_dept": 3}}},
     'f: defaults.traps.max_path_dept: unknown key (did you mean "max_path_depth"?)'),
    ({"defaults": {"max_depth": True}},
     "f: defaults.max_depth: must be an integer or null, got bool"),
    ({"defaults": {"max_pages_per_host": 1.5}},
     "f: defaults.max_pages_per_host: must be an integer"),
    ({"defaults": {"min_delay": "1"}}, "f: defaults.min_delay: must be a number, got str '1'"),
    ({"defaults": {"sort_query": 1}}, "f: defaults.sort_query: must be true or false"),
    ({"defaults": {"skip_extensions": "jpg"}},
     "f: defaults.skip_extensions: must be a list of strings, got str 'jpg'"),
    ({"defaults": {"deny_domains": ["ok.com", 3]}},
     "f: defaults.deny_domains[1]: must be a non-empty string, got 3"),
    ({"domains": {".gov": {"deny_url_patterns": ["[a-"]}}},
     'f: domains.".gov".deny_url_patterns[0]: invalid regex \'[a-\': unterminated'),
    ({"defaults": {"allowed_schemes": ["http", "gopher"]}},
     "f: defaults.allowed_schemes: must be a non-empty subset of ['ftp', 'http', 'https']"),
    ({"defaults": {"recrawl": {"min_interval": 100000}}},
     "f: defaults.recrawl: min_interval <= default_interval <= max_interval must hold, "
     "got 100000, 86400, 2592000"),
    ({"domains": {"gov": {"recrawl": {"default_interval": 60}}}},
     'f: domains."gov".recrawl: min_interval <= default_interval'),
    # Each entry alone is valid; a host under both gets min 7200 > default 3600.
    ({"domains": {"gov": {"recrawl": {"min_interval": 7200, "default_interval": 90000}}},
      "hosts": {"a.gov": {"recrawl": {"default_interval": 3600}}}},
     'f: hosts."a.gov".recrawl: min_interval <= default_interval'),
    ({"defaults": {"traps": {"max_path_depth": 0}}},
     "f: defaults.traps.max_path_depth: must be >= 1, got 0"),
    ({"defaults": {"traps": 5}}, "f: defaults.traps: must be a mapping, got int 5"),
    ({"hosts": ["example.com"]}, "f: hosts: must be a mapping, got list"),
    ({"hosts": {"example.com": None, ".example.com": {}}},
     'f: hosts.".example.com": a host key is an exact host; suffixes go under domains'),
    ({"domains": {"gov": {}, ".gov": {}}}, 'f: domains.".gov": the same entry as another key'),
    ({"hosts": {8080: {}}}, "f: hosts: keys must be host or domain names, got 8080"),
    ({"defaults": {"user_agent": ""}}, "f: defaults.user_agent: must be a non-empty string"),
])
def test_parse_policy_errors_name_the_source_and_the_field(data, message):
    with pytest.raises(PolicyError) as info:
        parse_policy(data, "f")
    assert str(info.value).startswith(message), str(info.value)
    assert info.value.source == "f"


def test_parse_policy_rejects_a_non_mapping():
    with pytest.raises(PolicyError, match="<policy>: must be a mapping, got list"):
        parse_policy([1, 2])  # type: ignore[arg-type]


def test_null_resets_optional_fields_and_empty_sections_are_fine():
    policy = parse_policy({"defaults": {"max_depth": 3, "user_agent": "bot/1"},
                           "hosts": {"a.com": {"max_depth": None, "user_agent": None},
                                     "b.com": None}, "domains": None})
    assert policy.defaults.max_depth == 3 and policy.defaults.user_agent == "bot/1"
    assert policy.for_host("a.com").max_depth is None
    assert policy.for_host("a.com").user_agent is None
    assert policy.for_host("b.com") == policy.defaults


def test_a_dict_of_every_field_round_trips():
    hp = HostPolicy(min_delay=0.25, max_depth=4, allow_domains=("a.com",),
                    deny_url_patterns=(r"\?sort=",), user_agent="bot/2", sort_query=True,
                    traps=TrapLimits(max_path_depth=5), recrawl=RecrawlBounds(100, 10, 1000))
    as_json = json.loads(json.dumps(host_policy_dict(hp)))
    assert parse_policy({"defaults": as_json}).defaults == hp
    assert parse_policy({"defaults": host_policy_dict(HostPolicy())}) == DEFAULT_POLICY


def test_policy_summary_is_flat_and_serializable():
    summary = policy_summary(HostPolicy(max_depth=3))
    assert summary["max_depth"] == 3
    assert summary["traps.max_path_depth"] == 16
    assert summary["recrawl.default_interval"] == 86400.0
    assert summary["allowed_schemes"] == ["ftp", "http", "https"]
    assert "traps" not in summary
    json.dumps(summary)


def docstring_example() -> str:
    doc = policy_module.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    return textwrap.dedent(block)


def test_the_documented_example_loads(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(docstring_example())
    policy = load_policy(path)
    assert policy.for_host("data.gov").max_pages_per_host == 500
    assert policy.for_host("example.com").priority_boost == 5
    assert policy.for_host("127.0.0.2:8081").traps.max_path_depth == 4
    assert policy.defaults.skip_extensions == {"jpg", "png"}
    assert policy.defaults.deny_domains == ("ads.example.net",)


def test_load_yaml_and_json_agree(tmp_path):
    data = {"defaults": {"min_delay": 2.0}, "hosts": {"127.0.0.2:8081": {"priority_boost": 5}}}
    (tmp_path / "p.json").write_text(json.dumps(data))
    (tmp_path / "p.yml").write_text(
        "defaults:\n  min_delay: 2.0\nhosts:\n  127.0.0.2:8081: {priority_boost: 5}\n")
    assert load_policy(tmp_path / "p.json") == load_policy(str(tmp_path / "p.yml"))
    assert load_policy(tmp_path / "p.json") == parse_policy(data)


def test_an_empty_yaml_file_is_the_default_policy(tmp_path):
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    assert load_policy(tmp_path / "empty.yaml") == DEFAULT_POLICY


@pytest.mark.parametrize(("name", "text", "message"), [
    ("p.yaml", "hosts:\n  a.com: {min_delay: 1}\n  a.com: {min_delay: 2}\n",
     "cannot load: .*duplicate key 'a.com'"),
    ("p.json", '{"defaults": {"min_delay": 1, "min_delay": 2}}', "duplicate key 'min_delay'"),
    ("p.yaml", "defaults: [unclosed\n", "cannot load: "),
    ("p.json", "{", "cannot load: "),
    ("p.toml", "", "unsupported file type '.toml'"),
    ("p.yaml", "defaults:\n  min_delay: -3\n", "defaults.min_delay: must be >= 0, got -3"),
])
def test_load_policy_errors_name_the_file(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(PolicyError, match=message) as info:
        load_policy(path)
    assert str(info.value).startswith(str(path))


def test_a_missing_file_is_a_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="cannot load"):
        load_policy(tmp_path / "missing.yaml")


def test_removed_params_match_globs_in_any_case():
    patterns = HostPolicy().remove_params
    for name in ("JSESSIONID", "PHPSESSID", "sid", "ASPSESSIONIDQACRDBTA", "utm_source",
                 "UTM_Campaign", "gclid", "fbclid", "mc_eid"):
        assert is_removed_param(name, patterns), name
    for name in ("page", "q", "side", "usid", "utm", "id"):
        assert not is_removed_param(name, patterns), name
    assert not is_removed_param("sid", ())


def test_default_collections_are_exposed():
    assert "pdf" in DEFAULT_SKIP_EXTENSIONS
    assert DEFAULT_REMOVE_PARAMS[0] == "jsessionid"
    assert Policy() == DEFAULT_POLICY


def test_a_policy_built_in_code_resolves_like_a_parsed_one():
    policy = Policy(HostPolicy(min_delay=2), domains=((".Example.org", (("max_depth", 1),)),),
                    hosts=(("www.example.org", (("traps", (("max_path_depth", 3),)),)),))
    hp = policy.for_host("www.example.org")
    assert (hp.min_delay, hp.max_depth, hp.traps.max_path_depth) == (2.0, 1, 3)
    parsed = parse_policy({"defaults": {"min_delay": 2},
                           "domains": {".Example.org": {"max_depth": 1}},
                           "hosts": {"www.example.org": {"traps": {"max_path_depth": 3}}}})
    for host in ("www.example.org", "a.example.org", "example.com"):
        assert policy.for_host(host) == parsed.for_host(host)
