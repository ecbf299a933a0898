"""Client commands for what a job needs and what it leaves: endpoints (with their preflight
check), prices, datasets, runs and estimates. HTTP API only, like every client command;
`--json` prints what the API answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli import resolve
from cli.client import ApiClient, api_options
from cli.exits import EXIT_FAILED, EXIT_NO_ESTIMATE
from cli.output import console, emit_json, json_option, num, table, when
from cli.traffic import print_fleets
from cli.watch import cells
from infercost.reports.data import level_label

_MARKS = {"pass": "ok", "warn": "warn", "fail": "FAIL", "skip": "-"}


# -- endpoints ---------------------------------------------------------------------------


def print_check(check: dict[str, Any] | None) -> None:
    """The check's verdict and one line per probe."""
    out = console()
    if check is None:
        out.print("check: not run yet (`infercost endpoints check NAME`)", markup=False)
        return
    verdict = "passed" if check["ok"] else "FAILED"
    stamp = f" at {when(check.get('checked_at'))}" if check.get("checked_at") else ""
    out.print(
        f"check {verdict}{stamp} in {num(check['duration_ms'], 0)} ms: {check['summary']}",
        markup=False,
    )
    rows = table("probe", "result", "detail")
    for probe in check["probes"]:
        rows.add_row(
            *cells(probe["name"], _MARKS.get(probe["status"], probe["status"]), probe["detail"])
        )
    out.print(rows)


def print_endpoint(endpoint: dict[str, Any]) -> None:
    """An endpoint's fields, then its last check."""
    out = console()
    price = (
        f"{num(endpoint['usd_per_hour'], 2)} USD/h"
        if endpoint.get("usd_per_hour") is not None
        else (f"price book ({endpoint['provider']})" if endpoint.get("provider") else "-")
    )
    rows = table("field", "value", ids=())
    for key, value in (
        ("id", endpoint["id"]),
        ("name", endpoint["name"]),
        ("base_url", endpoint["base_url"]),
        ("api", endpoint["api"]),
        ("model", endpoint["model"]),
        ("engine", endpoint.get("engine") or "-"),
        ("hardware", f"{endpoint.get('hardware') or '-'} x {endpoint['gpu_count']}"),
        ("price", price),
        ("metrics_urls", ", ".join(endpoint.get("metrics_urls") or []) or "-"),
        ("api key", "set" if endpoint.get("has_api_key") else "none"),
    ):
        rows.add_row(*cells(key, value))
    out.print(rows)
    print_check(endpoint.get("check"))


