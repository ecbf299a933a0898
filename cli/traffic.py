"""`infercost traffic`: import a request log (Azure, Mooncake, BurstGPT or the infercost
format), list the team's logs, show one with its requests over time. HTTP API only; the file
is streamed to the API as it is read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from cli import resolve
from cli.client import ApiClient, api_options
from cli.output import console, emit_json, json_option, num, table, when
from cli.watch import cells

#: Characters of a chart's widest bar.
BAR_WIDTH = 40
#: How long an import may take before the CLI gives up waiting (a large log is minutes).
IMPORT_TIMEOUT_S = 3600.0
_FORMATS = click.Choice(["azure", "mooncake", "burstgpt", "infercost"])


def offset(seconds: float) -> str:
    """Seconds after a log's first request as +h:mm:ss."""
    whole = round(seconds)
    return f"+{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def bar(value: float, top: float, marks: Mapping[str, float] | None = None) -> str:
    """`value` as a bar of '=' scaled so `top` fills BAR_WIDTH, with one-character `marks`
    (e.g. {'|': fixed capacity}) placed at their own values."""
    scale = BAR_WIDTH / top if top > 0 else 0.0
    cells_ = [" "] * (BAR_WIDTH + 1)
    for k in range(min(BAR_WIDTH, round(value * scale))):
        cells_[k] = "="
    for mark, at in (marks or {}).items():
        cells_[min(BAR_WIDTH, round(at * scale))] = mark
    return "".join(cells_).rstrip()


def print_series(read: Mapping[str, Any]) -> None:
    """A log's requests per second over time, one row per interval of its series."""
    series = read.get("series")
    if not series:
        return
    points = series["points"]
    top = max((p["requests_per_s"] for p in points), default=0.0)
    out = console()
    out.print(
        f"requests/s per {series['interval_s']} s interval (= requests over the interval's "
        "length):",
        markup=False,
    )
    for p in points:
        out.print(
            f"  {offset(p['start_s']):>10}  {p['requests_per_s']:>9.2f}  "
            f"{bar(p['requests_per_s'], top)}",
            markup=False,
        )


def print_read(read: Mapping[str, Any]) -> None:
    """A log's read as a table of figures."""
    rows = table("figure", "value", ids=())
    lengths = "{mean} mean, {p50} p50, {p90} p90, {p99} p99 tokens"

    def dist(d: Mapping[str, float]) -> str:
        return lengths.format(**{k: num(d[k], 0) for k in ("mean", "p50", "p90", "p99")})

    models = ", ".join(
        f"{m['model'] or '(none)'} {m['share']:.0%}" for m in read.get("models") or []
    )
    for name, value in (
        ("id", read["id"]),
        ("name", read["name"]),
        ("format", read["format"]),
        ("requests", f"{read['requests']:,}"),
        ("start", when(read.get("start_at")) if read.get("start_at") else "- (offsets only)"),
        ("duration", f"{num(read['duration_s'], 1)} s"),
        ("mean rate", f"{num(read.get('mean_requests_per_s'), 2)} req/s"),
        (
            "peak minute",
            f"{num(read['peak_1m_requests_per_s'], 2)} req/s from "
            f"{offset(read['peak_minute_start_s'])}",
        ),
        ("peak 5 minutes", f"{num(read['peak_5m_requests_per_s'], 2)} req/s"),
        ("peak to mean", num(read.get("peak_to_mean"), 2)),
        ("input", dist(read["input_tokens"])),
        ("output", dist(read["output_tokens"])),
        (
            "prefix reuse",
            "-"
            if read.get("prefix_reuse_share") is None
            else f"{read['prefix_reuse_share']:.1%} of prompt tokens in blocks seen before",
        ),
        ("models", models or "-"),
        ("sessions", "-" if read.get("sessions") is None else f"{read['sessions']:,}"),
    ):
        rows.add_row(*cells(name, value))
    console().print(rows)


@click.group()
def traffic() -> None:
    """Request logs: import your gateway's (or a public trace), read it, plan from it with
    `infercost estimate --traffic NAME`."""


@traffic.command("import")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--format", "fmt", type=_FORMATS, required=True, help="The log's layout.")
@click.option("--name", help="A name to plan by (default: from the content's hash).")
@json_option
@api_options
def traffic_import(
    file: Path, fmt: str, name: str | None, as_json: bool, client: ApiClient
) -> None:
    """Import FILE (CSV or JSON lines, plain or .gz) and print its read. The same file under
    the same name gives back the stored log."""
    try:
        with file.open("rb") as body:
            answer = client.request(
                "POST",
                "/v1/traffic",
                params={"format": fmt, "name": name},
                content=body,
                headers={"Content-Type": "application/octet-stream"},
                timeout=IMPORT_TIMEOUT_S,
            ).json()
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {exc.strerror}") from None
    if as_json:
        emit_json(answer)
    else:
        print_read(answer)


