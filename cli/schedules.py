"""`infercost schedules`: watch a deployment by running a job on a cron or an interval
(add, list, show, pause, resume, remove), through the HTTP API like every client command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.client import ApiClient, api_options
from cli.commands import load_job_file, resolve_endpoint
from cli.output import console, emit_json, json_option, table, when
from cli.watch import cells


def _schedule_id(client: ApiClient, text: str) -> str:
    """A schedule by its name, id or a unique id prefix."""
    items = client.pages("/v1/schedules")
    exact = [s for s in items if text in (s["id"], s.get("name"))]
    found = exact or [s for s in items if s["id"].startswith(text)]
    if len(found) != 1:
        why = "no schedule" if not found else f"{len(found)} schedules"
        raise click.ClickException(f"{why} match '{text}': see `infercost schedules list`")
    schedule_id: str = found[0]["id"]
    return schedule_id


def _timing(item: dict[str, Any]) -> str:
    rule = item["when"]
    if rule.get("cron"):
        return f"{rule['cron']} ({rule.get('timezone', 'UTC')})"
    return f"every {rule['interval_s']} s"


def _print(item: dict[str, Any]) -> None:
    out = console()
    last = item.get("last_run") or {}
    lines = [
        f"schedule {item.get('name') or '-'} ({item['id']})",
        f"  endpoint   {item['endpoint_id']}",
        f"  when       {_timing(item)}, jitter {item['jitter_s']} s",
        f"  enabled    {'yes' if item['enabled'] else 'no'}"
        + (f": {item['disabled_reason']}" if item.get("disabled_reason") else ""),
        f"  state      {item.get('state') or '-'} since {when(item.get('state_since'))}",
        f"  last run   {when(last.get('slot_at'))} {last.get('outcome', '')} "
        f"{last.get('job_id') or last.get('reason') or ''}".rstrip(),
        f"  next run   {when(item.get('next_run_at'))}",
    ]
    for line in lines:
        out.print(line, markup=False)


@click.group()
def schedules() -> None:
    """Run a job on a schedule and alert when the deployment drifts."""


@schedules.command("add")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--cron", help="Five-field cron expression, e.g. '0 */3 * * *'.")
@click.option("--timezone", default="UTC", show_default=True, help="IANA zone of --cron.")
@click.option("--every", "interval_s", type=click.IntRange(60), help="Interval in seconds.")
@click.option("--jitter", "jitter_s", type=click.IntRange(0, 3600), default=0)
@click.option("--quiet", help="Quiet hours HH:MM-HH:MM in the schedule's zone, e.g. 22:00-06:00.")
@click.option("--name", help="A name to find it by.")
@click.option("--max-failures", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option("--max-ttft-p95", type=click.FloatRange(0), help="Alert above this TTFT p95 (ms).")
@click.option("--max-tpot-p95", type=click.FloatRange(0), help="Alert above this TPOT p95 (ms).")
@click.option("--max-cost", type=click.FloatRange(0), help="Alert above this USD per million.")
@click.option("--min-availability", type=click.FloatRange(0, 1), help="Alert below this share.")
@json_option
@api_options
def schedules_add(  # click passes every option by name
    *,
    file: Path,
    cron: str | None,
    timezone: str,
    interval_s: int | None,
    jitter_s: int,
    quiet: str | None,
    name: str | None,
    max_failures: int,
    max_ttft_p95: float | None,
    max_tpot_p95: float | None,
    max_cost: float | None,
    min_availability: float | None,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Run the job in FILE (the POST /v1/jobs body, YAML or JSON; `endpoint: NAME` may
    replace endpoint_id) on --cron (with --timezone) or --every seconds."""
    if (cron is None) == (interval_s is None):
        raise click.UsageError("give --cron or --every, one of them")
    body: dict[str, Any] = {
        "job": resolve_endpoint(client, load_job_file(file)),
        "when": {"cron": cron, "timezone": timezone} if cron else {"interval_s": interval_s},
        "jitter_s": jitter_s,
        "max_consecutive_failures": max_failures,
    }
    if name:
        body["name"] = name
    if quiet:
        start, _, end = quiet.partition("-")
        body["quiet_hours"] = {"start": start.strip(), "end": end.strip()}
    slo = {
        key: {"p95": value}
        for key, value in (("ttft_ms", max_ttft_p95), ("tpot_ms", max_tpot_p95))
        if value is not None
    }
    thresholds: dict[str, Any] = {"slo": slo} if slo else {}
    if max_cost is not None:
        thresholds["max_cost_per_million_usd"] = max_cost
    if min_availability is not None:
        thresholds["min_availability"] = min_availability
    if thresholds:
        body["thresholds"] = thresholds
    created = client.post("/v1/schedules", body)
    if as_json:
        emit_json(created)
    else:
        _print(created)


@schedules.command("list")
@json_option
@api_options
def schedules_list(as_json: bool, client: ApiClient) -> None:
    """Every schedule with its state, last and next run."""
    items = client.pages("/v1/schedules")
    if as_json:
        emit_json(items)
        return
    rows = table("id", "name", "when", "enabled", "state", "last run", "outcome", "next run")
    for s in items:
        last = s.get("last_run") or {}
        rows.add_row(
            *cells(
                s["id"],
                s.get("name") or "-",
                _timing(s),
                "yes" if s["enabled"] else "no",
                s.get("state") or "-",
                when(last.get("slot_at")),
                last.get("outcome") or "-",
                when(s.get("next_run_at")),
            )
        )
    out = console()
    out.print(f"{len(items)} schedules", markup=False)
    if items:
        out.print(rows)


def _one(action: str, method: str, help_text: str) -> click.Command:
    """A command taking one schedule (name, id or id prefix)."""

    @click.argument("schedule")
    @json_option
    @api_options
    def command(schedule: str, as_json: bool, client: ApiClient) -> None:
        schedule_id = _schedule_id(client, schedule)
        path = f"/v1/schedules/{schedule_id}"
        if method == "delete":
            client.delete(path)
            result: dict[str, Any] = {"id": schedule_id, "removed": True}
            if not as_json:
                click.echo(f"removed schedule {schedule_id}")
                return
        elif method == "get":
            result = client.get(path)
        else:
            result = client.post(f"{path}/{action}")
        if as_json:
            emit_json(result)
        else:
            _print(result)

    command.__doc__ = help_text
    return schedules.command(action)(command)


_one("show", "get", "One schedule (name, id or id prefix): timing, state, last and next run.")
_one("pause", "post", "Stop running SCHEDULE until it is resumed.")
_one("resume", "post", "Run SCHEDULE again from its next slot (a fresh failure streak).")
_one("remove", "delete", "Delete SCHEDULE and its slot ledger; its jobs stay.")