def _tags(values: tuple[str, ...]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in values:
        key, _, value = item.partition("=")
        if not key:
            raise click.BadParameter(f"'{item}' is not key=value", param_hint="--tag")
        tags[key] = value
    return tags


@click.group()
def endpoints() -> None:
    """Register, list, show, check and remove endpoints (by name, id or id prefix)."""


@endpoints.command("add")
@click.argument("name")
@click.argument("base_url")
@click.option("--model", required=True, help="Served model name, as /v1/models lists it.")
@click.option(
    "--api", type=click.Choice(["openai-chat", "openai-completions", "openai-embeddings"])
)
@click.option("--engine", help="vllm, sglang, tgi, llamacpp, transformers, ...")
@click.option(
    "--hardware",
    help="From `infercost hardware list`, e.g. H200-SXM; a CPU machine of your own too.",
)
@click.option(
    "--gpu-count", type=click.IntRange(1), help="GPUs per replica (CPU hardware: machines)."
)
@click.option("--usd-per-hour", type=click.FloatRange(0), help="What a replica costs per hour.")
@click.option("--provider", help="Price from the price book for this provider instead.")
@click.option("--api-key", envvar="INFERCOST_ENDPOINT_API_KEY", help="Sent as a bearer token.")
@click.option("--metrics-url", multiple=True, help="Prometheus URL to scrape; repeatable.")
@click.option("--tag", multiple=True, help="key=value; repeatable.")
@json_option
@api_options
def endpoints_add(  # click passes every option by name
    *,
    name: str,
    base_url: str,
    model: str,
    api: str | None,
    engine: str | None,
    hardware: str | None,
    gpu_count: int | None,
    usd_per_hour: float | None,
    provider: str | None,
    api_key: str | None,
    metrics_url: tuple[str, ...],
    tag: tuple[str, ...],
    as_json: bool,
    client: ApiClient,
) -> None:
    """Register NAME at BASE_URL (ending where /chat/completions begins, often /v1) and
    print it with its preflight check; exits 1 when the check failed (the endpoint is kept,
    and jobs against it are refused until a check passes or they pass --force)."""
    body: dict[str, Any] = {"name": name, "base_url": base_url, "model": model}
    for key, value in (
        ("api", api),
        ("engine", engine),
        ("hardware", hardware),
        ("gpu_count", gpu_count),
        ("usd_per_hour", usd_per_hour),
        ("provider", provider),
        ("api_key", api_key),
    ):
        if value is not None:
            body[key] = value
    if metrics_url:
        body["metrics_urls"] = list(metrics_url)
    if tag:
        body["tags"] = _tags(tag)
    created = client.post("/v1/endpoints", body)
    if as_json:
        emit_json(created)
    else:
        print_endpoint(created)
    check = created.get("check")
    if check is not None and not check["ok"]:
        # Registered all the same; jobs against it would be refused until it is fixed.
        raise SystemExit(EXIT_FAILED)


@endpoints.command("list")
@json_option
@api_options
def endpoints_list(as_json: bool, client: ApiClient) -> None:
    """Your team's endpoints by name, with their last check."""
    items = client.pages("/v1/endpoints")
    if as_json:
        emit_json(items)
        return
    rows = table("id", "name", "model", "engine", "hardware", "base_url", "check", "checked")
    for e in items:
        check = e.get("check")
        verdict = "-" if check is None else ("ok" if check["ok"] else "FAILED")
        rows.add_row(
            *cells(
                e["id"],
                e["name"],
                e["model"],
                e.get("engine") or "-",
                f"{e.get('hardware') or '-'} x {e['gpu_count']}",
                e["base_url"],
                verdict,
                when(e.get("checked_at")),
            )
        )
    out = console()
    out.print(f"{len(items)} endpoints", markup=False)
    if items:
        out.print(rows)


@endpoints.command("show")
@click.argument("endpoint")
@json_option
@api_options
def endpoints_show(endpoint: str, as_json: bool, client: ApiClient) -> None:
    """One endpoint (name, id or id prefix) and its last check."""
    found = resolve.endpoint(client, endpoint)
    found = client.get(f"/v1/endpoints/{found['id']}")
    if as_json:
        emit_json(found)
    else:
        print_endpoint(found)


@endpoints.command("check")
@click.argument("endpoint")
@json_option
@api_options
def endpoints_check(endpoint: str, as_json: bool, client: ApiClient) -> None:
    """Probe ENDPOINT now (reachable, OpenAI route, model, streaming, usage, tokenizer,
    engine, metrics) and store the result; exits 1 when it failed (jobs would be refused)."""
    found = resolve.endpoint(client, endpoint)
    check = client.post(f"/v1/endpoints/{found['id']}/check")
    if as_json:
        emit_json(check)
    else:
        console().print(f"endpoint {found['name']} ({found['id']})", markup=False)
        print_check(check)
    if not check["ok"]:
        raise SystemExit(EXIT_FAILED)


@endpoints.command("remove")
@click.argument("endpoint")
@json_option
@api_options
def endpoints_remove(endpoint: str, as_json: bool, client: ApiClient) -> None:
    """Remove ENDPOINT from listings; its jobs and runs stay readable."""
    found = resolve.endpoint(client, endpoint)
    client.delete(f"/v1/endpoints/{found['id']}")
    if as_json:
        emit_json({"id": found["id"], "name": found["name"], "removed": True})
    else:
        click.echo(f"removed endpoint {found['name']} ({found['id']})")


# -- prices ------------------------------------------------------------------------------


@click.group()
def prices() -> None:
    """The price book: USD per GPU-hour by provider and hardware."""


@prices.command("add")
@click.option("--provider", required=True)
@click.option("--hardware", required=True, help="GPU SKU, e.g. H200-SXM.")
@click.option("--usd-per-gpu-hour", required=True, type=click.FloatRange(0))
@click.option(
    "--pricing-model",
    type=click.Choice(["on-demand", "spot", "reserved"]),
    help="Default: on-demand.",
)
@click.option("--effective-from", help="RFC 3339 (default: now).")
@json_option
@api_options
def prices_add(  # click passes every option by name
    *,
    provider: str,
    hardware: str,
    usd_per_gpu_hour: float,
    pricing_model: str | None,
    effective_from: str | None,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Add a price book entry."""
    body: dict[str, Any] = {
        "provider": provider,
        "hardware": hardware,
        "usd_per_gpu_hour": usd_per_gpu_hour,
    }
    if pricing_model:
        body["pricing_model"] = pricing_model
    if effective_from:
        body["effective_from"] = effective_from
    created = client.post("/v1/prices", body)
    if as_json:
        emit_json(created)
    else:
        _price_table([created])
    for warning in created.get("warnings") or []:
        click.echo(
            f"warning: {warning}".replace(
                f"(DELETE /v1/prices/{created['id']})",
                f"(`infercost prices withdraw {created['id']}`)",
            ),
            err=True,
        )


def _price_table(items: list[dict[str, Any]]) -> None:
    withdrawn = any(p.get("withdrawn_at") for p in items)
    columns = ["id", "provider", "hardware", "pricing model", "USD/GPU-h", "from"]
    rows = table(*columns, *(["withdrawn"] if withdrawn else []), right=("USD/GPU-h",))
    for p in items:
        values = [
            p["id"],
            p["provider"],
            p["hardware"],
            p["pricing_model"],
            num(p["usd_per_gpu_hour"], 2),
            when(p["effective_from"]),
        ]
        if withdrawn:
            values.append(when(p["withdrawn_at"]) if p.get("withdrawn_at") else "-")
        rows.add_row(*cells(*values))
    console().print(rows)


@prices.command("list")
@click.option("--provider")
@click.option("--hardware")
@click.option("--withdrawn", is_flag=True, help="Include withdrawn entries.")
@json_option
@api_options
def prices_list(
    provider: str | None, hardware: str | None, withdrawn: bool, as_json: bool, client: ApiClient
) -> None:
    """Price book entries."""
    items = client.pages(
        "/v1/prices", provider=provider, hardware=hardware, withdrawn=withdrawn or None
    )
    if as_json:
        emit_json(items)
        return
    console().print(f"{len(items)} prices", markup=False)
    if items:
        _price_table(items)


@prices.command("withdraw")
@click.argument("price")
@json_option
@api_options
def prices_withdraw(price: str, as_json: bool, client: ApiClient) -> None:
    """Withdraw PRICE (its id or a unique prefix): kept for the record, it prices nothing
    again; runs priced from it keep the price they stored."""
    price_id = resolve.price_id(client, price)
    withdrawn = client.delete_json(f"/v1/prices/{price_id}")
    if as_json:
        emit_json(withdrawn)
        return
    click.echo(
        f"withdrew price {price_id} ({withdrawn['provider']}, {withdrawn['hardware']}, "
        f"{withdrawn['pricing_model']}, USD {num(withdrawn['usd_per_gpu_hour'], 2)}/GPU-h)"
    )


# -- datasets ----------------------------------------------------------------------------

_CONTENT_TYPES = {".jsonl": "application/x-ndjson", ".json": "application/json"}


@click.group()
def datasets() -> None:
    """Prompt datasets (JSONL or ShareGPT) for jobs' workload.dataset_id."""


@datasets.command("upload")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--name", help="A name to show (default: from the hash).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "sharegpt"]),
    help="Default: jsonl for .jsonl, sharegpt for .json.",
)
@json_option
@api_options
def datasets_upload(
    file: Path, name: str | None, fmt: str | None, as_json: bool, client: ApiClient
) -> None:
    """Upload FILE and print the dataset's id (the same bytes again give the same one)."""
    content_type = _CONTENT_TYPES.get(file.suffix.lower(), "application/x-ndjson")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {exc.strerror}") from None
    answer = client.request(
        "POST",
        "/v1/datasets",
        params={"name": name, "format": fmt},
        content=data,
        headers={"Content-Type": content_type},
    ).json()
    if as_json:
        emit_json(answer)
    else:
        _dataset_table([answer])


