"""The runner's parts import one way: the package (job.py) uses the sweep, the shards and its
own driver, recorder and sources; none of those imports the runner's job module back, and the
sweep and the shards know nothing of the runner at all."""

from __future__ import annotations

import ast
from pathlib import Path

WORKERS = Path(__file__).resolve().parents[2] / "workers"


def imported(path: Path) -> set[str]:
    """Every module a file imports (at any depth: TYPE_CHECKING blocks included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_sweep_and_the_shards_do_not_import_the_runner() -> None:
    for name in ("sweep.py", "shards.py", "progress.py"):
        runner = {m for m in imported(WORKERS / name) if m.startswith("workers.runner")}
        assert runner == set(), (name, runner)


def test_the_runners_parts_do_not_import_its_job_module() -> None:
    for name in ("driver.py", "recorder.py", "sources.py"):
        back = imported(WORKERS / "runner" / name) & {"workers.runner", "workers.runner.job"}
        assert back == set(), (name, back)
