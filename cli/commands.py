"""Client commands: submit (and watch) a job, list jobs, compare deployments, save a report,
cancel a job. They talk to a running API over HTTP only (cli.client), so they
work the same against `make run` on a laptop and a shared production server. `infercost
jobs` is also a group (list, show, submit, watch, cancel); a job is named by its id or a
unique prefix of it (cli.resolve)."""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
import webbrowser
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import yaml
from rich.text import Text

from cli import resolve
from cli.client import ApiClient, ApiError, api_options, command_flags, in_cli_words
from cli.exits import EXIT_CANCELLED, EXIT_INTERRUPTED
from cli.output import console as _console
from cli.output import emit_json, json_option, num, table, when
from cli.watch import (
    BarDisplay,
    Display,
    LineDisplay,
    capacity_text,
    cells,
    evidence_text,
    queue_text,
    replay_text,
    summary_table,
    watch_job,
)
from infercost.jobs.plan import FEATURES, read_load
from infercost.reports.data import level_label

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
    """The body with `endpoint` (a registered endpoint's name, its id or a unique prefix of
    it) replaced by `endpoint_id`."""
    if "endpoint" not in body:
        return body
    if "endpoint_id" in body:
        raise click.ClickException("give endpoint (a name) or endpoint_id, not both")
    body = dict(body)
    body["endpoint_id"] = resolve.endpoint(client, str(body.pop("endpoint")))["id"]
    return body


def _watch(client: ApiClient, job_id: str, *, as_json: bool, announce: bool = True) -> None:
    """Follow a job until it ends, then print its summary (or its JSON); exits 1 when it
    failed, 3 when it was cancelled and 130 when the user stops watching."""
    out = _console()
    display: Display = _Silent()
    if not as_json:
        display = BarDisplay(out) if out.is_terminal else LineDisplay(out)
    if announce and not as_json:
        out.print(f"submitted job {job_id}", markup=False)
    try:
        final = watch_job(client, job_id, display)
    except KeyboardInterrupt:
        click.echo(
            f"stopped watching; job {job_id} keeps running. "
            f"Cancel it with `infercost cancel {job_id}`.",
            err=as_json,
        )
        sys.exit(EXIT_INTERRUPTED)
    if as_json:
        emit_json(final)
    else:
        out.print(f"job {final['id']}: {final['status']}", markup=False)
        out.print(summary_table(final))
        replay = replay_text(final)
        if replay:
            out.print(replay, markup=False)
        capacity = capacity_text(final)
        if capacity:
            out.print(capacity, markup=False)
    if final["status"] == "failed":
        raise click.ClickException(f"job {final['id']} failed: {final.get('error') or 'unknown'}")
    if final["status"] == "cancelled":
        if not as_json:
            out.print(f"job {final['id']} was cancelled", markup=False)
        sys.exit(EXIT_CANCELLED)


class _Silent:
    """A display that shows nothing (--json prints only the final job)."""

    def update(self, job: Mapping[str, Any]) -> None:
        """Nothing to show while the job runs."""

    def close(self) -> None:
        """Nothing to close."""


def _submit(
    client: ApiClient,
    body: dict[str, Any],
    *,
    watch: bool,
    idempotency_key: str | None,
    force: bool,
    as_json: bool,
    strict: bool = False,
) -> None:
    """POST the job and print its id (or JSON), or watch it to the end; what the plan
    already decides about its evidence goes to stderr (`warning: ...`)."""
    body = resolve_endpoint(client, body)
    if force:
        body["force"] = True
    if strict:
        body["strict"] = True
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    job = client.post("/v1/jobs", body, headers=headers)
    if not as_json:
        flags = command_flags(click.get_current_context().command)
        for warning in job.get("warnings") or []:
            click.echo(f"warning: {in_cli_words(warning['detail'], flags)}", err=True)
    if watch:
        _watch(client, job["id"], as_json=as_json)
    elif as_json:
        emit_json(job)
    else:
        click.echo(job["id"])


