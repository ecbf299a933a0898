"""`infercost imports add FILE --format vllm|guidellm|aiperf`: take another tool's result file
in as labelled runs (POST /v1/imports) and print them. HTTP API only."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from cli.client import ApiClient, api_options
from cli.output import console, emit_json, json_option, num, table
from cli.watch import cells

_FORMATS = click.Choice(["vllm", "guidellm", "aiperf"])
#: A result file is small, but a detailed one can hold every request: allow minutes.
IMPORT_TIMEOUT_S = 600.0


def print_imported(job: Mapping[str, Any]) -> None:
    """The imported job's runs: level, requests, TTFT, TPOT, throughput, whose definitions."""
    out = console()
    out.print(
        f"imported job {job['id']} under external endpoint {job['endpoint_id']}", markup=False
    )
    rows = table(
        "mode",
        "level",
        "requests",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "TPOT mean ms",
        "output tok/s",
        "definitions",
        ids=(),
        right=("level", "requests", "TTFT p50 ms", "TTFT p99 ms", "TPOT mean ms", "output tok/s"),
    )
    for run in job["runs"]:
        source = run.get("source") or {}
        rows.add_row(
            *cells(
                run["mode"],
                num(run["level"], 0),
                f"{run['requests']['succeeded']:,}/{run['requests']['total']:,}",
                num(run["ttft_ms"].get("p50"), 1),
                num(run["ttft_ms"].get("p99"), 1),
                num(run["tpot_ms"].get("mean"), 2),
                num(run.get("output_tokens_per_s"), 1),
                source.get("definitions", "infercost"),
            )
        )
    out.print(rows)


@click.group()
def imports() -> None:
    """Results of other tools (vLLM's bench, GuideLLM, AIPerf) stored beside yours, labelled
    with the tool whose definitions their figures follow."""


@imports.command("add")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--format", "fmt", type=_FORMATS, required=True, help="Which tool wrote FILE.")
@click.option("--name", help="The external endpoint to file it under (default: tool: model).")
@click.option("--model", help="The model measured, where the file does not say.")
@click.option("--engine", help="The serving engine (vllm, sglang, ...).")
@click.option("--hardware", help="The GPU, a name from `infercost` GET /v1/hardware.")
@click.option("--gpu-count", type=click.IntRange(1, 4096), default=1, show_default=True)
@click.option("--usd-per-hour", type=click.FloatRange(0), help="To price the runs.")
@json_option
@api_options
def imports_add(
    *,
    file: Path,
    fmt: str,
    name: str | None,
    model: str | None,
    engine: str | None,
    hardware: str | None,
    gpu_count: int,
    usd_per_hour: float | None,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Import FILE and print its runs."""
    params = {
        "format": fmt,
        "name": name,
        "model": model,
        "engine": engine,
        "hardware": hardware,
        "gpu_count": gpu_count,
        "usd_per_hour": usd_per_hour,
    }
    try:
        body = file.read_bytes()
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {exc.strerror}") from None
    answer = client.request(
        "POST",
        "/v1/imports",
        params={k: v for k, v in params.items() if v is not None},
        content=body,
        headers={"Content-Type": "application/octet-stream"},
        timeout=IMPORT_TIMEOUT_S,
    ).json()
    if as_json:
        emit_json(answer)
    else:
        print_imported(answer)
