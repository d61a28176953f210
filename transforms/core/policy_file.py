"""Reading a crawl policy file (``--policy FILE``, ``.yaml``/``.yml`` or ``.json``) into a
validated :class:`transforms.core.policy.Policy` (pure: the caller says how to read a URL).

The format is in ``transforms.core.policy``. The whole file is validated on load (unknown and
duplicate keys, types, ranges, regexes, the recrawl ordering of every combination of layers a
host can get), so a bad policy stops the job at start with a ``PolicyError`` naming the file and
the field, never in the middle of a crawl.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, cast

import yaml  # type: ignore[import-untyped]

from transforms.core.policy import (
    SECTION_TYPES,
    HostPolicy,
    Overrides,
    Policy,
    PolicyError,
    apply_overrides,
    entry_path,
)

# ---- Loading: how a value of each field type (its annotation) is read from the file -----------
_READERS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "float": ((int, float), "a number"), "int": (int, "an integer"),
    "int | None": (int, "an integer or null"), "bool": (bool, "true or false"),
    "str | None": (str, "a string or null"), "frozenset[str]": (list, "a list of strings"),
    "tuple[str, ...]": (list, "a list of strings"),
}
_TOP_KEYS = ("defaults", "domains", "hosts")


def read_local_file(source: str) -> str:
    """A local file's text; a URL (``gs://...``) needs the reader of ``pipeline.policy_source``."""
    if "://" in source:
        raise OSError(f"{source}: only local files can be read here")
    return Path(source).read_text(encoding="utf-8")


def load_policy(path: str | Path, read_text: Callable[[str], str] = read_local_file) -> Policy:
    """Reads and validates a policy file (``.yaml``, ``.yml`` or ``.json``).

    Args:
        path: the file.
        read_text: reads it (the pipeline passes one that also reads ``gs://`` URLs).

    Raises:
        PolicyError: the file cannot be read or parsed, or the policy is invalid.
    """
    source, suffix = str(path), Path(path).suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise PolicyError(f"unsupported file type {suffix!r}: use .yaml, .yml or .json", "",
                          source)
    try:
        text = read_text(source)
        if suffix == ".json":
            data = json.loads(text, object_pairs_hook=_unique_keys)
        else:
            data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader
    except (OSError, ValueError, yaml.YAMLError) as error:  # UnicodeDecodeError: a ValueError
        raise PolicyError(f"cannot load: {error}", "", source) from None
    return parse_policy({} if data is None else data, source)  # an empty YAML file is None


def parse_policy(data: Mapping[str, Any], source: str = "<policy>") -> Policy:
    """Builds a :class:`Policy` from parsed YAML or JSON, validating all of it.

    Raises:
        PolicyError: naming ``source`` and the field path of the first problem.
    """
    try:
        top = _mapping(data, "")
        _known_keys(top, _TOP_KEYS, "")
        defaults = _validated(HostPolicy(), top.get("defaults"), "defaults")
        domains = _table(top.get("domains"), "domains", defaults)
        hosts = _table(top.get("hosts"), "hosts", defaults)
        policy = Policy(defaults, domains, hosts)
        # A host gets the layers of one of these keys (its longest matching domain suffix, its
        # name, its name and port), so resolving every key validates every combination.
        for key, _ in domains + hosts:
            policy.for_host(key)
    except PolicyError as error:
        raise error.under("", source) from None
    return policy


def _validated(base: HostPolicy, data: Any, path: str) -> HostPolicy:
    """``base`` with the overrides in ``data`` applied; checks them on their own."""
    overrides = _overrides(data, path)
    try:
        return apply_overrides(base, overrides)
    except PolicyError as error:
        raise error.under(path) from None


def _table(data: Any, name: str, defaults: HostPolicy) -> tuple[tuple[str, Overrides], ...]:
    table: dict[str, Overrides] = {}
    for raw, value in _mapping(data, name).items():
        if not isinstance(raw, str) or not raw.strip(". "):
            raise PolicyError(f"keys must be host or domain names, got {raw!r}", name)
        key = raw.strip().lower()
        if name == "domains":
            key = key.strip(".")
        elif key.startswith("."):
            raise PolicyError("a host key is an exact host; suffixes go under domains",
                              entry_path(name, raw))
        try:
            key = key if key.isascii() else key.encode("idna").decode("ascii")
        except UnicodeError as error:
            raise PolicyError(f"not a valid host name: {error}", entry_path(name, raw)) from None
        if key in table:
            raise PolicyError("the same entry as another key", entry_path(name, raw))
        _validated(defaults, value, entry_path(name, raw))
        table[key] = _overrides(value, entry_path(name, raw))
    return tuple(table.items())


def _overrides(data: Any, path: str, cls: type = HostPolicy) -> Overrides:
    items = _mapping(data, path)
    types = {f.name: str(f.type) for f in fields(cls)}
    _known_keys(items, tuple(types), path)
    pairs = []
    for key, value in items.items():
        if key in SECTION_TYPES and cls is HostPolicy:
            pairs.append((key, _overrides(value, _path(path, key), SECTION_TYPES[key])))
        else:
            pairs.append((key, _typed(value, types[key], _path(path, key))))
    return tuple(pairs)


def _typed(value: Any, kind: str, path: str) -> Any:
    if value is None and kind.endswith("None"):
        return None
    expected, wanted = _READERS[kind]
    if isinstance(value, bool) != (kind == "bool") or not isinstance(value, expected):
        raise PolicyError(f"must be {wanted}, got {type(value).__name__} {value!r}", path)
    if expected is list:
        items = cast(list[Any], value)
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item:
                raise PolicyError(f"must be a non-empty string, got {item!r}", f"{path}[{i}]")
        return frozenset(items) if kind.startswith("frozenset") else tuple(items)
    return value


def _mapping(data: Any, path: str) -> Mapping[str, Any]:
    if data is None:  # a key without a value in YAML
        return {}
    if not isinstance(data, Mapping):
        raise PolicyError(f"must be a mapping, got {type(data).__name__} {data!r}", path)
    return data


def _known_keys(data: Mapping[str, Any], known: tuple[str, ...], path: str) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f'did you mean "{close[0]}"?' if close else f"known keys: {', '.join(known)}"
            raise PolicyError(f"unknown key ({hint})", _path(path, str(key)))


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _path(path: str, key: str) -> str:
    """``path`` extended by ``key``, quoted unless it is an identifier."""
    key = key if _IDENTIFIER.fullmatch(key) else json.dumps(key)
    return f"{path}.{key}" if path else key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    duplicates = [key for key, count in Counter(key for key, _ in pairs).items() if count > 1]
    if duplicates:
        raise ValueError(f"duplicate key {duplicates[0]!r}")
    return dict(pairs)


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that rejects duplicate keys (PyYAML would silently keep the last)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark)
                seen.add(key_node.value)
        return dict(super().construct_mapping(node, deep=deep))
