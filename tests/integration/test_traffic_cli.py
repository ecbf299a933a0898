"""The traffic commands and the estimate from a log as a user runs them against a real API:
import a log and read it back, plan from it with the fleets drawn, the flat forms --per-day
and --peak-to-mean, and `jobs show` ending with the capacity at the SLO and its cost there."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import asyncpg
import pytest
from click.testing import CliRunner, Result

from cli import main
from tests.conftest import ADEQUATE, Api, TeamClient, insert_finished_job
from tests.traffic_files import azure_csv, infercost_csv

pytestmark = pytest.mark.integration

MODEL = "llama-cli-log"
SLO = {"ttft_ms": {"p95": 100}}
#: As tests/api/test_traffic_estimates.py: four 5-minute intervals needing 2, 2, 3, 2
#: replicas of 1 request/s at 80%.
MINUTES = [30, 60, 90, 20, 10, 40, 70, 50, 20, 10, 60, 130, 100, 50, 40, 50, 60, 40, 20, 1]


def cli(api: Api, token: str, *args: str) -> Result:
    env = {"INFERCOST_URL": api.url, "INFERCOST_TOKEN": token}
    return CliRunner().invoke(main, list(args), env=env)


async def run(api: Api, token: str, *args: str) -> Result:
    result = await asyncio.to_thread(cli, api, token, *args)
    assert result.exit_code == 0, result.output
    return result


async def test_import_list_show(api_server: Api, team: TeamClient, tmp_path: Path) -> None:
    path = tmp_path / "conv.csv"
    path.write_bytes(azure_csv(3000, seed=6))
    imported = await run(
        api_server, team.key, "traffic", "import", str(path), "--format", "azure", "--name", "conv"
    )
    assert re.search(r"│ requests\s+│ 3,000\s+│", imported.output), imported.output
    assert "peak minute" in imported.output
    listed = await run(api_server, team.key, "traffic", "list")
    assert "1 request logs" in listed.output and "conv" in listed.output
    shown = await run(api_server, team.key, "traffic", "show", "conv", "--interval", "600")
    rows = re.findall(r"^\s+\+(\d+):(\d\d):00\s+([\d.]+)\s+=*", shown.output, re.MULTILINE)
    # 3,500 s in 600 s intervals: 6 rows, from +0:00:00 to +0:50:00.
    assert [(int(h), int(m)) for h, m, _ in rows] == [(0, 0), (0, 10), (0, 20), (0, 30),
                                                       (0, 40), (0, 50)]  # fmt: skip
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1,x\n")
    refused = await asyncio.to_thread(
        cli, api_server, team.key, "traffic", "import", str(bad), "--format", "azure"
    )
    assert refused.exit_code == 1
    assert "line 2, column GeneratedTokens: 'x' is not a whole number of tokens" in (refused.output)


async def test_estimate_from_a_log_draws_both_fleets(
    api_server: Api, team: TeamClient, db: asyncpg.Connection, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=4.0, name="one-rps")
    job_id, _ = await insert_finished_job(
        db, team.team_id, endpoint["id"],
        [(1, 0.5, 50.0, ADEQUATE, False), (2, 1.0, 100.0, ADEQUATE, False),
         (4, 2.0, 140.0, ADEQUATE, False)],
        slo=SLO, input_tokens=500, output_tokens=100,
    )  # fmt: skip
    times: list[float] = []
    for minute, count in enumerate(MINUTES[:-1]):
        times += [minute * 60 + 59.0 * k / count for k in range(count)]
    path = tmp_path / "peak.csv"
    path.write_bytes(infercost_csv([*times, 1140.0], [(500, 100)] * (len(times) + 1)))
    await run(api_server, team.key, "traffic", "import", str(path), "--format", "infercost",
              "--name", "shop-peak")  # fmt: skip
    answer = await run(
        api_server, team.key, "estimate", "--model", MODEL, "--traffic", "shop-peak",
        "--slo-ttft-p95", "100",
    )  # fmt: skip
    out = answer.output
    assert "for request log shop-peak: 951 requests over 1,140 s" in out
    assert "one-rps over the log, 300 s intervals" in out
    chart = re.findall(r"^\s+\+0:(\d\d):00\s+([\d.]+)\s+(\d)\s+(\d)(!?)", out, re.MULTILINE)
    assert chart == [("00", "1.50", "2", "2", ""), ("05", "1.17", "2", "2", ""),
                     ("10", "2.17", "3", "2", "!"), ("15", "1.00", "2", "3", "")]  # fmt: skip
    assert re.search(r"│ fixed\s+│\s+3 │\s+0.950 │\s+288.00 │", out), out
    assert re.search(r"│ autoscaled\s+│\s+2.21 mean │\s+0.700 │\s+212.21 │", out), out
    # The capacity's interval and the replicas it allows, always printed.
    assert "one-rps: capacity between 1.00 and 2.00 req/s (the bracketing levels)" in out

    flat = await run(
        api_server, team.key, "estimate", "--model", MODEL, "--per-day", "86400",
        "--peak-to-mean", "3", "--input-tokens", "500", "--output-tokens", "100",
        "--slo-ttft-p95", "100",
    )  # fmt: skip
    # 86,400 a day = 1 request/s on average; sized for 3: ceil(3 / 0.8) = 4 replicas.
    assert "at 3.00 req/s (mean 1.00)" in flat.output
    assert re.search(r"│ one-rps\s+│ .*│ measured\s+│\s+4 │", flat.output), flat.output

    shown = await run(api_server, team.key, "jobs", "show", job_id)
    assert "$/M out at level" in shown.output
    # Capacity 1 request/s: 100 output tokens/s at the USD 2/h the runs were priced at
    # when measured = USD 5.56 per million.
    assert (
        "capacity at the SLO: 1.00 req/s a replica (between 1.00 and 2.00 req/s measured), "
        "USD 5.56 per million output tokens at that load (USD 2.00/h a replica)"
    ) in shown.output.replace("\n", " ")
