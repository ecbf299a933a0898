"""What a structured run without a plain twin tells its user to run: the command line's own
reading of that command must submit a job whose runs carry the twin's fingerprint (the
structured job's workload without `structured`, docs/figures.md), and land at the run's mode
and level. Checked for the workloads the command line can say; the others get the API
request. The reference is the CLI's parser and body builder and the plan resolver the API
runs, not the code that wrote the command."""

from __future__ import annotations

import re
import shlex
import uuid
from typing import Any

import msgspec
import pytest

from api.domain.jobs.schemas import JobCreate
from api.domain.jobs.twins import ratio, what_to_run
from cli.commands import (
    job_body,
    jobs_submit,
    parse_images,
    parse_levels,
    parse_models,
    trace_body,
)
from infercost.jobs.models import Job, Run
from infercost.jobs.plan import resolve_plan
from infercost.planning.presets import get_preset
from infercost.workload.fingerprint import job_fingerprint, without_feature

ENDPOINT = "my endpoint"  # a name with a space: the command quotes it


def stored(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workload and load a job row stores for a POST /v1/jobs body (as JobService.plan)."""
    data = msgspec.convert({"endpoint_id": str(uuid.uuid4()), **body}, JobCreate)
    plan = resolve_plan(
        msgspec.to_builtins(data.workload),
        msgspec.to_builtins(data.load),
        None,
        preset=None if data.workload.preset is None else get_preset(data.workload.preset),
        max_concurrency=256,
        seed=7,
    )
    encoded = plan.encode()
    return encoded["workload"], encoded["load"]


def submitted_by(command: str) -> dict[str, Any]:
    """The body `infercost jobs submit ...` sends, as the CLI parses and builds it."""
    argv = shlex.split(command)
    assert argv[:3] == ["infercost", "jobs", "submit"], command
    params = jobs_submit.make_context("submit", argv[3:]).params
    assert params["endpoint"] == ENDPOINT
    return job_body(
        ENDPOINT,
        mode=params["mode"],
        levels=parse_levels(params["levels"]),
        input_tokens=params["input_tokens"],
        output_tokens=params["output_tokens"],
        preset=params["preset"],
        requests_per_level=params["requests_per_level"],
        duration_s=params["duration_s"],
        warmup=params["warmup"],
        max_concurrency=params["max_concurrency"],
        features=list(params["features"]),
        models=None if params["models"] is None else parse_models(params["models"]),
        images=None if params["images"] is None else parse_images(params["images"]),
        ignore_eos=params["ignore_eos"],
    )


CASES = {
    "lengths": ({"input_tokens": {"mean": 64}, "output_tokens": {"mean": 48}}, {}),
    "preset": ({"preset": "interactive-chatbot"}, {"warmup_requests": 2}),
    "features, models and images": (
        {
            "input_tokens": {"mean": 64},
            "output_tokens": {"mean": 48},
            "features": ["reasoning", "structured", "image"],
            "models": [{"name": "base", "weight": 3}, {"name": "lora-a", "weight": 1}],
            "images": {"count": 2, "width": 640, "height": 480},
        },
        {"duration_s": 30},
    ),
    # Weights and a rate that six digits do not say exactly still give the twin's fingerprint
    "weights of many digits": (
        {
            "input_tokens": {"mean": 64},
            "output_tokens": {"mean": 48},
            "models": [{"name": "base", "weight": 0.3333333}, {"name": "lora-a", "weight": 1}],
        },
        {},
    ),
    # What a structured job against llama.cpp must send: answers end where their JSON does.
    "answers of their own length": (
        {"input_tokens": {"mean": 64}, "output_tokens": {"mean": 48}, "ignore_eos": False},
        {},
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_command_submits_the_twins_workload_at_the_runs_level(case: str) -> None:
    workload, load = CASES[case]
    features = workload.get("features", ["structured"])
    body = {
        "workload": {**workload, "features": features},
        "load": {"mode": "rate", "levels": [2, 4.5], "requests_per_level": 40, **load},
    }
    if "duration_s" in load:
        del body["load"]["requests_per_level"]
    job_workload, job_load = stored(body)
    job = Job(id=uuid.uuid4(), workload=job_workload, load=job_load)
    run = Run(mode="rate", level=4.5)
    told = what_to_run(job, run, ENDPOINT)
    command = re.fullmatch(r"`(.+)`", told)
    assert command, told
    sent = submitted_by(command[1])
    assert "structured" not in sent["workload"].get("features", [])
    assert sent["load"]["mode"] == "rate" and sent["load"]["levels"] == [4.5]
    plain_workload, _ = stored({"workload": sent["workload"], "load": sent["load"]})
    twin = job_fingerprint(without_feature(job_workload, "structured"), api="openai-chat")
    assert job_fingerprint(plain_workload, api="openai-chat") == twin
    # ... and not the structured run's own
    assert twin != job_fingerprint(job_workload, api="openai-chat")


def test_a_replay_is_told_to_replay_the_same_window_at_the_same_speed() -> None:
    traffic_id = str(uuid.uuid4())
    window = {"start_s": 600.0, "duration_s": 300.0}
    load = {"mode": "trace", "traffic_id": traffic_id, "time_scale": 10.0, "window": window}
    job_workload, job_load = stored({"workload": {"features": ["structured"]}, "load": load})
    job = Job(id=uuid.uuid4(), workload=job_workload, load=job_load)
    told = what_to_run(job, Run(mode="trace", level=12.5), ENDPOINT)
    command = re.fullmatch(r"`(.+)`", told)
    assert command, told
    params = jobs_submit.make_context("submit", shlex.split(command[1])[3:]).params
    sent = trace_body(
        params["endpoint"],
        params["trace"],
        time_scale=params["time_scale"],
        window_start=params["window_start"],
        window_duration=params["window_duration"],
        features=list(params["features"]),
    )
    assert sent["load"]["traffic_id"] == traffic_id
    plain_workload, plain_load = stored({"workload": sent["workload"], "load": sent["load"]})
    # The log's content hash stands for what GET /v1/traffic/{id} holds.
    twin = job_fingerprint(
        without_feature(job_workload, "structured"),
        api="openai-chat",
        trace_sha256="c0ffee",
        load=job_load,
    )
    assert (
        job_fingerprint(plain_workload, api="openai-chat", trace_sha256="c0ffee", load=plain_load)
        == twin
    )


def test_a_workload_the_command_line_cannot_say_gets_the_api_request() -> None:
    body = {
        "workload": {
            "input_tokens": {"mean": 64, "std": 8},
            "output_tokens": {"mean": 48},
            "features": ["tools", "structured"],
        },
        "load": {"mode": "concurrency", "levels": [4]},
    }
    job_workload, job_load = stored(body)
    job = Job(id=uuid.uuid4(), workload=job_workload, load=job_load)
    told = what_to_run(job, Run(mode="concurrency", level=4.0), ENDPOINT)
    assert told == (
        f"POST /v1/jobs with job {job.id}'s workload and load (GET /v1/jobs/{job.id}) and "
        'workload.features ["tools"]'
    )


def test_a_ratio_needs_both_figures_and_a_plain_one_above_zero() -> None:
    assert ratio(30.0, 10.0) == 3.0
    assert ratio(None, 10.0) is None
    assert ratio(30.0, None) is None
    assert ratio(30.0, 0.0) is None
