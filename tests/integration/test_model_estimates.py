"""POST /v1/estimates for one model of a mix (served_model) over a real job: one simulated
endpoint serves a base model and two adapters, each at the speed it was told (the slow
adapter's first token 300 ms, the fast one's 10 ms), and lets 4 requests generate at once,
so at 8 users every request first waits for a slot. The SLO (TTFT p95 at most 350 ms) holds
for the fast adapter at both levels and for the slow one only at 2 users: each adapter's
estimate rests on its own figures in the runs' `models` blocks, and the slow one gets the
lower capacity."""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from cli import main
from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import Api, TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

#: (TTFT ms, ITL ms) each model was told to serve at.
MODELS = {"sim-model": (40.0, 2.0), "lora-fast": (10.0, 2.0), "lora-slow": (300.0, 2.0)}
SLO_TTFT_P95 = 350.0
USD_PER_HOUR = 3.0
#: The traffic of one adapter to plan for: 10 requests/s of 32 prompt and 16 output tokens.
RPS, IN, OUT = 10.0, 32, 16
TARGET = 0.8


@pytest.fixture(scope="module")
def adapters() -> Iterator[SimProcess]:
    config = SimConfig.serving(MODELS, port=0, max_concurrency=4)
    with sim_process(config) as sim:
        yield sim