def _dataset_table(items: list[dict[str, Any]]) -> None:
    rows = table("id", "name", "format", "items", "bytes", "created", right=("items", "bytes"))
    for d in items:
        rows.add_row(
            *cells(
                d["id"],
                d["name"],
                d["format"],
                f"{d['items']:,}",
                f"{d['size_bytes']:,}",
                when(d["created_at"]),
            )
        )
    console().print(rows)


@datasets.command("list")
@json_option
@api_options
def datasets_list(as_json: bool, client: ApiClient) -> None:
    """Your team's datasets, newest first."""
    items = client.pages("/v1/datasets")
    if as_json:
        emit_json(items)
        return
    console().print(f"{len(items)} datasets", markup=False)
    if items:
        _dataset_table(items)


# -- runs --------------------------------------------------------------------------------


@click.group()
def runs() -> None:
    """One level's results: its summary and its raw per-request samples."""


def _dist_row(name: str, dist: dict[str, Any] | None, digits: int = 1) -> list[str]:
    d = dist or {}
    return [name, *(num(d.get(k), digits) for k in ("mean", "p50", "p90", "p95", "p99", "max"))]


@runs.command("show")
@click.argument("run", type=resolve.RUN)
@json_option
@api_options
def runs_show(run: str, as_json: bool, client: ApiClient) -> None:
    """A run's summary: latency percentiles, throughput, errors and cost."""
    summary = client.get(f"/v1/runs/{resolve.run_id(client, run)}")
    if as_json:
        emit_json(summary)
        return
    out = console()
    requests = summary.get("requests") or {}
    out.print(
        f"run {summary['id']} of job {summary['job_id']}: "
        f"{level_label(float(summary['level']), str(summary['mode']))}, {summary['status']}, "
        f"{requests.get('total', 0):,} requests ({requests.get('failed', 0):,} failed)",
        markup=False,
    )
    dists = table("ms", "mean", "p50", "p90", "p95", "p99", "max", ids=())
    for name, key, digits in (
        ("TTFT", "ttft_ms", 1),
        ("TPOT", "tpot_ms", 2),
        ("ITL", "itl_ms", 2),
        ("E2E", "e2e_ms", 1),
    ):
        dists.add_row(*cells(*_dist_row(name, summary.get(key), digits)))
    out.print(dists)
    cost = summary.get("cost") or {}
    figures = table("figure", "value", ids=())
    for name, value in (
        ("output tokens/s", num(summary.get("output_tokens_per_s"))),
        ("requests/s", num(summary.get("requests_per_s"), 2)),
        ("error rate", num(_pct(summary.get("error_rate")), 1, " %")),
        ("USD per hour", num(cost.get("usd_per_hour"), 2)),
        ("USD per million output tokens", num(cost.get("per_million_output_tokens_usd"), 2)),
        ("SLO", {None: "-", True: "pass", False: "fail"}[summary.get("slo_passed")]),
        *_feature_rows(summary),
    ):
        figures.add_row(*cells(name, value))
    out.print(figures)
    models = summary.get("models")
    if models:
        per_model = table("model", "requests", "failed", "TTFT p50 ms", "tokens/s", "USD/h", ids=())
        for m in models:
            per_model.add_row(
                *cells(
                    m["model"],
                    str(m["requests"]["total"]),
                    str(m["requests"]["failed"]),
                    num((m.get("ttft_ms") or {}).get("p50"), 1),
                    num(m.get("output_tokens_per_s")),
                    num((m.get("cost") or {}).get("usd_per_hour"), 2),
                )
            )
        out.print(per_model)


