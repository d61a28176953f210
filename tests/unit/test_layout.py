"""The layout states the rules, and this test keeps them (README "How it works", "Layout").

``transforms`` is layered; each folder may import only the folders below it:

    transforms/core       pure crawl logic: the standard library, protego, selectolax, yaml,
                          numpy, mmh3, datasketch (MinHash), publicsuffixlist (scope)
    transforms/formats    encodings of core records (rows, row keys, messages, index, WARC)
    transforms/frontier   one key's frontier decisions, pure (state, admission, leases, ...)
    transforms/fetchers   asyncio adapters: the fetch service, HTTP (aiohttp), FTP, SSRF guard
    transforms/stores     blocking Google Cloud clients: Bigtable, Pub/Sub pulls and acks
    transforms/*.py       the Beam composites, one per module

``pipeline`` (wiring, CLI, operator tools, local tooling, demo) may import anything in
``transforms``; nothing in ``transforms`` imports ``pipeline``. No module imports itself back
through others (imports inside functions count), and no module is over ``MAX_LINES`` lines.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("pipeline", "transforms", "benchmarks")
MAX_LINES = 400

# Third-party top-level packages each layer may import (the standard library is always allowed).
THIRD_PARTY = {
    # numpy, mmh3 and datasketch: MinHash signatures and LSH (transforms.core.minhash, lsh);
    # publicsuffixlist: registered domains for --scope domain (transforms.core.scope).
    "transforms.core": {"protego", "selectolax", "yaml", "numpy", "mmh3", "datasketch",
                        "publicsuffixlist"},
    # warcio: transforms.formats.warc only, see below; pyarrow: the export schema.
    "transforms.formats": {"warcio", "pyarrow"},
    "transforms.frontier": set(),
    "transforms.fetchers": {"aiohttp", "aiohappyeyeballs", "aioftp"},
    "transforms.stores": {"google"},
}
# Project folders each layer may import.
LOWER = {
    "transforms.core": {"transforms.core"},
    "transforms.formats": {"transforms.core", "transforms.formats"},
    "transforms.frontier": {"transforms.core", "transforms.formats", "transforms.frontier"},
    "transforms.fetchers": {"transforms.core", "transforms.formats", "transforms.frontier",
                            "transforms.fetchers"},
    "transforms.stores": {"transforms.core", "transforms.formats", "transforms.frontier",
                          "transforms.stores"},
}
WARCIO_MODULES = {"transforms.formats.warc"}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PROJECT:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth, except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names
                       if f"{node.module}.{alias.name}" in MODULES)
    return out


IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def _layer(module: str) -> str | None:
    for layer in LOWER:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def _project(module: str) -> bool:
    return module.split(".")[0] in PROJECT


def test_each_transforms_layer_imports_only_the_layers_below_it():
    wrong = []
    for module, imported in IMPORTS.items():
        layer = _layer(module)
        if layer is None:
            continue
        for target in imported:
            top = target.split(".")[0]
            if _project(target):
                target_layer = _layer(target)
                if target_layer not in LOWER[layer] and target not in LOWER[layer]:
                    if not (target in ("transforms",) or target_layer in LOWER[layer]):
                        wrong.append(f"{module} imports {target}")
            elif top in sys.stdlib_module_names or top == "__future__":
                continue
            elif top not in THIRD_PARTY[layer] or (top == "warcio"
                                                    and module not in WARCIO_MODULES):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def _closure(module: str) -> set[str]:
    """Every module ``module`` imports, directly or through project modules."""
    seen, todo = set(), [module]
    while todo:
        for target in IMPORTS.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                if target in MODULES:
                    todo.append(target)
    return seen


def test_the_pure_core_and_the_frontier_pull_in_no_beam_aiohttp_warcio_or_cloud_client():
    """Not even through another module: a pure module that imports one that imports aiohttp
    is not pure."""
    forbidden = ("apache_beam", "aiohttp", "warcio", "google", "grpc")
    wrong = [f"{m} pulls in {t}" for m in IMPORTS
             if _layer(m) in ("transforms.core", "transforms.frontier")
             for t in _closure(m) if t.split(".")[0] in forbidden]
    assert not wrong, "\n".join(sorted(wrong))


def test_transforms_never_imports_pipeline_or_benchmarks():
    wrong = [f"{m} imports {t}" for m, imported in IMPORTS.items() if m.startswith("transforms")
             for t in imported if t.split(".")[0] in ("pipeline", "benchmarks", "tests")]
    assert not wrong, "\n".join(sorted(wrong))


def test_there_is_no_import_cycle():
    graph: dict[str, set[str]] = defaultdict(set)
    for module, imported in IMPORTS.items():
        for target in imported:
            if target in MODULES and target != module:
                graph[module].add(target)
    cycles = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module)
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module]} has {lines} lines (at most {MAX_LINES})"
