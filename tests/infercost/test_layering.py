"""The core stays free of Celery (DESIGN.md, Processes): no module under infercost/ imports
it, so the API, the CLI and the simulator never load a broker client by importing the core.
Read from the source with ast, so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import infercost

CORE = Path(infercost.__file__).parent


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def celery_imports(root: Path) -> list[str]:
    """`path: module` for every import of celery (or a celery submodule) under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for name in sorted(_imported(ast.parse(path.read_text(), str(path)))):
            if name == "celery" or name.startswith("celery."):
                found.append(f"{path.relative_to(root.parent)}: {name}")
    return found


def test_no_core_module_imports_celery() -> None:
    assert celery_imports(CORE) == []


@pytest.mark.parametrize(
    "source",
    [
        "import celery\n",
        "from celery import Celery\n",
        "def f():\n    from celery.result import AsyncResult\n",
        "import os, celery.signals as s\n",
    ],
)
def test_the_check_finds_every_form_of_import(tmp_path: Path, source: str) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text(source)
    (pkg / "clean.py").write_text("import celeryish\nfrom .celery import x\n")
    assert len(celery_imports(pkg)) == 1
