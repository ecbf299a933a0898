"""Client commands: submit (and watch) a job, list jobs, compare deployments, save a report,
cancel a job. They talk to a running API over HTTP only (infercost.cli.client), so they
work the same against `make run` on a laptop and a shared production server."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from infercost.cli.client import ApiClient, ApiError, api_options
from infercost.cli.watch import (
    BarDisplay,
    Display,
    LineDisplay,
    cells,
    fmt,
    summary_table,
    watch_job,
)
from infercost.reports.data import level_label

#: Exit codes of `submit --watch` beyond 0 (succeeded) and 1 (failed, or any error).
EXIT_CANCELLED = 3
EXIT_INTERRUPTED = 130
#: Endpoints read per page when resolving a name (the API's largest page).
ENDPOINT_PAGE = 500
#: Figures `compare` shows when --figures is not given (the CSV has them all).
TABLE_FIGURES = (
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_p50_ms",
    "output_tokens_per_s",
    "requests_per_s",
    "cost_per_million_output_tokens_usd",
)
#: Short column headers for common figures; any other figure is headed by its name.
FIGURE_HEADERS = {
    "ttft_p50_ms": "TTFT p50 ms",
    "ttft_p95_ms": "TTFT p95 ms",
    "tpot_p50_ms": "TPOT p50 ms",
    "tpot_p95_ms": "TPOT p95 ms",
    "itl_p50_ms": "ITL p50 ms",
    "e2e_p50_ms": "E2E p50 ms",
    "output_tokens_per_s": "output tok/s",
    "output_tokens_per_s_per_gpu": "output tok/s/GPU",
    "requests_per_s": "req/s",
    "cost_per_million_output_tokens_usd": "$/M output tok",
}


def _console() -> Console:
    """Standard output as rich sees it; off a terminal, wide enough that tables never wrap."""
    tty = sys.stdout.isatty()
    return Console(width=None if tty else 200, highlight=False)


def load_job_file(path: Path) -> dict[str, Any]:
    """The POST /v1/jobs body from a YAML or JSON file (JSON by its .json suffix)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror}") from None
    try:
        body = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise click.ClickException(
            f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise click.ClickException(f"{path}: not valid YAML: {problem}{where}") from None
    if body is None:
        raise click.ClickException(f"{path} is empty: it should hold the POST /v1/jobs body")
    if not isinstance(body, dict):
        raise click.ClickException(
            f"{path}: expected a mapping with endpoint (or endpoint_id), workload and load, "
            f"got {type(body).__name__}"
        )
    return body


def resolve_endpoint(client: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """The body with `endpoint` (a registered endpoint's name, or its id) replaced by
    `endpoint_id`, looked up with GET /v1/endpoints."""
    if "endpoint" not in body:
        return body
    if "endpoint_id" in body:
        raise click.ClickException("give endpoint (a name) or endpoint_id, not both")
    body = dict(body)
    wanted = str(body.pop("endpoint"))
    try:
        body["endpoint_id"] = str(uuid.UUID(wanted))
    except ValueError:
        pass
    else:
        return body
    names: list[str] = []
    offset = 0
    while True:
        page = client.get("/v1/endpoints", limit=ENDPOINT_PAGE, offset=offset)
        for endpoint in page["items"]:
            if endpoint["name"] == wanted:
                body["endpoint_id"] = endpoint["id"]
                return body
            names.append(endpoint["name"])
        offset += len(page["items"])
        if not page["items"] or offset >= page["total"]:
            break
    known = ", ".join(sorted(names)) if names else "none: register one with POST /v1/endpoints"
    raise click.ClickException(f"no endpoint named '{wanted}' in your team (yours: {known})")


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--watch", is_flag=True, help="Follow the job until it ends, with progress bars.")
@click.option("--idempotency-key", help="Submitting again with the same key returns the same job.")
@api_options
def submit(file: Path, watch: bool, idempotency_key: str | None, client: ApiClient) -> None:
    """Submit the job in FILE (YAML or JSON: the POST /v1/jobs body) and print its id.

    `endpoint: NAME` may replace `endpoint_id`. With --watch, shows each level's progress
    with its running TTFT and output tokens/s (plain lines when stdout is not a terminal),
    then a summary table; exits 0 when the job succeeded, 1 when it failed, 3 when it was
    cancelled and 130 when you stop watching with Ctrl-C (the job goes on).
    """
    body = resolve_endpoint(client, load_job_file(file))
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    job = client.post("/v1/jobs", body, headers=headers)
    if not watch:
        click.echo(job["id"])
        return
    console = _console()
    display: Display = BarDisplay(console) if console.is_terminal else LineDisplay(console)
    console.print(f"submitted job {job['id']}", markup=False)
    try:
        final = watch_job(client, job["id"], display)
    except KeyboardInterrupt:
        console.print(
            f"stopped watching; job {job['id']} keeps running. "
            f"Cancel it with `infercost cancel {job['id']}`.",
            markup=False,
        )
        sys.exit(EXIT_INTERRUPTED)
    console.print(f"job {final['id']}: {final['status']}", markup=False)
    console.print(summary_table(final))
    if final["status"] == "failed":
        raise click.ClickException(f"job {final['id']} failed: {final.get('error') or 'unknown'}")
    if final["status"] == "cancelled":
        console.print(f"job {final['id']} was cancelled", markup=False)
        sys.exit(EXIT_CANCELLED)


def _when(value: str | None) -> str:
    """An RFC 3339 time as 'YYYY-MM-DD HH:MM:SS' (UTC), or '-'."""
    if not value:
        return "-"
    return datetime.fromisoformat(value.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")


def _levels_text(load: Mapping[str, Any]) -> str:
    mode = load.get("mode")
    if mode == "sweep":
        return f"sweep ({load.get('rate_levels')} rates)"
    unit = " users" if mode == "concurrency" else " req/s"
    return ", ".join(f"{float(x):g}" for x in load.get("levels") or []) + unit


def _endpoint_names(client: ApiClient) -> dict[str, str]:
    """Endpoint id -> name for the team (a deleted endpoint's jobs show its id)."""
    names: dict[str, str] = {}
    offset = 0
    while True:
        page = client.get("/v1/endpoints", limit=ENDPOINT_PAGE, offset=offset)
        names.update({e["id"]: e["name"] for e in page["items"]})
        offset += len(page["items"])
        if not page["items"] or offset >= page["total"]:
            return names


@click.command()
@click.option(
    "--status",
    type=click.Choice(["queued", "running", "succeeded", "failed", "cancelled"]),
    help="Only jobs in this state.",
)
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@api_options
def jobs(status: str | None, limit: int, client: ApiClient) -> None:
    """List your team's jobs, newest first."""
    page = client.get("/v1/jobs", status=status, limit=limit)
    names = _endpoint_names(client) if page["items"] else {}
    table = Table()
    for name in ("id", "status", "endpoint", "levels", "progress", "created", "finished"):
        table.add_column(name, justify="right" if name == "progress" else "left")
    for item in page["items"]:
        progress = item["progress"]
        share = progress["done"] / progress["total"] if progress["total"] else 0.0
        table.add_row(
            *cells(
                item["id"],
                item["status"],
                names.get(item["endpoint_id"], item["endpoint_id"]),
                _levels_text(item["load"]),
                f"{progress['done']}/{progress['total']} ({share:.0%})",
                _when(item["created_at"]),
                _when(item["finished_at"]),
            )
        )
    console = _console()
    console.print(f"{len(page['items'])} of {page['total']} jobs", markup=False)
    if page["items"]:
        console.print(table)


@click.command()
@click.option("--model", multiple=True, help="Served model name; repeat for any of several.")
@click.option("--hardware", multiple=True, help="GPU SKU, e.g. H200-SXM; repeatable.")
@click.option("--engine", multiple=True, help="Engine, e.g. vllm; repeatable.")
@click.option("--endpoint-id", multiple=True, type=click.UUID, help="Repeatable.")
@click.option("--tag", multiple=True, help="Endpoint tag key:value (or key); all must match.")
@click.option("--workload-fingerprint", multiple=True, help="Repeatable.")
@click.option("--preset", multiple=True, help="Runs of jobs that named this workload preset.")
@click.option("--mode", type=click.Choice(["concurrency", "rate"]), multiple=True)
@click.option("--level", multiple=True, type=float, help="Only these load levels; repeatable.")
@click.option("--since", help="RFC 3339: runs finished at or after this time.")
@click.option("--until", help="RFC 3339: runs finished before this time.")
@click.option(
    "--slo-passed/--slo-failed", default=None, help="Only runs that passed (or failed) the SLO."
)
@click.option("--include-client-bound", is_flag=True, help="Keep runs flagged client_bound.")
@click.option(
    "--group-by",
    type=click.Choice(["deployment_level", "deployment"]),
    help="A row per deployment and level (default), or per deployment at its best level.",
)
@click.option("--aggregate", type=click.Choice(["median", "latest"]))
@click.option("--figures", help="Comma-separated figure names (table default: a short set).")
@click.option("--sort", help="Comma-separated keys, '-' for descending.")
@click.option("--limit", type=click.IntRange(1, 500), help="Rows (default 50; CSV: all).")
@click.option("--csv", "as_csv", is_flag=True, help="Print the CSV instead of a table.")
@api_options
def compare(  # click passes every option by name
    *,
    model: tuple[str, ...],
    hardware: tuple[str, ...],
    engine: tuple[str, ...],
    endpoint_id: tuple[uuid.UUID, ...],
    tag: tuple[str, ...],
    workload_fingerprint: tuple[str, ...],
    preset: tuple[str, ...],
    mode: tuple[str, ...],
    level: tuple[float, ...],
    since: str | None,
    until: str | None,
    slo_passed: bool | None,
    include_client_bound: bool,
    group_by: str | None,
    aggregate: str | None,
    figures: str | None,
    sort: str | None,
    limit: int | None,
    as_csv: bool,
    client: ApiClient,
) -> None:
    """Figures side by side across deployments (GET /v1/comparisons)."""
    params: dict[str, Any] = {
        "model": list(model),
        "hardware": list(hardware),
        "engine": list(engine),
        "endpoint_id": [str(e) for e in endpoint_id],
        "tag": list(tag),
        "workload_fingerprint": list(workload_fingerprint),
        "preset": list(preset),
        "mode": list(mode),
        "level": list(level),
        "since": since,
        "until": until,
        "slo_passed": None if slo_passed is None else str(slo_passed).lower(),
        "include_client_bound": "true" if include_client_bound else None,
        "group_by": group_by,
        "aggregate": aggregate,
        "sort": sort,
        "limit": limit,
    }
    if as_csv:
        params["figures"] = figures
        response = client.request(
            "GET",
            "/v1/comparisons",
            params=params,
            headers={"Accept": "text/csv"},
        )
        sys.stdout.write(response.text)
        return
    params["figures"] = figures or ",".join(TABLE_FIGURES)
    page = client.get("/v1/comparisons", **params)
    items = page["items"]
    table = Table()
    for name in ("model", "engine", "hardware", "GPUs", "level", "runs"):
        table.add_column(name, justify="right" if name in ("GPUs", "runs") else "left")
    for name in page["figures"]:
        table.add_column(Text(FIGURE_HEADERS.get(name, name)), justify="right")
    table.add_column("SLO")
    for row in items:
        d = row["deployment"]
        slo = row["slo_passed"]
        table.add_row(
            *cells(
                d["model"],
                d["engine"] or "-",
                d["hardware"] or "-",
                str(d["gpu_count"]),
                level_label(float(row["level"]), row["mode"]),
                str(row["runs"]),
                *(fmt(row["figures"].get(n), digits=2) for n in page["figures"]),
                "-" if slo is None else ("pass" if slo else "fail"),
            )
        )
    console = _console()
    console.print(f"{len(items)} of {page['total']} rows", markup=False)
    if items:
        console.print(table)
    for warning in page.get("warnings") or []:
        click.echo(f"warning: {warning}", err=True)


@click.command()
@click.argument("job", type=click.UUID)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to save it (default: report-JOB.html).",
)
@api_options
def report(job: uuid.UUID, output: Path | None, client: ApiClient) -> None:
    """Save JOB's self-contained HTML report (charts included) and print where."""
    response = client.request("GET", f"/v1/jobs/{job}/report", headers={"Accept": "text/html"})
    target = output or Path(f"report-{job}.html")
    try:
        target.write_bytes(response.content)
    except OSError as exc:
        raise click.ClickException(f"cannot write {target}: {exc.strerror}") from None
    click.echo(f"saved {target} ({len(response.content):,} bytes)")


@click.command()
@click.argument("job", type=click.UUID)
@api_options
def cancel(job: uuid.UUID, client: ApiClient) -> None:
    """Cancel a queued or running JOB; levels already measured are kept."""
    try:
        state = client.post(f"/v1/jobs/{job}/cancel")
    except ApiError as exc:
        if exc.status == 409:
            raise click.ClickException(f"job {job} has already ended; nothing to cancel") from None
        raise
    done = sum(1 for r in state.get("runs") or [] if r["status"] == "succeeded")
    click.echo(f"job {job}: {state['status']}; measured levels kept: {done}")