_FORCE_HELP = "Submit even though the endpoint's last preflight check failed."
_STRICT_HELP = "Refuse a plan whose levels cannot be adequate (too few requests, too short)."


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--watch", is_flag=True, help="Follow the job until it ends, with progress bars.")
@click.option("--idempotency-key", help="Submitting again with the same key returns the same job.")
@click.option("--force", is_flag=True, help=_FORCE_HELP)
@click.option("--strict", is_flag=True, help=_STRICT_HELP)
@json_option
@api_options
def submit(  # click passes every option by name
    *,
    file: Path,
    watch: bool,
    idempotency_key: str | None,
    force: bool,
    strict: bool,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Submit the job in FILE (YAML or JSON: the POST /v1/jobs body) and print its id.

    `endpoint: NAME` may replace `endpoint_id`. With --watch, shows each level's progress
    with its running TTFT and output tokens/s (plain lines when stdout is not a terminal),
    then a summary table; exits 0 when the job succeeded, 1 when it failed, 3 when it was
    cancelled and 130 when you stop watching with Ctrl-C (the job goes on).
    """
    _submit(
        client,
        load_job_file(file),
        watch=watch,
        idempotency_key=idempotency_key,
        force=force,
        as_json=as_json,
        strict=strict,
    )


def _levels_text(stored: Mapping[str, Any]) -> str:
    load = read_load(stored)
    if load is None:
        return "?"
    if load.mode == "sweep":
        return f"sweep ({load.rate_levels} rates)"
    if load.mode == "trace":
        window = load.window
        span = (
            ""
            if window is None or window.duration_s is None
            else f", {window.start_s:g}-{window.start_s + window.duration_s:g} s"
        )
        return f"trace x{load.time_scale or 1:g}{span}"
    levels = load.levels or []
    unit = " req/s"
    if load.mode == "concurrency":
        unit = " user" if levels == [1.0] else " users"
    return ", ".join(f"{x:g}" for x in levels) + unit


def _endpoint_names(client: ApiClient) -> dict[str, str]:
    """Endpoint id -> name for the team (a deleted endpoint's jobs show its id)."""
    return {e["id"]: e["name"] for e in client.pages("/v1/endpoints")}


_STATUS = click.Choice(["queued", "running", "succeeded", "failed", "cancelled"])


def _list_jobs(client: ApiClient, status: str | None, limit: int, as_json: bool) -> None:
    page = client.get("/v1/jobs", status=status, limit=limit)
    if as_json:
        emit_json(page)
        return
    names = _endpoint_names(client) if page["items"] else {}
    rows = table(
        "id", "status", "endpoint", "levels", "progress", "created", "finished", right=("progress",)
    )
    for item in page["items"]:
        progress = item["progress"]
        share = progress["done"] / progress["total"] if progress["total"] else 0.0
        rows.add_row(
            *cells(
                item["id"],
                item["status"],
                names.get(item["endpoint_id"], item["endpoint_id"]),
                _levels_text(item["load"]),
                f"{progress['done']:,}/{progress['total']:,} ({share:.0%})",
                when(item["created_at"]),
                when(item["finished_at"]),
            )
        )
    out = _console()
    out.print(f"{len(page['items'])} of {page['total']} jobs", markup=False)
    if page["items"]:
        out.print(rows)


@click.group(invoke_without_command=True)
@click.option("--status", type=_STATUS, help="Only jobs in this state.")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@json_option
@api_options
@click.pass_context
def jobs(
    ctx: click.Context, status: str | None, limit: int, as_json: bool, client: ApiClient
) -> None:
    """List your team's jobs, newest first (the same as `jobs list`); `jobs show`, `submit`,
    `watch` and `cancel` take a job's id or a unique prefix of it."""
    if ctx.invoked_subcommand is None:
        _list_jobs(client, status, limit, as_json)


@jobs.command("list")
@click.option("--status", type=_STATUS, help="Only jobs in this state.")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@json_option
@api_options
def jobs_list(status: str | None, limit: int, as_json: bool, client: ApiClient) -> None:
    """List your team's jobs, newest first."""
    _list_jobs(client, status, limit, as_json)


@jobs.command("show")
@click.argument("job", type=resolve.JOB)
@json_option
@api_options
def jobs_show(job: str, as_json: bool, client: ApiClient) -> None:
    """A job's state and its levels' figures (run ids included)."""
    state = client.get(f"/v1/jobs/{resolve.job_id(client, job)}")
    if as_json:
        emit_json(state)
        return
    out = _console()
    out.print(
        f"job {state['id']}: {state['status']}, {_levels_text(state['load'])}, "
        f"{state['progress']['done']:,}/{state['progress']['total']:,} requests",
        markup=False,
    )
    if state.get("error"):
        out.print(f"error: {state['error']}", markup=False)
    waiting = queue_text(state)
    if waiting:
        out.print(waiting, markup=False)
        out.print(f"  ({state['queue']['basis']})", markup=False, style="dim")
    if state["runs"]:
        out.print(summary_table(state))
        runs = table("level", "run id", ids=("run id",))
        for run in state["runs"]:
            runs.add_row(*cells(level_label(float(run["level"]), str(run["mode"])), run["id"]))
        out.print(runs)
        replay = replay_text(state)
        if replay:
            out.print(replay, markup=False)
        for run in state["runs"]:
            if run.get("replaces_run_id"):
                out.print(
                    f"{level_label(float(run['level']), str(run['mode']))}: measured again after "
                    f"its worker died (interrupted run {run['replaces_run_id']}, not used)",
                    markup=False,
                )
        capacity = capacity_text(state)
        if capacity:
            out.print(capacity, markup=False)


_MODES = click.Choice(["concurrency", "rate", "burst"])


@jobs.command("submit")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--endpoint", help="Endpoint name, id or id prefix (instead of FILE).")
@click.option("--mode", type=_MODES, default="concurrency", show_default=True)
@click.option("--levels", default="1", show_default=True, help="Comma-separated load levels.")
@click.option("--input-tokens", type=click.IntRange(1), help="Mean prompt tokens.")
@click.option("--output-tokens", type=click.IntRange(1), help="Mean output tokens.")
@click.option("--preset", help="A workload preset (GET /v1/presets) instead of token counts.")
@click.option("--requests", "requests_per_level", type=click.IntRange(1), help="Per level.")
@click.option("--duration-s", type=click.FloatRange(min=0, min_open=True), help="Per level.")
@click.option("--warmup", type=click.IntRange(0), help="Warm-up requests per level.")
@click.option(
    "--max-concurrency",
    type=click.IntRange(1),
    help="Rate or burst: the most requests in flight; later ones wait (as queue delay).",
)
@click.option(
    "--trace",
    help="Replay this traffic log (name or id; `infercost traffic list`) instead of levels.",
)
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0, min_open=True),
    help="Trace: how much faster than recorded (10: ten trace seconds a second).",
)
@click.option("--window-start", type=click.FloatRange(min=0), help="Trace: seconds into the trace.")
@click.option(
    "--window-duration",
    type=click.FloatRange(min=0, min_open=True),
    help="Trace: how many of its seconds to send (default: to its end).",
)
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=1),
    help="Trace: seconds of trace per interval of its SLO series (default 60).",
)
@click.option("--slo-ttft-p95", type=float, help="SLO: TTFT p95 in ms.")
@click.option("--slo-tpot-p95", type=float, help="SLO: TPOT p95 in ms.")
@click.option(
    "--feature",
    "features",
    type=click.Choice(FEATURES),
    multiple=True,
    help="What requests carry beyond a prompt (workload.features); repeat to combine.",
)
@click.option(
    "--models",
    help="Spread requests over models on the endpoint by weight (workload.models): "
    "name=weight, comma-separated, e.g. base=3,lora-a=1.",
)
@click.option(
    "--images",
    help="With --feature image: images per request and their size, COUNTxWIDTHxHEIGHT "
    "(e.g. 2x640x480) [default: 1x512x512].",
)
@click.option(
    "--ignore-eos/--no-ignore-eos",
    default=None,
    help="Ask the engine for exactly the output tokens drawn (workload.ignore_eos, the "
    "default), or let answers end where the model ends them (needed for structured output "
    "on llama.cpp).",
)
@click.option("--watch", is_flag=True, help="Follow the job until it ends.")
@click.option("--idempotency-key", help="Submitting again with the same key returns the same job.")
@click.option("--force", is_flag=True, help=_FORCE_HELP)
@click.option("--strict", is_flag=True, help=_STRICT_HELP)
@json_option
@api_options
def jobs_submit(  # click passes every option by name
    *,
    file: Path | None,
    endpoint: str | None,
    mode: str,
    levels: str,
    input_tokens: int | None,
    output_tokens: int | None,
    preset: str | None,
    requests_per_level: int | None,
    duration_s: float | None,
    warmup: int | None,
    max_concurrency: int | None,
    trace: str | None,
    time_scale: float | None,
    window_start: float | None,
    window_duration: float | None,
    interval_s: float | None,
    slo_ttft_p95: float | None,
    slo_tpot_p95: float | None,
    features: tuple[str, ...],
    models: str | None,
    images: str | None,
    ignore_eos: bool | None,
    watch: bool,
    idempotency_key: str | None,
    force: bool,
    strict: bool,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Submit a job from FILE (YAML or JSON), or from the options (--endpoint and a load).

    `infercost jobs submit --endpoint sim-fixed --levels 1,8 --input-tokens 512
    --output-tokens 128 --requests 50 --watch`

    `--trace NAME` replays a traffic log instead (each request at its own time, with its own
    lengths): `infercost jobs submit --endpoint sim-fixed --trace gateway --time-scale 10
    --window-start 600 --window-duration 300 --watch`.
    """
    trace_options = (time_scale, window_start, window_duration, interval_s)
    if trace is None and any(v is not None for v in trace_options):
        raise click.UsageError(
            "--time-scale, --window-start, --window-duration and --interval replay a trace: "
            "give --trace NAME too"
        )
    if file is not None:
        if endpoint is not None or trace is not None:
            raise click.UsageError("give FILE or --endpoint with options, not both")
        body = load_job_file(file)
    elif endpoint is None:
        raise click.UsageError("give a job FILE, or --endpoint NAME with the load options")
    elif trace is not None:
        drawn = [
            name
            for name, value in (
                ("--input-tokens", input_tokens),
                ("--output-tokens", output_tokens),
                ("--requests", requests_per_level),
                ("--duration-s", duration_s),
                ("--warmup", warmup),
            )
            if value is not None
        ]
        if drawn:
            raise click.UsageError(
                f"{', '.join(drawn)}: a trace gives each request's lengths and times; leave "
                "them out with --trace"
            )
        body = trace_body(
            endpoint,
            resolve.traffic(client, trace)["id"],
            time_scale=time_scale,
            window_start=window_start,
            window_duration=window_duration,
            interval_s=interval_s,
            max_concurrency=max_concurrency,
            preset=preset,
            slo_ttft_p95=slo_ttft_p95,
            slo_tpot_p95=slo_tpot_p95,
            features=list(features),
            models=None if models is None else parse_models(models),
            images=None if images is None else parse_images(images),
            ignore_eos=ignore_eos,
        )
    else:
        body = job_body(
            endpoint,
            mode=mode,
            levels=parse_levels(levels),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            preset=preset,
            requests_per_level=requests_per_level,
            duration_s=duration_s,
            warmup=warmup,
            max_concurrency=max_concurrency,
            slo_ttft_p95=slo_ttft_p95,
            slo_tpot_p95=slo_tpot_p95,
            features=list(features),
            models=None if models is None else parse_models(models),
            images=None if images is None else parse_images(images),
            ignore_eos=ignore_eos,
        )
    _submit(
        client,
        body,
        watch=watch,
        idempotency_key=idempotency_key,
        force=force,
        as_json=as_json,
        strict=strict,
    )


def parse_levels(text: str) -> list[float]:
    """'1,8,32' as numbers (whole ones as int, so the API reads users as users)."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"'{text}' is not a comma-separated list of numbers") from None
    if not values:
        raise click.BadParameter("give at least one level, e.g. 1,8")
    return [int(v) if v.is_integer() else v for v in values]


def parse_models(text: str) -> list[dict[str, Any]]:
    """'base=3,lora-a=1' as workload.models (a name without =weight weighs 1)."""
    models: list[dict[str, Any]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, eq, weight = item.partition("=")
        try:
            models.append({"name": name, "weight": float(weight) if eq else 1.0})
        except ValueError:
            raise click.BadParameter(f"'{item}' is not name=weight, e.g. lora-a=1") from None
    if not models:
        raise click.BadParameter("give at least one model, e.g. base=3,lora-a=1")
    return models


def parse_images(text: str) -> dict[str, int]:
    """'2x640x480' as workload.images."""
    try:
        count, width, height = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"'{text}' is not COUNTxWIDTHxHEIGHT, e.g. 1x512x512") from None
    return {"count": count, "width": width, "height": height}


def job_body(
    endpoint: str,
    *,
    mode: str,
    levels: list[float],
    input_tokens: int | None,
    output_tokens: int | None,
    preset: str | None = None,
    requests_per_level: int | None = None,
    duration_s: float | None = None,
    warmup: int | None = None,
    max_concurrency: int | None = None,
    slo_ttft_p95: float | None = None,
    slo_tpot_p95: float | None = None,
    features: list[str] | None = None,
    models: list[dict[str, Any]] | None = None,
    images: dict[str, int] | None = None,
    ignore_eos: bool | None = None,
) -> dict[str, Any]:
    """The POST /v1/jobs body the options describe (`endpoint` resolved later)."""
    workload = _request_kinds(preset, features, models, images, ignore_eos)
    if input_tokens is not None:
        workload["input_tokens"] = {"mean": input_tokens}
    if output_tokens is not None:
        workload["output_tokens"] = {"mean": output_tokens}
    load: dict[str, Any] = {"mode": mode, "levels": levels}
    if duration_s is not None:
        load["duration_s"] = duration_s
    if requests_per_level is not None:
        load["requests_per_level"] = requests_per_level
    if warmup is not None:
        load["warmup_requests"] = warmup
    if max_concurrency is not None:
        load["max_concurrency"] = max_concurrency
    body: dict[str, Any] = {"endpoint": endpoint, "workload": workload, "load": load}
    slo = _slo(slo_ttft_p95, slo_tpot_p95)
    if slo:
        body["slo"] = slo
    return body


def _request_kinds(
    preset: str | None,
    features: list[str] | None,
    models: list[dict[str, Any]] | None,
    images: dict[str, int] | None,
    ignore_eos: bool | None = None,
) -> dict[str, Any]:
    """The workload's preset, request features, models, images and ignore_eos, where given."""
    workload: dict[str, Any] = {
        key: value
        for key, value in (("features", features), ("models", models), ("images", images))
        if value
    }
    if preset:
        workload["preset"] = preset
    if ignore_eos is not None:
        workload["ignore_eos"] = ignore_eos
    return workload


def _slo(slo_ttft_p95: float | None, slo_tpot_p95: float | None) -> dict[str, Any]:
    slo: dict[str, Any] = {}
    if slo_ttft_p95 is not None:
        slo["ttft_ms"] = {"p95": slo_ttft_p95}
    if slo_tpot_p95 is not None:
        slo["tpot_ms"] = {"p95": slo_tpot_p95}
    return slo


def trace_body(
    endpoint: str,
    traffic_id: str,
    *,
    time_scale: float | None = None,
    window_start: float | None = None,
    window_duration: float | None = None,
    interval_s: float | None = None,
    max_concurrency: int | None = None,
    preset: str | None = None,
    slo_ttft_p95: float | None = None,
    slo_tpot_p95: float | None = None,
    features: list[str] | None = None,
    models: list[dict[str, Any]] | None = None,
    images: dict[str, int] | None = None,
    ignore_eos: bool | None = None,
) -> dict[str, Any]:
    """The POST /v1/jobs body of a trace replay (`endpoint` resolved later): the trace's
    requests, with the request features, models and images given."""
    load: dict[str, Any] = {"mode": "trace", "traffic_id": traffic_id}
    if time_scale is not None:
        load["time_scale"] = time_scale
    if window_start is not None or window_duration is not None:
        load["window"] = {"start_s": window_start or 0.0, "duration_s": window_duration}
    if interval_s is not None:
        load["interval_s"] = interval_s
    if max_concurrency is not None:
        load["max_concurrency"] = max_concurrency
    workload = _request_kinds(preset, features, models, images, ignore_eos)
    body: dict[str, Any] = {"endpoint": endpoint, "workload": workload, "load": load}
    slo = _slo(slo_ttft_p95, slo_tpot_p95)
    if slo:
        body["slo"] = slo
    return body


@jobs.command("watch")
@click.argument("job", type=resolve.JOB)
@json_option
@api_options
def jobs_watch(job: str, as_json: bool, client: ApiClient) -> None:
    """Follow JOB until it ends (progress, then the summary); a finished job prints its
    summary at once. Exit codes as `submit --watch`."""
    _watch(client, resolve.job_id(client, job), as_json=as_json, announce=False)


@click.command()
@click.option("--model", multiple=True, help="Served model name; repeat for any of several.")
@click.option("--hardware", multiple=True, help="GPU SKU, e.g. H200-SXM; repeatable.")
@click.option("--engine", multiple=True, help="Engine, e.g. vllm; repeatable.")
@click.option("--endpoint-id", multiple=True, type=click.UUID, help="Repeatable.")
@click.option("--tag", multiple=True, help="Endpoint tag key:value (or key); all must match.")
@click.option("--workload-fingerprint", multiple=True, help="Repeatable.")
@click.option("--preset", multiple=True, help="Runs of jobs that named this workload preset.")
@click.option("--mode", type=_MODES, multiple=True)
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
@click.option(
    "--by-model",
    is_flag=True,
    help="A row per model or adapter the requests asked for (workload.models), with its "
    "own figures; --model then matches those too.",
)
@click.option("--figures", help="Comma-separated figure names (table default: a short set).")
@click.option("--sort", help="Comma-separated keys, '-' for descending.")
@click.option("--limit", type=click.IntRange(1, 500), help="Rows (default 50; CSV: all).")
@click.option("--csv", "as_csv", is_flag=True, help="Print the CSV instead of a table.")
@json_option
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
    by_model: bool,
    figures: str | None,
    sort: str | None,
    limit: int | None,
    as_csv: bool,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Figures side by side across deployments (GET /v1/comparisons); --json prints every
    figure of each row."""
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
        "split": "model" if by_model else None,
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
    if as_json:
        params["figures"] = figures
        emit_json(client.get("/v1/comparisons", **params))
        return
    params["figures"] = figures or ",".join(TABLE_FIGURES)
    page = client.get("/v1/comparisons", **params)
    items = page["items"]
    rows = table("model", "engine", "hardware", "GPUs", "level", "runs", right=("GPUs", "runs"))
    for name in page["figures"]:
        rows.add_column(Text(FIGURE_HEADERS.get(name, name)), justify="right", overflow="fold")
    rows.add_column("SLO")
    rows.add_column("evidence")
    for row in items:
        d = row["deployment"]
        slo = row["slo_passed"]
        adequate = row.get("adequate")
        served = row.get("served_model")
        rows.add_row(
            *cells(
                d["model"] if served in (None, d["model"]) else f"{served} (on {d['model']})",
                d["engine"] or "-",
                d["hardware"] or "-",
                str(d["gpu_count"]),
                level_label(float(row["level"]), row["mode"]),
                str(row["runs"]),
                *(num(row["figures"].get(n), digits=2) for n in page["figures"]),
                "-" if slo is None else ("pass" if slo else "fail"),
                evidence_text(
                    None
                    if adequate is None
                    else {"ok": adequate, "reasons": row.get("inadequate") or []}
                ),
            )
        )
    out = _console()
    out.print(f"{len(items)} of {page['total']} rows", markup=False)
    if items:
        out.print(rows)
    for warning in page.get("warnings") or []:
        click.echo(f"warning: {warning}", err=True)


@click.command()
@click.argument("job", type=resolve.JOB)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to save it (default: report-JOB.html).",
)
@click.option("--open", "open_it", is_flag=True, help="Open it in a web browser once saved.")
@json_option
@api_options
def report(job: str, output: Path | None, open_it: bool, as_json: bool, client: ApiClient) -> None:
    """Save JOB's self-contained HTML report (charts included) and print where; with --open,
    show it in a browser (saved under the system's temporary folder unless -o says where)."""
    job = resolve.job_id(client, job)
    response = client.request("GET", f"/v1/jobs/{job}/report", headers={"Accept": "text/html"})
    if output is None:
        output = (
            Path(tempfile.gettempdir()) / f"infercost-report-{job}.html"
            if open_it
            else Path(f"report-{job}.html")
        )
    try:
        output.write_bytes(response.content)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror}") from None
    opened = webbrowser.open(output.resolve().as_uri()) if open_it else False
    if as_json:
        emit_json({"job_id": job, "path": str(output), "bytes": len(response.content)})
    else:
        click.echo(f"saved {output} ({len(response.content):,} bytes)")
        if open_it and not opened:
            click.echo(f"no browser to open it with: open {output.resolve().as_uri()}")


def _cancel(client: ApiClient, job: str, as_json: bool) -> None:
    job = resolve.job_id(client, job)
    try:
        state = client.post(f"/v1/jobs/{job}/cancel")
    except ApiError as exc:
        if exc.status == 409:
            raise click.ClickException(f"job {job} has already ended; nothing to cancel") from None
        raise
    if as_json:
        emit_json(state)
        return
    done = sum(1 for r in state.get("runs") or [] if r["status"] == "succeeded")
    click.echo(f"job {job}: {state['status']}; measured levels kept: {done}")


@click.command()
@click.argument("job", type=resolve.JOB)
@json_option
@api_options
def cancel(job: str, as_json: bool, client: ApiClient) -> None:
    """Cancel a queued or running JOB; levels already measured are kept."""
    _cancel(client, job, as_json)


@jobs.command("cancel")
@click.argument("job", type=resolve.JOB)
@json_option
@api_options
def jobs_cancel(job: str, as_json: bool, client: ApiClient) -> None:
    """Cancel a queued or running JOB; levels already measured are kept."""
    _cancel(client, job, as_json)


@jobs.command("delete")
@click.argument("job", type=resolve.JOB)
@json_option
@api_options
def jobs_delete(job: str, as_json: bool, client: ApiClient) -> None:
    """Delete an ended JOB with its runs and raw samples (it leaves every read: comparisons,
    history, the status board, exports). A queued or running job is refused: cancel it first."""
    job = resolve.job_id(client, job)
    try:
        client.delete(f"/v1/jobs/{job}")
    except ApiError as exc:
        if exc.status == 409:
            raise click.ClickException(
                f"job {job} is still queued or running: cancel it first with "
                f"`infercost jobs cancel {job}`, then delete it"
            ) from None
        raise
    if as_json:
        emit_json({"id": job, "deleted": True})
    else:
        click.echo(f"deleted job {job} with its runs and samples")
