"""Every third-party module the crawler imports directly is declared in setup.py (the runtime
requirements, or the ``local`` extra for what only the local tooling imports), and the runtime
pins in requirements.txt hold only what the runtime needs."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL_ONLY = ("pipeline/local/", "pipeline/demo/")  # the `local` extra covers these


def _declared() -> tuple[set[str], set[str]]:
    """(runtime, local extra) distribution names from setup.py, normalized."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call)
                and getattr(n.func, "id", "") == "setup")
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords
          if k.arg in ("install_requires", "extras_require")}

    def names(specs: list[str]) -> set[str]:
        return {_normal(re.split(r"[<>=!\[; ]", s, maxsplit=1)[0]) for s in specs}

    return names(kw["install_requires"]), names(kw["extras_require"]["local"])


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names
            and m not in ("pipeline", "transforms", "__future__")}


def test_every_third_party_import_is_declared():
    runtime, local = _declared()
    providers = packages_distributions()
    missing = []
    for package in ("pipeline", "transforms"):
        for path in (ROOT / package).rglob("*.py"):
            allowed = runtime | local if str(path.relative_to(ROOT)).startswith(LOCAL_ONLY) \
                else runtime
            for module in _imports(path):
                dists = {_normal(d) for d in providers.get(module, [module])}
                # google.* is one namespace over several declared distributions
                if module == "google":
                    dists = {d for d in runtime if d.startswith("google-cloud-")}
                if not dists & allowed:
                    missing.append(f"{path.relative_to(ROOT)}: {module} ({sorted(dists)})")
    assert not missing, "\n".join(sorted(missing))


def test_runtime_pins_hold_no_development_only_package():
    pins = {_normal(line.split("==")[0].split("[")[0])
            for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    assert not pins & {"w3lib", "scrapy", "pytest", "ruff", "mypy", "matplotlib", "py-spy"}
    runtime, _ = _declared()
    assert runtime <= pins | {"apache-beam"}  # every runtime requirement is pinned
