"""The CLI's tables print API text as written: names with square brackets are not rich
markup, so "model[awq]" keeps its suffix and "x[/]y" prints instead of raising."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from infercost.cli import main
from infercost.cli.client import ApiClient
from infercost.cli.watch import summary_table

#: Names a user may give an endpoint or a served model; each is markup to rich.
TRICKY = ("x[/]y", "model[awq]", "[bold]loud[/bold]", "[red")
JOB_ID = "0f0e0000-0000-0000-0000-000000000000"


def _pages(path: str) -> dict[str, Any]:
    """What the API would answer, with bracketed names everywhere it carries text."""
    if path == "/v1/jobs":
        item = {
            "id": JOB_ID,
            "status": "succeeded",
            "endpoint_id": "e1",
            "load": {"mode": "concurrency", "levels": [1]},
            "progress": {"done": 1, "total": 1},
            "created_at": "2026-01-02T03:04:05Z",
            "finished_at": None,
        }
        return {"items": [item], "total": 1}
    if path == "/v1/endpoints":
        return {"items": [{"id": "e1", "name": "x[/]y"}], "total": 1}
    if path == "/v1/comparisons":
        rows = [
            {
                "deployment": {
                    "model": model,
                    "engine": "vllm[nightly]",
                    "hardware": "[H200]",
                    "gpu_count": 1,
                },
                "mode": "concurrency",
                "level": 1,
                "runs": 1,
                "figures": {"ttft_p50_ms": 10.0, "[bold]odd[/bold]": 1.0},
                "slo_passed": None,
            }
            for model in TRICKY
        ]
        return {"items": rows, "total": 4, "figures": ["ttft_p50_ms", "[bold]odd[/bold]"]}
    raise AssertionError(path)


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> None:
    def get(self: ApiClient, path: str, **params: Any) -> dict[str, Any]:
        return _pages(path)

    monkeypatch.setattr(ApiClient, "get", get)


def test_jobs_prints_a_bracketed_endpoint_name_literally(fake_api: None) -> None:
    result = CliRunner().invoke(main, ["jobs", "--url", "http://127.0.0.1:9", "--token", "t"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "x[/]y" in result.output


def test_compare_prints_bracketed_models_engines_and_headers_literally(fake_api: None) -> None:
    result = CliRunner().invoke(main, ["compare", "--url", "http://127.0.0.1:9", "--token", "t"])
    assert result.exit_code == 0, result.output
    for name in (*TRICKY, "vllm[nightly]", "[H200]", "[bold]odd[/bold]"):
        assert name in result.output, name


def _render(renderable: Any) -> str:
    out = io.StringIO()
    Console(file=out, width=250, color_system=None).print(renderable)
    return out.getvalue()


def test_summary_table_shows_statuses_as_written() -> None:
    run: Mapping[str, Any] = {
        "mode": "concurrency",
        "level": 1,
        "status": "x[/]y",
        "requests": {"total": 1, "failed": 0},
    }
    assert "x[/]y" in _render(summary_table({"runs": [run]}))