def _feature_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the request features a run measured (reasoning, tools, structured, images)."""
    rows: list[tuple[str, str]] = []
    reasoning = summary.get("reasoning")
    if reasoning:
        ttfr = (summary.get("ttfr_ms") or {}).get("p50")
        ttfo = (summary.get("ttfo_ms") or {}).get("p50")
        cost = summary.get("cost") or {}
        rows += [
            ("first reasoning / answer token p50 ms", f"{num(ttfr, 1)} / {num(ttfo, 1)}"),
            (
                "reasoning / answer tokens/s",
                f"{num(summary.get('reasoning_tokens_per_s'))} / "
                f"{num(summary.get('answer_tokens_per_s'))}",
            ),
            ("USD per million answer tokens", num(cost.get("per_million_answer_tokens_usd"), 2)),
        ]
    tools = summary.get("tools")
    if tools:
        rows.append(
            (
                "valid tool calls",
                f"{tools['valid_calls']} of {tools['calls']}{_why_invalid(tools['invalid'])}",
            )
        )
    structured = summary.get("structured")
    if structured:
        valid = f"{structured['valid']} of {structured['answers']}"
        rows.append(("valid JSON answers", valid + _why_invalid(structured["invalid"])))
        rows += _plain_rows(summary, structured)
    image = summary.get("image")
    if image:
        rows.append(("images sent", str(image["images"])))
    return rows


def _why_invalid(invalid: dict[str, int] | None) -> str:
    """Why answers were invalid, by reason, and what to do when they were cut short."""
    if not invalid:
        return ""
    said = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in invalid.items())
    if invalid.get("cut_short"):
        said += ": answers ended inside their JSON; raise --output-tokens"
    return f" ({said})"


#: A structured run's figures beside its plain twin's: label, the run's (key, statistic), the
#: twin's key, the ratio's key, decimals.
_PLAIN_FIGURES = (
    ("TTFT p50 ms", ("ttft_ms", "p50"), "ttft_p50_ms", "ttft_p50", 1),
    ("TPOT p50 ms", ("tpot_ms", "p50"), "tpot_p50_ms", "tpot_p50", 2),
    ("E2E p50 ms", ("e2e_ms", "p50"), "e2e_p50_ms", "e2e_p50", 1),
    (
        "output tokens/s",
        ("output_tokens_per_s", None),
        "output_tokens_per_s",
        "output_tokens_per_s",
        1,
    ),
)


def _plain_rows(summary: dict[str, Any], structured: dict[str, Any]) -> list[tuple[str, str]]:
    """A structured run against its plain twin (the same lengths without response_format):
    each figure structured / plain and their ratio, or what to run to measure the twin."""
    plain = structured.get("plain")
    if not plain:
        reason = structured.get("plain_reason")
        return [("without structured", reason)] if reason else []
    rows = [
        (
            "without structured: run",
            f"{plain['run_id']} (job {plain['job_id']}, finished {when(plain['finished_at'])})",
        )
    ]
    ratios = plain.get("ratios") or {}
    for label, (key, stat), twin_key, ratio_key, digits in _PLAIN_FIGURES:
        own = summary.get(key)
        mine = (own or {}).get(stat) if stat else own
        ratio = ratios.get(ratio_key)
        rows.append(
            (
                f"{label}, structured / plain",
                f"{num(mine, digits)} / {num(plain.get(twin_key), digits)} (x{num(ratio, 2)})",
            )
        )
    return rows


def _pct(share: float | None) -> float | None:
    return None if share is None else share * 100.0


@runs.command("samples")
@click.argument("run", type=resolve.RUN)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="CSV file to write (default: run-RUN.csv; '-' for standard output).",
)
@json_option
@api_options
def runs_samples(run: str, output: Path | None, as_json: bool, client: ApiClient) -> None:
    """Save a run's raw per-request samples as CSV (one row a request)."""
    run = resolve.run_id(client, run)
    response = client.request("GET", f"/v1/runs/{run}/requests", headers={"Accept": "text/csv"})
    text = response.text
    rows = max(0, len(text.splitlines()) - 1)
    if output is not None and str(output) == "-":
        click.echo(text, nl=False)
        return
    target = output or Path(f"run-{run}.csv")
    try:
        target.write_text(text)
    except OSError as exc:
        raise click.ClickException(f"cannot write {target}: {exc.strerror}") from None
    if as_json:
        emit_json({"run_id": run, "path": str(target), "rows": rows})
    else:
        click.echo(f"saved {target} ({rows:,} requests)")


