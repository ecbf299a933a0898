"""Ids as users type them: a whole id, a unique prefix, or (endpoints) a name; an ambiguous
or malformed prefix is refused with what to do. Pure functions and click parsing, no API."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from cli import main
from cli.bench import bench_name
from cli.commands import job_body, parse_levels
from cli.resolve import _by_prefix

IDS = (
    "8b58da70-87aa-4c1e-9f00-000000000001",
    "8b58da70-87bb-4c1e-9f00-000000000002",
    "c0ffee00-0000-4000-8000-000000000003",
)


def test_a_unique_prefix_names_its_id() -> None:
    assert _by_prefix("job", "c0ff", IDS, "") == IDS[2]
    assert _by_prefix("job", "8B58DA70-87A", IDS, "") == IDS[0]  # any case


def test_an_ambiguous_prefix_lists_the_ids_it_matches() -> None:
    with pytest.raises(click.ClickException) as caught:
        _by_prefix("job", "8b58da70", IDS, "")
    assert caught.value.message == (
        f"'8b58da70' is the start of 2 job ids ({IDS[0]}, {IDS[1]}): give more characters"
    )


def test_no_match_and_short_prefixes_say_what_to_do() -> None:
    with pytest.raises(click.ClickException, match="no run id starts with 'dead'"):
        _by_prefix("run", "dead", IDS, "hint")
    with pytest.raises(click.ClickException, match="at least its first 4 characters"):
        _by_prefix("run", "8b5", IDS, "")


def test_a_malformed_run_id_is_refused_before_any_lookup() -> None:
    result = CliRunner().invoke(main, ["runs", "show", "xyz!", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "'xyz!' is not a run id" in result.output


def test_bench_names_and_job_bodies() -> None:
    assert bench_name("http://192.0.2.10:8000/v1", "meta-llama/Llama-3.1-8B-Instruct") == (
        "bench-192.0.2.10-8000-meta-llama-Llama-3.1-8B-Instruct"
    )
    assert bench_name("https://api.example.com/v1", "m") == "bench-api.example.com-m"
    assert parse_levels("1, 8,32") == [1, 8, 32]
    assert parse_levels("0.5,2") == [0.5, 2]
    body = job_body(
        "sim-fixed",
        mode="rate",
        levels=[2, 4],
        input_tokens=512,
        output_tokens=128,
        duration_s=30.0,
        slo_ttft_p95=500.0,
    )
    assert body == {
        "endpoint": "sim-fixed",
        "workload": {"input_tokens": {"mean": 512}, "output_tokens": {"mean": 128}},
        "load": {"mode": "rate", "levels": [2, 4], "duration_s": 30.0},
        "slo": {"ttft_ms": {"p95": 500.0}},
    }
