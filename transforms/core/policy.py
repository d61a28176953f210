"""The crawl policy: per-host limits and filters (pure). ``transforms.core.policy_file`` reads
and validates the YAML or JSON file it comes from.

A policy is *defaults* plus overrides per domain suffix and per host. ``Policy.for_host``
resolves the :class:`HostPolicy` of a politeness key by layering, each layer changing only the
fields it names: the defaults, every matching ``domains`` entry from the shortest suffix to the
longest, the ``hosts`` entry of the bare host name, then that of ``host:port``. A domain entry
(``.gov``, ``gov``, ``example.org``) matches the domain and its subdomains on label boundaries;
an IP address only matches an entry equal to it.

File format (``--policy FILE``: ``.yaml``/``.yml`` or ``.json``; every key is optional)::

    defaults:
      min_delay: 1.0                  # seconds between requests to one host
      max_pages_per_host: 10000       # the host's page budget
      max_depth: null                 # link depth from the seed; null: unlimited
      priority_boost: 0               # added to the priority of the host's requests
      allowed_schemes: [http, https, ftp]
      allow_domains: []               # domain suffixes; empty: any domain
      deny_domains: [ads.example.net]
      deny_url_patterns: ['/cart/', '[?&]sort=']  # Python regexes, searched in the URL
      max_url_length: 2048
      user_agent: null                # null: the pipeline's --crawl_user_agent
      skip_extensions: [jpg, png]     # replaces the default set
      remove_params: ['utm_*', sid]   # case-insensitive globs, removed when canonicalizing
      sort_query: false
      sitemaps: true                  # follow the Sitemap: lines of robots.txt
      probe_sitemap_xml: false        # also try /sitemap.xml when robots.txt names none
      shards: 1                       # hot hosts: N frontier keys, each N times the delay
      traps: {max_path_depth: 16, max_repeated_segments: 2, max_query_params: 8,
              calendar_window_years: 2}
      recrawl: {default_interval: 86400, min_interval: 3600, max_interval: 2592000}
    domains:
      .gov: {max_pages_per_host: 500}
    hosts:
      example.com: {min_delay: 2.0, priority_boost: 5}
      127.0.0.2:8081: {traps: {max_path_depth: 4}}

``recrawl`` and ``traps`` merge field by field; any other value replaces the inherited one. The
whole file is validated on load (unknown and duplicate keys, types, ranges, regexes, the recrawl
ordering of every combination of layers a host can get), so a bad policy stops the job at start
with a :class:`PolicyError` naming the file and the field, never in the middle of a crawl.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

from transforms.core.sharding import MAX_SHARDS
from transforms.core.url_params import DEFAULT_REMOVED_PARAMS, param_filter

SUPPORTED_SCHEMES: frozenset[str] = frozenset({"http", "https", "ftp"})

# The crawler stores only HTML, so fetching any of these spends a politeness slot on a body that
# is discarded. PDF and office documents too: no extractor handles them yet (an operator who adds
# one drops them from the list). The fetcher's content-type check stays the backstop for media
# without a telling extension. Not skipped: xml, txt, rss and the like (sitemaps, feeds).
DEFAULT_SKIP_EXTENSIONS: frozenset[str] = frozenset(
    "jpg jpeg png gif bmp tif tiff ico webp avif heic svg psd "  # images
    "mp3 wav ogg oga flac aac m4a wma opus mid midi "  # audio
    "mp4 m4v avi mov wmv flv mkv webm mpg mpeg 3gp ogv "  # video
    "zip gz tgz bz2 xz zst 7z rar tar lz lzma cab iso dmg "  # archives, disk images
    "exe msi bin dll so apk deb rpm jar class "  # executables, packages
    "woff woff2 ttf otf eot "  # fonts
    "pdf ps eps doc docx xls xlsx ppt pptx odt ods odp "  # documents
    "css js".split()  # never HTML
)
# Session ids and click trackers: they make one page look like endlessly many URLs. The list
# lives with the canonicalizer that applies it.
DEFAULT_REMOVE_PARAMS: tuple[str, ...] = DEFAULT_REMOVED_PARAMS


class PolicyError(ValueError):
    """An invalid policy; ``str(error)`` is ``"<source>: <field path>: <problem>"``, e.g.
    ``policy.yaml: hosts."example.com".min_delay: must be >= 0, got -1``.

    Attributes:
        problem: what is wrong.
        path: the field (``""`` for the whole file).
        source: the policy file, ``<policy>``, or ``""`` when raised by a dataclass directly.
    """

    def __init__(self, problem: str, path: str = "", source: str = "") -> None:
        super().__init__(": ".join(p for p in (source, path, problem) if p))
        self.problem, self.path, self.source = problem, path, source

    def under(self, prefix: str, source: str = "") -> PolicyError:
        """The same error with ``prefix`` in front of its path (and ``source``, if given)."""
        path = ".".join(p for p in (prefix, self.path) if p)
        return PolicyError(self.problem, path, source or self.source)


def _check(name: str, value: Any, minimum: float, strict: bool = False) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise PolicyError(f"must be finite, got {value}", name)
    if not (value > minimum if strict else value >= minimum):
        raise PolicyError(f"must be {'>' if strict else '>='} {minimum:g}, got {value}", name)


@dataclass(frozen=True)
class RecrawlBounds:
    """Seconds between fetches of one URL: the interval without other evidence, and the clamp
    for intervals derived from cache headers and observed change.

    Raises:
        PolicyError: unless 0 < min_interval <= default_interval <= max_interval.
    """

    default_interval: float = 86400.0
    min_interval: float = 3600.0
    max_interval: float = 30 * 86400.0

    def __post_init__(self) -> None:
        for f in fields(self):
            _check(f.name, getattr(self, f.name), 0, strict=True)
            object.__setattr__(self, f.name, float(getattr(self, f.name)))
        if not self.min_interval <= self.default_interval <= self.max_interval:
            got = ", ".join(f"{v:.15g}" for v in (
                self.min_interval, self.default_interval, self.max_interval))
            raise PolicyError(
                f"min_interval <= default_interval <= max_interval must hold, got {got}")


@dataclass(frozen=True)
class TrapLimits:
    """Defences against infinite URL spaces (``transforms.core.filters`` has the exact rules).

    Attributes:
        max_path_depth: more path segments than this is an ever-deeper path (relative links
            on a site that answers every path).
        max_repeated_segments: a segment occurring more often than this anywhere in the path
            (``/x/x/x``, ``/a/b/a/b/a/b``) is a relative-link loop.
        max_query_params: more query parameters than this is a faceted-search explosion.
        calendar_window_years: a date in the URL more than this many years from the current
            year is an endless calendar's next/previous page; 0 disables the rule.

    Raises:
        PolicyError: for a limit below 1 (below 0 for the last two).
    """

    max_path_depth: int = 16
    max_repeated_segments: int = 2
    max_query_params: int = 8
    calendar_window_years: int = 2

    def __post_init__(self) -> None:
        _check("max_path_depth", self.max_path_depth, 1)
        _check("max_repeated_segments", self.max_repeated_segments, 1)
        _check("max_query_params", self.max_query_params, 0)
        _check("calendar_window_years", self.calendar_window_years, 0)


@dataclass(frozen=True)
class HostPolicy:
    """Everything the crawler decides per host; the field defaults are the built-in policy.

    Collections are normalized on construction (lowercase; no leading dots on domains and
    extensions) and values are range-checked, so any instance is usable as it is.

    Raises:
        PolicyError: for an out-of-range value, an unknown scheme or an invalid regex.
    """

    min_delay: float = 1.0
    max_pages_per_host: int = 10_000
    max_depth: int | None = None
    priority_boost: int = 0
    allowed_schemes: frozenset[str] = SUPPORTED_SCHEMES
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()
    deny_url_patterns: tuple[str, ...] = ()
    max_url_length: int = 2048
    recrawl: RecrawlBounds = field(default_factory=RecrawlBounds)
    user_agent: str | None = None
    traps: TrapLimits = field(default_factory=TrapLimits)
    skip_extensions: frozenset[str] = DEFAULT_SKIP_EXTENSIONS
    remove_params: tuple[str, ...] = DEFAULT_REMOVE_PARAMS
    sort_query: bool = False
    sitemaps: bool = True
    probe_sitemap_xml: bool = False
    shards: int = 1

    def __post_init__(self) -> None:
        _check("min_delay", self.min_delay, 0)
        if not 1 <= self.shards <= MAX_SHARDS:
            raise PolicyError(f"must be between 1 and {MAX_SHARDS}, got {self.shards}", "shards")
        _check("max_pages_per_host", self.max_pages_per_host, 1)
        _check("max_depth", 0 if self.max_depth is None else self.max_depth, 0)
        _check("max_url_length", self.max_url_length, 1)
        if self.user_agent is not None and not self.user_agent.strip():
            raise PolicyError("must be a non-empty string or null", "user_agent")
        schemes = frozenset(s.lower() for s in self.allowed_schemes)
        if not schemes or not schemes <= SUPPORTED_SCHEMES:
            raise PolicyError(f"must be a non-empty subset of {sorted(SUPPORTED_SCHEMES)}, got "
                              f"{sorted(self.allowed_schemes)}", "allowed_schemes")
        for name in ("allow_domains", "deny_domains"):
            domains = tuple(d.lower().strip(".") for d in getattr(self, name))
            if not all(domains):
                raise PolicyError("empty domain", name)
            object.__setattr__(self, name, domains)
        for i, pattern in enumerate(self.deny_url_patterns):
            try:
                re.compile(pattern)
            except re.error as error:
                raise PolicyError(f"invalid regex {pattern!r}: {error}",
                                  f"deny_url_patterns[{i}]") from None
        object.__setattr__(self, "min_delay", float(self.min_delay))
        object.__setattr__(self, "allowed_schemes", schemes)
        object.__setattr__(self, "skip_extensions",
                           frozenset(e.lower().lstrip(".") for e in self.skip_extensions))
        object.__setattr__(self, "remove_params", tuple(p.lower() for p in self.remove_params))


# An override: (field, value) pairs; the value of recrawl and traps is again such pairs.
Overrides = tuple[tuple[str, Any], ...]
SECTION_TYPES: dict[str, type] = {"recrawl": RecrawlBounds, "traps": TrapLimits}
_RESOLVED_CACHE_SIZE = 65536


@dataclass
class _Lookup:
    domains: dict[str, Overrides]
    hosts: dict[str, Overrides]
    resolved: dict[str, HostPolicy] = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    """The defaults and the overrides; hashable and picklable, so a DoFn can carry it.

    Attributes:
        defaults: the policy of a host no override matches.
        domains: (suffix without leading dot, overrides) pairs.
        hosts: (host name or ``host:port``, overrides) pairs.
    """

    defaults: HostPolicy = field(default_factory=HostPolicy)
    domains: tuple[tuple[str, Overrides], ...] = ()
    hosts: tuple[tuple[str, Overrides], ...] = ()
    _lookup: _Lookup = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        domains = {key.lower().strip("."): value for key, value in self.domains}
        hosts = {key.lower(): value for key, value in self.hosts}
        object.__setattr__(self, "_lookup", _Lookup(domains, hosts))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Policy, (self.defaults, self.domains, self.hosts))  # not the resolved cache

    def for_host(self, host: str) -> HostPolicy:
        """The resolved policy of ``host``, a politeness key (``example.com``, ``h:8081``).

        Resolutions are cached per instance, so calling this for every URL is cheap.
        """
        resolved = self._lookup.resolved
        policy = resolved.get(host)
        if policy is None:
            policy = self.defaults
            for label, overrides in self._layers(host):
                try:
                    policy = apply_overrides(policy, overrides)
                except PolicyError as error:  # parse_policy has ruled this out for its Policy
                    raise error.under(label) from None
            if len(resolved) >= _RESOLVED_CACHE_SIZE:
                resolved.clear()
            resolved[host] = policy
        return policy

    def applied_overrides(self, host: str) -> tuple[str, ...]:
        """The entries ``for_host(host)`` applies, in order (``domains."gov"``,
        ``hosts."data.gov"``): what ``crawler explain`` shows."""
        return tuple(label for label, _ in self._layers(host))

    def _layers(self, host: str) -> list[tuple[str, Overrides]]:
        host = host.lower()
        name, port = _split_host_port(host)
        layers = []
        if self.domains:
            labels = [name] if _is_ip(name) else name.split(".")
            for i in range(len(labels) - 1, -1, -1):
                suffix = ".".join(labels[i:])
                if suffix in self._lookup.domains:
                    layers.append((entry_path("domains", suffix), self._lookup.domains[suffix]))
        for key in (name, host) if port else (name,):
            if key in self._lookup.hosts:
                layers.append((entry_path("hosts", key), self._lookup.hosts[key]))
        return layers


DEFAULT_POLICY = Policy()


def apply_overrides(base: HostPolicy, overrides: Overrides) -> HostPolicy:
    changes = dict(overrides)
    for section in SECTION_TYPES.keys() & changes.keys():
        try:
            changes[section] = replace(getattr(base, section), **dict(changes[section]))
        except PolicyError as error:
            raise error.under(section) from None
    return replace(base, **changes)


def _split_host_port(host: str) -> tuple[str, str]:
    if host.startswith("["):
        end = host.find("]") + 1
        return host[:end], host[end + 1:] if host[end:end + 1] == ":" else ""
    name, sep, port = host.rpartition(":")
    return (name, port) if sep and port.isdigit() and ":" not in name else (host, "")


@functools.lru_cache(maxsize=4096)
def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def is_removed_param(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether query parameter ``name`` matches one of the ``remove_params`` globs (any case)."""
    matcher = param_filter(patterns)
    return matcher is not None and matcher.matches(name)


def policy_summary(hp: HostPolicy) -> dict[str, object]:
    """``hp`` as a flat, JSON-serializable dict (``traps.max_path_depth``, ...) for display."""
    summary: dict[str, object] = {}
    for key, value in host_policy_dict(hp).items():
        if isinstance(value, dict):
            summary.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            summary[key] = value
    return summary


def host_policy_dict(hp: HostPolicy) -> dict[str, object]:
    """``hp`` in the file format (nested, JSON-serializable): ``parse_policy`` reads it back."""
    out: dict[str, object] = {}
    for f in fields(hp):
        value = getattr(hp, f.name)
        if f.name in SECTION_TYPES:
            value = {s.name: getattr(value, s.name) for s in fields(value)}
        elif isinstance(value, frozenset | tuple):
            value = sorted(value) if isinstance(value, frozenset) else list(value)
        out[f.name] = value
    return out


def entry_path(table: str, key: str) -> str:
    """The path of a domains or hosts entry, always quoted: ``domains.".gov"``."""
    return f"{table}.{json.dumps(key)}"