# -- estimates ---------------------------------------------------------------------------


@click.command()
@click.option("--model", required=True, help="The served model to plan for.")
@click.option(
    "--served-model",
    help="One model or adapter of those jobs spread requests over (--models of `jobs "
    "submit`): plan its traffic alone, from its own figures in each run.",
)
@click.option("--rps", type=click.FloatRange(min=0, min_open=True), help="Peak requests/s.")
@click.option(
    "--per-day",
    type=click.FloatRange(min=0, min_open=True),
    help="Requests a day (instead of --rps; the peak is the daily mean x --peak-to-mean).",
)
@click.option(
    "--peak-to-mean",
    type=click.FloatRange(min=1),
    help="Peak rate over the mean (default with --per-day: 2, stated in the answer).",
)
@click.option(
    "--traffic",
    "traffic_log",
    help="A request log (name, id or id prefix, `infercost traffic list`) to plan for, "
    "instead of --rps: adds fixed and autoscaled fleets over it.",
)
@click.option(
    "--interval-s", type=click.IntRange(60), help="With --traffic: seconds an interval (300)."
)
@click.option(
    "--lag-s",
    type=click.FloatRange(min=0),
    help="With --traffic: how late the autoscaler follows demand, seconds (300).",
)
@click.option("--min-replicas", type=click.IntRange(0), help="With --traffic: fewest replicas (1).")
@click.option("--input-tokens", type=click.IntRange(1), help="Mean prompt tokens per request.")
@click.option("--output-tokens", type=click.IntRange(1), help="Mean output tokens per request.")
@click.option("--slo-ttft-p95", type=click.FloatRange(min=0, min_open=True), help="ms.")
@click.option("--slo-tpot-p95", type=click.FloatRange(min=0, min_open=True), help="ms.")
@click.option("--preset", help="Token lengths and SLO from a workload preset.")
@click.option("--hardware", multiple=True, help="Only these GPU SKUs; repeatable.")
@click.option(
    "--target-utilization",
    type=click.FloatRange(min=0, max=1, min_open=True),
    help="Most of each replica's capacity at the SLO to plan on (default 0.8).",
)
@click.option(
    "--allow-mismatched-workload",
    is_flag=True,
    help="Use evidence measured on other token lengths, labelled as an extrapolation.",
)
@click.option(
    "--chart",
    "chart_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --traffic: write an HTML page drawing the log's demand over time with each "
    "deployment's fixed and autoscaled fleets.",
)
@json_option
@api_options
def estimate(  # click passes every option by name
    *,
    model: str,
    rps: float | None,
    served_model: str | None = None,
    per_day: float | None = None,
    peak_to_mean: float | None = None,
    traffic_log: str | None = None,
    interval_s: int | None = None,
    lag_s: float | None = None,
    min_replicas: int | None = None,
    input_tokens: int | None,
    output_tokens: int | None,
    slo_ttft_p95: float | None,
    slo_tpot_p95: float | None,
    preset: str | None,
    hardware: tuple[str, ...],
    target_utilization: float | None = None,
    allow_mismatched_workload: bool = False,
    chart_path: Path | None = None,
    as_json: bool,
    client: ApiClient,
) -> None:
    """What serving MODEL at this traffic and SLO costs, cheapest deployment first, from
    what was measured (POST /v1/estimates). The traffic: --rps (a peak), --per-day with
    --peak-to-mean, or --traffic NAME (a request log: sized for its busiest minute, with
    fixed and autoscaled fleets over it). Exits 4 when there is no estimate (the reason is
    printed)."""
    body: dict[str, Any] = {"model": model}
    if traffic_log is not None:
        if rps is not None or per_day is not None or input_tokens or output_tokens:
            raise click.UsageError(
                "--traffic gives the rate and the lengths: leave out --rps, --per-day, "
                "--input-tokens and --output-tokens"
            )
        body["traffic_id"] = resolve.traffic(client, traffic_log)["id"]
        fleets = {"interval_s": interval_s, "lag_s": lag_s, "min_replicas": min_replicas}
        if any(v is not None for v in fleets.values()):
            body["fleets"] = {k: v for k, v in fleets.items() if v is not None}
    else:
        if any(v is not None for v in (interval_s, lag_s, min_replicas)):
            raise click.UsageError("--interval-s, --lag-s and --min-replicas need --traffic")
        body["traffic"] = _flat_traffic(rps, per_day, peak_to_mean, input_tokens, output_tokens)
    slo = {
        key: {"p95": value}
        for key, value in (("ttft_ms", slo_ttft_p95), ("tpot_ms", slo_tpot_p95))
        if value is not None
    }
    for key, value in (
        ("served_model", served_model),
        ("slo", slo or None),
        ("preset", preset or None),
        ("hardware", list(hardware) or None),
        ("target_utilization", target_utilization),
        ("allow_mismatched_workload", allow_mismatched_workload or None),
    ):
        if value is not None:
            body[key] = value
    if chart_path is not None and traffic_log is None:
        raise click.UsageError("--chart draws the fleets over a request log: give --traffic")
    answer = client.post("/v1/estimates", body)
    if as_json:
        emit_json(answer)
    else:
        _print_estimate(answer)
    if chart_path is not None:
        _save_chart(answer, chart_path, quiet=as_json)
    if not answer["candidates"]:
        raise SystemExit(EXIT_NO_ESTIMATE)


