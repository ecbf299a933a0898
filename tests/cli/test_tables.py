"""The CLI's tables print API text as written: names with square brackets are not rich
markup, so "model[awq]" keeps its suffix and "x[/]y" prints instead of raising."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from cli import main
from cli.client import ApiClient
from cli.watch import summary_table

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


def test_summary_table_marks_inadequate_levels() -> None:
    thin = {
        "mode": "concurrency",
        "level": 64,
        "status": "succeeded",
        "requests": {"total": 64, "failed": 0},
        "adequacy": {
            "ok": False,
            "reasons": [
                {"code": "few_requests", "detail": "64 successful measured requests"},
                {"code": "short", "detail": "the measured window lasted 1.1 s"},
            ],
        },
    }
    fine = {**thin, "level": 1, "adequacy": {"ok": True, "reasons": []}}
    old = {**thin, "level": 2, "adequacy": None}
    text = _render(summary_table({"runs": [fine, thin, old]}))
    # Each body row's cells, by its level; the evidence column is the last.
    rows = [
        [c.strip() for c in line.strip("│ ").split("│")]
        for line in text.splitlines()
        if line.startswith("│")
    ]
    evidence = {row[0]: row[-1] for row in rows}
    assert evidence == {
        "1 user": "ok",
        "64 users": "INADEQUATE: few_requests, short",
        "2 users": "-",
    }


def test_compare_marks_inadequate_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    def get(self: ApiClient, path: str, **params: Any) -> dict[str, Any]:
        row = {
            "deployment": {"model": "m", "engine": "vllm", "hardware": "H200", "gpu_count": 1},
            "mode": "concurrency",
            "level": 8,
            "runs": 1,
            "figures": {"ttft_p50_ms": 10.0},
            "slo_passed": True,
            "adequate": False,
            "inadequate": [{"code": "client_bound", "detail": "."}],
        }
        return {"items": [row], "total": 1, "figures": ["ttft_p50_ms"], "warnings": []}

    monkeypatch.setattr(ApiClient, "get", get)
    result = CliRunner().invoke(main, ["compare", "--url", "http://127.0.0.1:9", "--token", "t"])
    assert result.exit_code == 0, result.output
    assert "INADEQUATE: client_bound" in result.output
