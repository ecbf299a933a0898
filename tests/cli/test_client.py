"""The client commands' failures before any job exists: where the API is, which key, bad
files. Each must end in one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cli import main
from cli.client import resolve_connection
from cli.up import TEAM_KEY_FILE
from infercost.settings import Settings
from tests.conftest import free_port


def test_defaults_are_the_local_api_and_the_default_team_key(tmp_path: Path) -> None:
    (tmp_path / TEAM_KEY_FILE).write_text("ic_abc123\n")
    settings = Settings(data_dir=tmp_path, host="127.0.0.1", port=8123)
    conn = resolve_connection(None, None, settings)
    assert (conn.url, conn.token) == ("http://127.0.0.1:8123", "ic_abc123")
    given = resolve_connection("http://api.example:9000/", "ic_given", settings)
    assert (given.url, given.token) == ("http://api.example:9000", "ic_given")
    assert resolve_connection(None, None, Settings(data_dir=tmp_path / "none")).token is None


def test_no_api_says_how_to_start_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(main, ["jobs", "--url", url, "--token", "x"])
    assert result.exit_code == 1
    assert result.output == f"Error: no API at {url}: start it with `make run`\n"


def test_env_variables_name_the_api(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(
        main, ["cancel", "7d7ad1f4-79fd-4c4f-9d37-6f8fa2b1f0a2"], env={"INFERCOST_URL": url}
    )
    assert result.exit_code == 1
    assert f"no API at {url}" in result.output


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("endpoint: sim-fixed\nload:\n  levels: [1, 8\n  mode: concurrency\n")
    result = CliRunner().invoke(main, ["submit", str(path), "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}: not valid YAML: ")
    assert "(line 4, column" in result.output
    assert "Traceback" not in result.output


def test_a_file_that_is_not_a_job_body(tmp_path: Path) -> None:
    listing = tmp_path / "job.json"
    listing.write_text("[1, 2]")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    runner = CliRunner()
    result = runner.invoke(main, ["submit", str(listing), "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "expected a mapping with endpoint (or endpoint_id), workload and load" in result.output
    result = runner.invoke(main, ["submit", str(empty), "--url", "http://127.0.0.1:9"])
    assert result.output == f"Error: {empty} is empty: it should hold the POST /v1/jobs body\n"
    missing = runner.invoke(main, ["submit", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1
    assert "cannot read" in missing.output


def test_a_job_id_must_be_an_id_or_an_id_prefix() -> None:
    result = CliRunner().invoke(main, ["report", "not-a-job", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "'not-a-job' is not a job id: give the whole id or at least its first 4" in (
        result.output
    )


def test_api_hints_name_the_commands_own_flags() -> None:
    from cli.client import command_flags, in_cli_words
    from cli.commands import jobs_submit, submit
    from cli.resources import estimate

    refused = (
        "endpoint 'a' failed its last check: no route. Fix it and check again, or send "
        '"force": true with the job to submit it anyway'
    )
    assert in_cli_words(refused, command_flags(jobs_submit)) == (
        "endpoint 'a' failed its last check: no route. Fix it and check again, or pass "
        "--force to submit it anyway"
    )
    mismatched = "benchmark this traffic's lengths, or set allow_mismatched_workload: true for x"
    assert in_cli_words(mismatched, command_flags(estimate)) == (
        "benchmark this traffic's lengths, or pass --allow-mismatched-workload for x"
    )
    invalid = "load.levels: 1.5 is not a whole number; load.warmup_requests: too many"
    assert in_cli_words(invalid, command_flags(jobs_submit)) == (
        "--levels: 1.5 is not a whole number; --warmup: too many"
    )
    # A field to send false: the option's negative form; the field heading the problem, its
    # option
    grammar = (
        "workload.ignore_eos: llama.cpp ... would break every stream off: send "
        '"ignore_eos": false with the job, and its answers end where their JSON does'
    )
    assert in_cli_words(grammar, command_flags(jobs_submit)) == (
        "--ignore-eos: llama.cpp ... would break every stream off: pass --no-ignore-eos, and "
        "its answers end where their JSON does"
    )
    # A command without such options keeps the API's words (the file holds the fields).
    assert in_cli_words(invalid, command_flags(submit)) == invalid
    assert in_cli_words(grammar, command_flags(submit)) == grammar
    assert in_cli_words(mismatched, {}) == mismatched
    # Routes a command does are named by the command; others stay routes.
    unknown = "unknown hardware 'x': GET /v1/hardware lists the catalog; add with POST /v1/hardware"
    assert in_cli_words(unknown, {}) == (
        "unknown hardware 'x': `infercost hardware list` lists the catalog; add with "
        "`infercost hardware add`"
    )
    check = "check again (POST /v1/endpoints/8b58/check, or GET /v1/endpoints/8b58)"
    assert in_cli_words(check, {}) == check


def test_the_feature_options_make_the_workload() -> None:
    from cli.commands import job_body, parse_images, parse_models

    body = job_body(
        "sim-fixed",
        mode="concurrency",
        levels=[1],
        input_tokens=64,
        output_tokens=16,
        features=["reasoning", "tools"],
        models=parse_models("base=3, lora-a"),
        images=parse_images("2x640x480"),
    )
    assert body["workload"] == {
        "features": ["reasoning", "tools"],
        "models": [{"name": "base", "weight": 3.0}, {"name": "lora-a", "weight": 1.0}],
        "images": {"count": 2, "width": 640, "height": 480},
        "input_tokens": {"mean": 64},
        "output_tokens": {"mean": 16},
    }
    # none given: the workload a job without features has always had
    plain = job_body("sim-fixed", mode="concurrency", levels=[1], input_tokens=8, output_tokens=8)
    assert plain["workload"] == {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 8}}
    result = CliRunner().invoke(
        main,
        ["jobs", "submit", "--endpoint", "x", "--images", "big", "--url", "http://127.0.0.1:9"],
    )
    assert result.exit_code == 2 and "COUNTxWIDTHxHEIGHT" in result.output


def test_a_replay_carries_the_request_features() -> None:
    """`jobs submit --trace` with --feature, --models and --images sends them with the
    trace's requests (the worker gives a replay's requests the workload's features)."""
    from cli.commands import parse_images, parse_models, trace_body

    body = trace_body(
        "sim-fixed",
        "6f0c2d2e-8a41-4d5b-9b0e-2f1a3c4d5e6f",
        time_scale=10,
        features=["reasoning", "tools"],
        models=parse_models("base=3, lora-a"),
        images=parse_images("1x512x512"),
    )
    assert body["workload"] == {
        "features": ["reasoning", "tools"],
        "models": [{"name": "base", "weight": 3.0}, {"name": "lora-a", "weight": 1.0}],
        "images": {"count": 1, "width": 512, "height": 512},
    }
    assert body["load"] == {
        "mode": "trace",
        "traffic_id": "6f0c2d2e-8a41-4d5b-9b0e-2f1a3c4d5e6f",
        "time_scale": 10,
    }
    plain = trace_body("sim-fixed", "6f0c2d2e-8a41-4d5b-9b0e-2f1a3c4d5e6f")
    assert plain["workload"] == {}


def test_runs_show_says_why_answers_were_invalid_and_what_to_raise() -> None:
    from cli.resources import _feature_rows

    summary = {
        "tools": {"calls": 10, "valid_calls": 9, "invalid": {"unknown_tool": 1}},
        "structured": {
            "answers": 20,
            "valid": 3,
            "invalid": {"cut_short": 13, "schema": 4},
            "plain": None,
            "plain_reason": "no plain run",
        },
    }
    rows = dict(_feature_rows(summary))
    assert rows["valid tool calls"] == "9 of 10 (1 unknown tool)"
    assert rows["valid JSON answers"] == (
        "3 of 20 (13 cut short, 4 schema: answers ended inside their JSON; raise --output-tokens)"
    )