def _save_chart(answer: dict[str, Any], path: Path, *, quiet: bool) -> None:
    """The estimate's fleets page written to `path` (said on stdout unless `quiet`)."""
    page = fleets_page(answer)
    path.write_text(page, encoding="utf-8")
    if not quiet:
        click.echo(f"saved {path} ({len(page.encode()):,} bytes)")


def fleets_page(answer: dict[str, Any]) -> str:
    """A self-contained HTML page: the log's demand over time with the fixed and autoscaled
    fleets of each self-hosted candidate planned over it (the cheapest MAX_FLEET_CHARTS),
    drawn as the job report draws a trace replay's; a panel saying why when none has any."""
    from html import escape

    from infercost.reports.charts import FLEET_CHART, fleet_chart, inline, no_data
    from infercost.reports.data import FleetSeries

    title = f"{answer['model']}: fleets over request log {answer['traffic'].get('name') or ''}"
    figures = []
    for index, c in enumerate(
        [c for c in answer["candidates"] if c.get("fleets")][:MAX_FLEET_CHARTS]
    ):
        f = c["fleets"]
        series = FleetSeries(
            interval_s=float(f["interval_s"]),
            starts_s=tuple(i["start_s"] for i in f["intervals"]),
            demand_rps=tuple(i["demand_rps"] for i in f["intervals"]),
            autoscaled=tuple(i["autoscaled"] for i in f["intervals"]),
            fixed=f["fixed"]["replicas"],
            capacity_rps=f["capacity_rps"],
        )
        caption = (
            f"{c['deployment']['name']}: fixed USD {num(f['fixed']['usd_per_day'], 2)} a day, "
            f"autoscaled USD {num(f['autoscaled']['usd_per_day'], 2)} a day "
            f"({f['lag_s']:g} s behind demand)"
        )
        svg = inline(fleet_chart(series), f"c-{FLEET_CHART}-{index}")
        figures.append(
            f'<figure class="chart" data-chart="{FLEET_CHART}">{svg}'
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    if not figures:
        why = "no self-hosted deployment has a capacity at this SLO to plan fleets with"
        figures.append(
            f'<figure class="chart" data-chart="{FLEET_CHART}">'
            f"{inline(no_data(FLEET_CHART, title, why), 'c-empty')}</figure>"
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2rem;color:#222}"
        "figure{margin:0 0 2rem}svg{max-width:100%;height:auto}</style></head><body>"
        f"<h1>{escape(title)}</h1><p>{escape(answer.get('explanation') or '')}</p>"
        + "".join(figures)
        + "</body></html>"
    )


def _flat_traffic(
    rps: float | None,
    per_day: float | None,
    peak_to_mean: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
) -> dict[str, Any]:
    """The `traffic` block of options that give a rate (--rps or --per-day)."""
    if rps is not None and per_day is not None:
        raise click.UsageError("give --rps or --per-day, not both")
    values = {
        "requests_per_s": rps,
        "requests_per_day": per_day,
        "peak_to_mean": peak_to_mean,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
    }
    return {key: value for key, value in values.items() if value is not None}


_ESTIMATE_NUMBERS = ("replicas", "GPUs", "util", "capacity req/s", "USD/h", "USD/month", "$/M out")
#: Self-hosted candidates whose plan over a log is drawn (the cheapest first).
MAX_FLEET_CHARTS = 3


def capacity_interval(c: dict[str, Any]) -> str | None:
    """The interval a candidate's capacity lies in and the replicas it allows, in a line."""
    if c.get("kind") != "self_hosted" or c.get("capacity_rps_low") is None:
        return None
    name = c["deployment"]["name"]
    low, high = c["capacity_rps_low"], c.get("capacity_rps_high")
    if high is None:
        return (
            f"{name}: capacity at least {num(low, 2)} req/s (every level that stands as "
            f"evidence met the SLO), so at most {c['replicas']} replicas"
        )
    span = c.get("replicas_range") or [c["replicas"], c["replicas"]]
    allows = (
        f"{span[0]} replicas either way"
        if span[0] == span[1]
        else f"{span[0]} to {span[1]} replicas"
    )
    return (
        f"{name}: capacity between {num(low, 2)} and {num(high, 2)} req/s (the bracketing "
        f"levels), so {allows}"
    )


def _traffic_line(answer: dict[str, Any]) -> str:
    """What the estimate planned for, in a line."""
    t = answer["traffic"]
    lengths = f"{round(t['input_tokens']):,} in / {round(t['output_tokens']):,} out tokens"
    served = answer.get("served_model")
    model = answer["model"] if served is None else f"{served} (on {answer['model']})"
    if t.get("traffic_id"):
        return (
            f"{model} for request log {t['name']}: {t['requests']:,} requests over "
            f"{num(t['duration_s'], 0)} s, busiest minute {num(t['requests_per_s'], 2)} req/s, "
            f"mean {num(t['mean_requests_per_s'], 2)} req/s, {lengths}"
        )
    mean = t["mean_requests_per_s"]
    flat = "" if mean == t["requests_per_s"] else f" (mean {num(mean, 2)})"
    return f"{model} at {num(t['requests_per_s'], 2)} req/s{flat}, {lengths}"


def _candidate_notes(candidate: dict[str, Any]) -> list[str]:
    """The lines under the table on a candidate: the interval its capacity lies in, and for
    one model of a mix, whose figures it rests on and that model's share of a replica."""
    lines = [capacity_interval(candidate)]
    share = candidate.get("served_model")
    if share:
        lines.append(
            f"{candidate['deployment']['name']}: {share['model']}'s own figures, "
            f"{num(_pct(share['token_share']), 1, ' %')} of each replica's tokens (of USD "
            f"{num(share['replica_usd_per_hour'], 2)}/h a replica)"
        )
    return [line for line in lines if line]


def _print_estimate(answer: dict[str, Any]) -> None:
    """The candidates cheapest first, then warnings and what was left out (on stderr)."""
    out = console()
    out.print(_traffic_line(answer), markup=False)
    if not answer["candidates"]:
        out.print(f"no estimate: {answer.get('reason') or 'no evidence'}", markup=False)
    else:
        rows = table(
            "deployment",
            "hardware",
            "basis",
            "replicas",
            "GPUs",
            "util",
            "capacity req/s",
            "USD/h",
            "USD/month",
            "$/M output tok",
            right=(
                "replicas",
                "GPUs",
                "util",
                "capacity req/s",
                "USD/h",
                "USD/month",
                "$/M output tok",
            ),
            ids=(),
        )
        for c in answer["candidates"]:
            d = c["deployment"]
            rows.add_row(
                *cells(
                    d["name"],
                    f"{d.get('hardware') or '-'} x {d.get('gpu_count') or '-'}",
                    c["basis"],
                    "-" if c["replicas"] is None else str(c["replicas"]),
                    "-" if c["gpus"] is None else str(c["gpus"]),
                    num(_pct(c["utilization"]), 0, " %"),
                    num(c["capacity_rps"], 2),
                    num(c["usd_per_hour"], 2),
                    num(c["usd_per_month"], 0),
                    num(c["per_million_output_tokens_usd"], 2),
                )
            )
        out.print(rows)
        if answer.get("explanation"):
            out.print(answer["explanation"], markup=False)
        for c in answer["candidates"]:
            for line in _candidate_notes(c):
                out.print(line, markup=False)
        shown = 0
        for c in answer["candidates"]:
            if c.get("fleets") and shown < MAX_FLEET_CHARTS:
                print_fleets(c["deployment"]["name"], c["fleets"])
                shown += 1
    for assumption in answer.get("assumptions") or []:
        out.print(f"assumed: {assumption}", markup=False)
    for c in answer["candidates"]:
        for warning in c.get("warnings") or []:
            click.echo(f"warning ({c['deployment']['name']}): {warning}", err=True)
    for u in answer.get("unavailable") or []:
        click.echo(f"left out {u['name']}: {u['reason']}", err=True)