def _list_table(items: Sequence[Mapping[str, Any]]) -> None:
    rows = table(
        "id",
        "name",
        "format",
        "requests",
        "duration s",
        "mean req/s",
        "peak req/s",
        "imported",
        right=("requests", "duration s", "mean req/s", "peak req/s"),
    )
    for t in items:
        rows.add_row(
            *cells(
                t["id"],
                t["name"],
                t["format"],
                f"{t['requests']:,}",
                num(t["duration_s"], 0),
                num(t.get("mean_requests_per_s"), 2),
                num(t["peak_1m_requests_per_s"], 2),
                when(t["created_at"]),
            )
        )
    console().print(rows)


@traffic.command("list")
@json_option
@api_options
def traffic_list(as_json: bool, client: ApiClient) -> None:
    """Your team's request logs, newest first."""
    items = client.pages("/v1/traffic")
    if as_json:
        emit_json(items)
        return
    console().print(f"{len(items)} request logs", markup=False)
    if items:
        _list_table(items)


@traffic.command("show")
@click.argument("log")
@click.option("--interval", type=click.IntRange(1), help="Seconds per row of the chart.")
@json_option
@api_options
def traffic_show(log: str, interval: int | None, as_json: bool, client: ApiClient) -> None:
    """One request log (name, id or id prefix): its read and its requests over time."""
    found = resolve.traffic(client, log)
    read = client.get(f"/v1/traffic/{found['id']}", interval=interval)
    if as_json:
        emit_json(read)
        return
    print_read(read)
    print_series(read)


@traffic.command("remove")
@click.argument("log")
@api_options
def traffic_remove(log: str, client: ApiClient) -> None:
    """Delete a request log and its requests."""
    found = resolve.traffic(client, log)
    client.delete(f"/v1/traffic/{found['id']}")
    click.echo(f"removed request log {found['name']} ({found['id']})")


def print_fleets(name: str, fleets: Mapping[str, Any]) -> None:
    """A candidate's plan over a log: each interval's demand against the capacity its fixed
    and autoscaled fleets plan to carry, then both fleets' cost."""
    out = console()
    per = fleets["capacity_rps"] * fleets["target_utilization"]
    fixed, auto = fleets["fixed"], fleets["autoscaled"]
    intervals = fleets["intervals"]
    top = max([fixed["replicas"] * per, *(i["demand_rps"] for i in intervals)])
    out.print(
        f"{name} over the log, {fleets['interval_s']} s intervals: demand (=, the busiest "
        f"minute's req/s) against planned capacity (replicas x {num(per, 2)} req/s): "
        f"| fixed, + autoscaled ({fleets['lag_intervals']} interval(s) behind); ! short",
        markup=False,
    )
    out.print(f"  {'start':>10}  {'demand':>8}  need  auto", markup=False)
    for i in intervals:
        marks = {"|": fixed["replicas"] * per, "+": i["autoscaled"] * per}
        out.print(
            f"  {offset(i['start_s']):>10}  {i['demand_rps']:>8.2f}  {i['needed']:>4}  "
            f"{i['autoscaled']:>4}{'!' if i['at_risk'] else ' '} "
            f"{bar(i['demand_rps'], top, marks)}",
            markup=False,
        )
    rows = table(
        "fleet",
        "replicas",
        "replica-h",
        "USD/day",
        "mean util",
        "$/M output tok",
        "short intervals",
        right=("replicas", "replica-h", "USD/day", "mean util", "$/M output tok"),
        ids=(),
    )
    risk = auto["slo_risk"]
    for label, fleet, replicas, short in (
        ("fixed", fixed, str(fixed["replicas"]), "-"),
        (
            "autoscaled",
            auto,
            f"{num(auto['mean_replicas'], 2)} mean",
            f"{len(risk['intervals'])} ({risk['share_of_requests']:.1%} of requests)",
        ),
    ):
        rows.add_row(
            *cells(
                label,
                replicas,
                num(fleet["replica_hours"], 2),
                num(fleet["usd_per_day"], 2),
                num(fleet["mean_utilization"] * 100, 0, " %"),
                num(fleet["per_million_output_tokens_usd"], 2),
                short,
            )
        )
    out.print(rows)
