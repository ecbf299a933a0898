"""`infercost bench URL --model M`: one command from a URL to an answer, like the peers'
one-command runs. It registers the endpoint (named bench-<host>-<model>, reused on later
runs), checks it, submits a job, follows it and prints TTFT, TPOT, throughput and cost per
level. HTTP API only: a running API (`make run`) does the work."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import click

from cli.client import ApiClient, api_options
from cli.commands import _watch, job_body, parse_levels
from cli.output import console, json_option
from cli.resources import print_check
from infercost.figures.metrics import ADEQUATE_MIN_REQUESTS

#: The longest endpoint name the API accepts.
NAME_CHARS = 100
_UNSAFE = re.compile(r"[^\w.\-]+")


def bench_name(url: str, model: str) -> str:
    """bench-<host>-<model>, in the characters an endpoint name may hold
    (`http://192.0.2.10:8000/v1`, `meta-llama/Llama-3.1-8B` ->
    `bench-192.0.2.10-8000-meta-llama-Llama-3.1-8B`)."""
    parts = urlsplit(url)
    host = (parts.hostname or "endpoint") + (f"-{parts.port}" if parts.port else "")
    name = _UNSAFE.sub("-", f"bench-{host}-{model}").strip("-")
    return name[:NAME_CHARS]


def _endpoint_for(client: ApiClient, name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The endpoint called `name`, registered with `fields` or brought up to date with them."""
    existing = next((e for e in client.pages("/v1/endpoints") if e["name"] == name), None)
    if existing is None:
        created: dict[str, Any] = client.post("/v1/endpoints", {"name": name, **fields})
        return created
    changes = {k: v for k, v in fields.items() if k == "api_key" or existing.get(k) != v}
    if not changes:
        return dict(existing)
    updated: dict[str, Any] = client.patch(f"/v1/endpoints/{existing['id']}", changes)
    return updated


@click.command()
@click.argument("target_url", metavar="URL")
@click.option("--model", required=True, help="Served model name, as /v1/models lists it.")
@click.option("--levels", default="1,8", show_default=True, help="Comma-separated levels.")
@click.option(
    "--mode", type=click.Choice(["concurrency", "rate"]), default="concurrency", show_default=True
)
@click.option("--input-tokens", type=click.IntRange(1), default=256, show_default=True)
@click.option("--output-tokens", type=click.IntRange(1), default=128, show_default=True)
@click.option(
    "--requests",
    type=click.IntRange(1),
    default=ADEQUATE_MIN_REQUESTS,
    show_default=True,
    help="Measured requests per level (ignored with --duration-s); fewer than the default "
    "give percentiles the report marks inadequate.",
)
@click.option(
    "--duration-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds per level instead of a request count.",
)
@click.option("--warmup", type=click.IntRange(0), default=2, show_default=True)
@click.option("--slo-ttft-p95", type=float, help="SLO: TTFT p95 in ms.")
@click.option("--slo-tpot-p95", type=float, help="SLO: TPOT p95 in ms.")
@click.option(
    "--engine", help="vllm, sglang, tgi, llamacpp, transformers (default: as the check finds)."
)
@click.option("--hardware", help="GPU SKU, e.g. H200-SXM (for cost and roofline).")
@click.option("--gpu-count", type=click.IntRange(1), default=1, show_default=True)
@click.option("--usd-per-hour", type=click.FloatRange(0), help="Cost of the deployment.")
@click.option("--api-key", envvar="INFERCOST_ENDPOINT_API_KEY", help="Sent as a bearer token.")
@click.option("--name", help="Endpoint name (default: bench-<host>-<model>).")
@click.option("--force", is_flag=True, help="Run even if the preflight check fails.")
@json_option
@api_options
def bench(  # click passes every option by name
    *,
    target_url: str,
    model: str,
    levels: str,
    mode: str,
    input_tokens: int,
    output_tokens: int,
    requests: int,
    duration_s: float | None,
    warmup: int,
    slo_ttft_p95: float | None,
    slo_tpot_p95: float | None,
    engine: str | None,
    hardware: str | None,
    gpu_count: int,
    usd_per_hour: float | None,
    api_key: str | None,
    name: str | None,
    force: bool,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Benchmark the OpenAI-compatible server at URL for MODEL in one go: register (or reuse)
    the endpoint, check it, run one job and print each level's TTFT, TPOT, throughput and
    cost. Exit codes as `submit --watch`; 1 when the check fails (unless --force)."""
    level_list = parse_levels(levels)
    fields: dict[str, Any] = {
        "base_url": target_url.rstrip("/"),
        "model": model,
        "gpu_count": gpu_count,
    }
    for key, value in (
        ("engine", engine),
        ("hardware", hardware),
        ("usd_per_hour", usd_per_hour),
        ("api_key", api_key),
    ):
        if value is not None:
            fields[key] = value
    endpoint_name = name or bench_name(target_url, model)
    out = console()
    endpoint = _endpoint_for(client, endpoint_name, fields)
    check = client.post(f"/v1/endpoints/{endpoint['id']}/check")
    if not as_json:
        out.print(f"endpoint {endpoint['name']} ({endpoint['id']})", markup=False)
        print_check(check)
    if not check["ok"] and not force:
        raise click.ClickException(
            f"the check failed, so no job was run: {check['summary']} "
            "(fix it, or pass --force to run anyway)"
        )
    if engine is None and check.get("engine") and not endpoint.get("engine"):
        # What the check recognised makes the tokenizer probe and telemetry right first time.
        client.patch(f"/v1/endpoints/{endpoint['id']}", {"engine": check["engine"]})
    body = job_body(
        endpoint["id"],
        mode=mode,
        levels=level_list,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        requests_per_level=None if duration_s is not None else requests,
        duration_s=duration_s,
        warmup=warmup,
        slo_ttft_p95=slo_ttft_p95,
        slo_tpot_p95=slo_tpot_p95,
    )
    body["endpoint_id"] = body.pop("endpoint")
    if force:
        body["force"] = True
    job = client.post("/v1/jobs", body)
    _watch(client, job["id"], as_json=as_json)
    if as_json:
        return
    out.print(
        f"more: `infercost report {job['id']} --open`, `infercost jobs show {job['id']}`",
        markup=False,
    )
