"""`infercost hardware`: the catalog an endpoint's hardware and the price book name: the
public GPUs and a team's own entries, GPUs or CPU machines (a llama.cpp or transformers
server on CPUs is registered with hardware of its own). HTTP API only."""

from __future__ import annotations

from typing import Any

import click

from cli.client import ApiClient, api_options
from cli.output import console, emit_json, json_option, num, table
from cli.watch import cells

_SPECS = (
    ("memory_gb", "memory GB", 0),
    ("memory_bandwidth_gbps", "bandwidth GB/s", 0),
    ("bf16_tflops", "BF16 TFLOPS", 1),
    ("fp8_tflops", "FP8 TFLOPS", 1),
    ("power_w", "power W", 0),
)


def _table(items: list[dict[str, Any]]) -> None:
    headers = [label for _, label, _ in _SPECS]
    rows = table("name", "kind", "vendor", *headers, "whose", right=tuple(headers))
    for hw in items:
        figures = [
            "-" if hw.get(key) is None else num(hw[key], places) for key, _, places in _SPECS
        ]
        whose = "public" if hw["public"] else "your team"
        rows.add_row(*cells(hw["name"], hw["kind"], hw["vendor"], *figures, whose))
    console().print(rows)


@click.group()
def hardware() -> None:
    """The hardware catalog: public GPUs and your team's own GPUs and CPU machines."""


@hardware.command("list")
@json_option
@api_options
def hardware_list(as_json: bool, client: ApiClient) -> None:
    """Every entry your team can name, by name."""
    items = client.get("/v1/hardware")
    if as_json:
        emit_json(items)
        return
    console().print(f"{len(items)} entries", markup=False)
    if items:
        _table(items)


@hardware.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(["gpu", "cpu"]), default="gpu", show_default=True)
@click.option("--vendor", required=True, help="Who makes it, e.g. amd, intel, nvidia.")
@click.option(
    "--memory-gb",
    required=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Memory per unit in GB (a CPU machine: its RAM).",
)
@click.option(
    "--memory-bandwidth-gbps",
    required=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Memory bandwidth per unit, GB/s (a CPU machine: all its memory channels).",
)
@click.option(
    "--bf16-tflops",
    required=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Dense BF16 TFLOPS (a CPU: its matrix or vector units, e.g. AMX, from the datasheet).",
)
@click.option("--fp8-tflops", type=click.FloatRange(min=0, min_open=True), help="Dense FP8 TFLOPS.")
@click.option(
    "--power-w",
    required=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Board power (a CPU machine: its sockets' TDP), W.",
)
@json_option
@api_options
def hardware_add(  # click passes every option by name
    *,
    name: str,
    kind: str,
    vendor: str,
    memory_gb: float,
    memory_bandwidth_gbps: float,
    bf16_tflops: float,
    fp8_tflops: float | None,
    power_w: float,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Add NAME to your team's catalog (POST /v1/hardware); endpoints (`--hardware NAME`)
    and prices then name it. A CPU machine is one unit: an endpoint's --gpu-count counts
    machines, and its price is per machine-hour."""
    body: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "vendor": vendor,
        "memory_gb": memory_gb,
        "memory_bandwidth_gbps": memory_bandwidth_gbps,
        "bf16_tflops": bf16_tflops,
        "power_w": power_w,
    }
    if fp8_tflops is not None:
        body["fp8_tflops"] = fp8_tflops
    created = client.post("/v1/hardware", body)
    if as_json:
        emit_json(created)
    else:
        _table([created])