async def estimate(team: TeamClient, served_model: str) -> dict[str, Any]:
    response = await team.http.post(
        "/v1/estimates",
        json={
            "model": "sim-model",
            "served_model": served_model,
            "traffic": {"requests_per_s": RPS, "input_tokens": IN, "output_tokens": OUT},
            "slo": {"ttft_ms": {"p95": SLO_TTFT_P95}},
            "include_projections": False,
        },
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def cli_estimate(api: Api, team: TeamClient, served_model: str, *more: str) -> Any:
    """`infercost estimate --served-model ...` for the same traffic, in-process."""
    args = ["estimate", "--model", "sim-model", "--served-model", served_model, "--rps", f"{RPS:g}"]
    args += ["--input-tokens", str(IN), "--output-tokens", str(OUT)]
    args += ["--slo-ttft-p95", f"{SLO_TTFT_P95:g}", *more]
    env = {"INFERCOST_URL": api.url, "INFERCOST_TOKEN": team.key}
    return await asyncio.to_thread(CliRunner().invoke, main, args, env=env)


async def test_each_adapter_is_planned_from_its_own_figures(
    api_server: Api, team: TeamClient, adapters: SimProcess
) -> None:
    endpoint = await team.create_endpoint(
        base_url=adapters.openai_base_url, usd_per_hour=USD_PER_HOUR
    )
    weights = [{"name": name, "weight": 2 if name == "sim-model" else 1} for name in MODELS]
    body = {
        "endpoint_id": endpoint["id"],
        "workload": {
            "input_tokens": {"mean": IN},
            "output_tokens": {"mean": OUT},
            "models": weights,
            "seed": 11,
        },
        "load": {"mode": "concurrency", "levels": [2, 8], "requests_per_level": 240},
    }
    for attempt in range(2):
        done = await team.run_job(body)
        low, high = sorted(done["runs"], key=lambda r: r["level"])
        if low["adequacy"]["ok"] and high["adequacy"]["ok"]:
            break
        # A level the load generator was late for is not evidence (rightly); on a machine
        # busy enough for that, measure once more, then say the check could not tell.
        assert low["client_bound"] or high["client_bound"], (low["adequacy"], high["adequacy"])
        if attempt == 1:
            load, cpus = os.getloadavg()[0], os.cpu_count() or 1
            pytest.xfail(
                f"machine loaded, the check cannot tell: a level was client-bound twice "
                f"(load average {load:.1f} on {cpus} CPUs)"
            )
        # Only the newest job's runs are evidence once it stands: remove the spoiled one.
        assert (await team.http.delete(f"/v1/jobs/{done['id']}")).status_code == 204
    block = {(run["level"], m["model"]): m for run in (low, high) for m in run["models"]}

    def margin(level: int, model: str) -> float:
        return float(block[(level, model)]["ttft_ms"]["p95"]) / SLO_TTFT_P95

    # What the simulator was told shows in the blocks: the fast adapter within the SLO at
    # both levels, the slow one only at 2 users.
    assert margin(2, "lora-fast") <= 1 and margin(8, "lora-fast") <= 1
    assert margin(2, "lora-slow") <= 1 < margin(8, "lora-slow")
    assert all(m["error_rate"] == 0 for m in block.values())

    fast = (await estimate(team, "lora-fast"))["candidates"]
    slow_answer = await estimate(team, "lora-slow")
    assert slow_answer["served_model"] == "lora-slow"
    slow = slow_answer["candidates"]
    assert len(fast) == len(slow) == 1
    fast_c, slow_c = fast[0], slow[0]

    # The fast adapter met the SLO at every level: its capacity is its own requests/s at 8
    # users (a lower bound), and its share of the replica the share of its tokens there.
    top = block[(8, "lora-fast")]
    assert fast_c["capacity_rps"] == pytest.approx(top["requests_per_s"])
    assert fast_c["served_model"]["token_share"] == pytest.approx(top["token_share"])
    # The slow adapter's capacity lies between its own requests/s at 2 and 8 users, where its
    # TTFT p95 margin crosses 1.
    lo, hi = block[(2, "lora-slow")], block[(8, "lora-slow")]
    weight = (1 - margin(2, "lora-slow")) / (margin(8, "lora-slow") - margin(2, "lora-slow"))
    expected = lo["requests_per_s"] + weight * (hi["requests_per_s"] - lo["requests_per_s"])
    assert slow_c["capacity_rps"] == pytest.approx(expected)
    assert slow_c["capacity_rps_low"] == pytest.approx(lo["requests_per_s"])
    assert slow_c["capacity_rps_high"] == pytest.approx(hi["requests_per_s"])
    assert slow_c["served_model"]["token_share"] == pytest.approx(lo["token_share"])
    assert slow_c["capacity_rps"] < fast_c["capacity_rps"]

    for c, name in ((fast_c, "lora-fast"), (slow_c, "lora-slow")):
        share = c["served_model"]
        assert share["model"] == name and share["whole_runs"] is False
        assert share["replica_usd_per_hour"] == pytest.approx(USD_PER_HOUR)
        replicas = math.ceil(RPS / (TARGET * c["capacity_rps"]))
        assert c["replicas"] == replicas
        usd_per_hour = replicas * USD_PER_HOUR * share["token_share"]
        assert c["usd_per_hour"] == pytest.approx(usd_per_hour)
        assert c["per_million_output_tokens_usd"] == pytest.approx(
            usd_per_hour / (RPS * OUT * 3600) * 1e6
        )
        # Every level is a load point at the model's own requests/s.
        assert sorted(p["requests_per_s"] for p in c["load_points"]) == sorted(
            block[(level, name)]["requests_per_s"] for level in (2, 8)
        )

    share = slow_c["served_model"]["token_share"]
    assert (
        f"(lora-slow's {share:.0%} share of {slow_c['replicas']} replica(s) at USD 3.00/hour)"
    ) in slow_answer["explanation"]

    # The command line asks the same (with projections, its default, there are none here:
    # no other hardware has a price) and says whose figures each candidate used.
    as_json = await cli_estimate(api_server, team, "lora-slow", "--json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["candidates"] == slow
    plain = await cli_estimate(api_server, team, "lora-slow")
    assert plain.output.startswith("lora-slow (on sim-model) at 10.00 req/s"), plain.output
    assert (
        f"{endpoint['name']}: lora-slow's own figures, {100 * share:.1f} % of each replica's "
        "tokens (of USD 3.00/h a replica)"
    ) in plain.output

    # A model no run sent requests to: no candidate, and why, naming those it did send.
    missing = await estimate(team, "lora-missing")
    assert missing["candidates"] == []
    (left_out,) = missing["unavailable"]
    assert "sent requests to model 'lora-missing'" in left_out["reason"]
    assert "'lora-fast', 'lora-slow', 'sim-model'" in left_out["reason"]
