"""Jobs with request features (workload.features) against the simulator told what to send:
the figures a job reports equal what the simulator sent.

- reasoning: the first R tokens of every answer are reasoning text, in the field each engine
  uses (vLLM's reasoning_content, the OpenAI-style reasoning), counted in usage where the
  engine counts them; the job reports R reasoning and N - R answer tokens per request, the
  first reasoning token at the simulator's TTFT and the first answer token R inter-token
  gaps later.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import TeamClient
from tests.truth import judge, read_record, recording_sim

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

TTFT_MS, ITL_MS = 40.0, 8.0
OUT, REASONING = 12, 5


@pytest.fixture(scope="module", params=["default", "vllm"])
def thinker(request: pytest.FixtureRequest) -> Iterator[tuple[str, SimProcess]]:
    """A reasoning model: OpenAI-style (`reasoning`, counted in usage) or vLLM
    (`reasoning_content`, not in usage)."""
    config = SimConfig.for_engine(
        request.param, port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, reasoning_tokens=REASONING
    )
    with recording_sim(config) as sim:
        yield request.param, sim


def job(endpoint: dict[str, Any], **workload: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": OUT}, **workload},
        "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 16},
    }


async def test_a_reasoning_job_counts_reasoning_and_answer_apart(
    team: TeamClient, thinker: tuple[str, SimProcess]
) -> None:
    engine, sim = thinker
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, engine=engine)
    done = await team.run_job(job(endpoint, features=["reasoning"]))
    assert done["workload"]["features"] == ["reasoning"]
    (run,) = done["runs"]
    assert run["requests"]["succeeded"] == 16
    block = run["reasoning"]
    assert block["source"] == ("usage" if engine == "default" else "events")
    assert block["requests_with_reasoning"] == 16
    assert block["reasoning_tokens"]["min"] == block["reasoning_tokens"]["max"] == REASONING
    assert block["answer_tokens"]["min"] == block["answer_tokens"]["max"] == OUT - REASONING
    assert block["reasoning_share"] == pytest.approx(REASONING / OUT)
    # the two rates split output tokens/s by that share, and are the run's columns too
    out = run["output_tokens_per_s"]
    assert run["reasoning_tokens_per_s"] == pytest.approx(out * REASONING / OUT)
    assert run["answer_tokens_per_s"] == pytest.approx(out * (OUT - REASONING) / OUT)
    assert run["ttfr_ms"]["count"] == run["ttfo_ms"]["count"] == 16
    assert run["ttft_ms"]["p50"] == pytest.approx(run["ttfr_ms"]["p50"])
    # paying for reasoning: each answer token costs OUT / (OUT - REASONING) output tokens
    cost = run["cost"]
    assert cost["per_million_answer_tokens_usd"] == pytest.approx(
        cost["per_million_output_tokens_usd"] * OUT / (OUT - REASONING)
    )
    samples = sorted(await team.samples(run["id"]), key=lambda s: s["seq"])
    assert {s["n_reasoning"] for s in samples} == {REASONING}
    # Held against the simulator's own record of each request: its first write (reasoning)
    # and its write number REASONING (the first of the answer). The client reads each no
    # earlier than it was written, and the gap between them as the server wrote it.
    record = await read_record(sim)
    served = record.for_rows(samples)
    gaps = []
    for s, server in zip(samples, served, strict=True):
        assert s["ttfr_ms"] == pytest.approx(s["ttft_ms"])
        assert len(server.writes) == OUT
        assert s["ttfr_ms"] >= (server.writes[0] - server.arrival) * 1000.0
        server_gap = (server.writes[REASONING] - server.writes[0]) * 1000.0
        gaps.append(abs(s["ttfo_ms"] - s["ttfr_ms"] - server_gap))
    judge(max(gaps), record, f"time from first reasoning to first answer off by {max(gaps):.1f} ms")


async def test_a_plain_job_has_no_reasoning_block(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    done = await team.run_job(job(endpoint))
    (run,) = done["runs"]
    assert done["workload"]["features"] == []
    assert run["reasoning"] is None and run["answer_tokens_per_s"] is None
    assert run["ttfr_ms"]["count"] == 0
    assert run["cost"]["per_million_answer_tokens_usd"] is None


MODELS = {"sim-model": (40.0, 8.0), "lora-fast": (20.0, 4.0), "lora-slow": (80.0, 16.0)}


@pytest.fixture(scope="module")
def adapters() -> Iterator[SimProcess]:
    """One endpoint serving a base model and two adapters, each at its own speed."""
    config = SimConfig.serving(MODELS, port=0)
    with sim_process(config) as sim:
        yield sim


async def test_a_three_model_job_reports_each_model_and_they_sum_to_the_run(
    team: TeamClient, adapters: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=adapters.openai_base_url, usd_per_hour=3.0)
    weights = [
        {"name": "sim-model", "weight": 2},
        {"name": "lora-fast", "weight": 1},
        {"name": "lora-slow", "weight": 1},
    ]
    body = job(endpoint, models=weights, seed=7)
    body["load"] = {"mode": "concurrency", "levels": [4], "requests_per_level": 40}
    done = await team.run_job(body)
    (run,) = done["runs"]
    models = {m["model"]: m for m in run["models"]}
    assert set(models) == set(MODELS)
    # Counts and rates of the models add up to the run's
    for key in ("total", "succeeded", "failed"):
        assert sum(m["requests"][key] for m in models.values()) == run["requests"][key]
    for key in ("output_tokens_per_s", "input_tokens_per_s", "requests_per_s"):
        assert sum(m[key] for m in models.values()) == pytest.approx(run[key], rel=1e-9)
    assert sum(m["token_share"] for m in models.values()) == pytest.approx(1.0)
    assert sum(m["cost"]["usd_per_hour"] for m in models.values()) == pytest.approx(3.0)
    # Each request went to the model the samples say, and the model's speed shows: no first
    # token before that model's TTFT, and the models' TTFT in the order of their speeds
    samples = await team.samples(run["id"])
    by_model: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        by_model.setdefault(s["model"], []).append(s)
    assert {name: len(rows) for name, rows in by_model.items()} == {
        name: m["requests"]["total"] for name, m in models.items()
    }
    for name, rows in by_model.items():
        assert min(s["ttft_ms"] for s in rows) >= MODELS[name][0]
        assert models[name]["ttft_ms"]["count"] == len(rows)
    p50 = {name: m["ttft_ms"]["p50"] for name, m in models.items()}
    assert p50["lora-fast"] < p50["sim-model"] < p50["lora-slow"]
    # Drawn by weight: about half to the base model (40 requests: 20 expected, 12 to 28)
    assert 12 <= models["sim-model"]["requests"]["total"] <= 28
    # The same seed sends every request to the same model again
    again = await team.run_job(body)
    (rerun,) = again["runs"]
    first = {s["seq"]: s["model"] for s in samples}
    assert {s["seq"]: s["model"] for s in await team.samples(rerun["id"])} == first


async def test_comparisons_and_history_split_runs_by_model(
    team: TeamClient, adapters: SimProcess
) -> None:
    """split=model: a row (and a history series) per model the requests asked for, with
    that model's figures from each run's own `models` block; a run of one model keeps its
    figures under the deployment's model."""
    endpoint = await team.create_endpoint(base_url=adapters.openai_base_url, usd_per_hour=3.0)
    weights = [{"name": n, "weight": 1} for n in MODELS]
    body = job(endpoint, models=weights, seed=11)
    runs = [(await team.run_job(body))["runs"][0] for _ in range(2)]
    plain = (await team.run_job(job(endpoint)))["runs"][0]
    blocks = [{m["model"]: m for m in run["models"]} for run in runs]

    page = (
        await team.http.get(
            "/v1/comparisons",
            # Client-bound runs too: a busy machine may flag one, and the rows' sources are
            # what is checked here.
            params={
                "endpoint_id": endpoint["id"],
                "split": "model",
                "limit": 500,
                "include_client_bound": "true",
            },
        )
    ).json()
    assert page["split"] == "model"
    rows = {(r["workload_fingerprint"], r["served_model"]): r for r in page["items"]}
    mixed_fp, plain_fp = runs[0]["workload_fingerprint"], plain["workload_fingerprint"]
    assert set(rows) == {(mixed_fp, name) for name in MODELS} | {(plain_fp, "sim-model")}
    for name in MODELS:
        row = rows[(mixed_fp, name)]
        assert row["deployment"]["model"] == "sim-model"  # the endpoint's, as measured
        assert sorted(row["run_ids"]) == sorted(r["id"] for r in runs)
        mine = [b[name] for b in blocks]
        figures = row["figures"]
        # Two runs: each figure is the mean of the two (the median of two)
        for figure, value in (
            ("ttft_p50_ms", [m["ttft_ms"]["p50"] for m in mine]),
            ("tpot_p95_ms", [m["tpot_ms"]["p95"] for m in mine]),
            ("output_tokens_per_s", [m["output_tokens_per_s"] for m in mine]),
            ("requests_per_s", [m["requests_per_s"] for m in mine]),
            (
                "cost_per_million_output_tokens_usd",
                [m["cost"]["per_million_output_tokens_usd"] for m in mine],
            ),
        ):
            assert figures[figure] == pytest.approx(sum(value) / 2, rel=1e-9), figure
        assert figures["itl_p50_ms"] is None  # not measured per model
        # A model's percentiles rest on its own requests (here about 5 a run): too few
        (few,) = [r for r in row["inadequate"] if r["code"] == "few_requests"]
        assert f"of model {name} in run" in few["detail"]
        assert row["adequate"] is False
    # The plain run's row is that run's own figures
    assert rows[(plain_fp, "sim-model")]["figures"]["ttft_p50_ms"] == pytest.approx(
        plain["ttft_ms"]["p50"]
    )
    # Without split: one row per workload, the runs' own figures
    whole = (
        await team.http.get(
            "/v1/comparisons",
            params={"endpoint_id": endpoint["id"], "include_client_bound": "true"},
        )
    ).json()
    assert whole["split"] is None
    assert {r["served_model"] for r in whole["items"]} == {None}
    assert len(whole["items"]) == 2
    # model= picks the adapter's rows; latest: the newer run's figures; CSV names the model
    latest = (
        await team.http.get(
            "/v1/comparisons",
            params={
                "endpoint_id": endpoint["id"],
                "split": "model",
                "model": "lora-slow",
                "aggregate": "latest",
                "include_client_bound": "true",
            },
        )
    ).json()
    (only,) = latest["items"]
    assert only["served_model"] == "lora-slow"
    assert only["figures"]["e2e_p50_ms"] == pytest.approx(blocks[1]["lora-slow"]["e2e_ms"]["p50"])
    csv = await team.http.get(
        "/v1/comparisons",
        params={
            "endpoint_id": endpoint["id"],
            "split": "model",
            "model": "lora-fast",
            "include_client_bound": "true",
        },
        headers={"Accept": "text/csv"},
    )
    header, line = csv.text.splitlines()[:2]
    assert header.split(",")[:2] == ["model", "served_model"]
    assert line.split(",")[:2] == ["sim-model", "lora-fast"]

    history = (
        await team.http.get(
            f"/v1/endpoints/{endpoint['id']}/history",
            params={"split": "model", "workload_fingerprint": mixed_fp},
        )
    ).json()
    series = {s["model"]: s for s in history["series"]}
    assert set(series) == set(MODELS)
    for name, s in series.items():
        assert [p["run_id"] for p in s["points"]] == [r["id"] for r in runs]
        assert [p["ttft_p95_ms"] for p in s["points"]] == pytest.approx(
            [b[name]["ttft_ms"]["p95"] for b in blocks]
        )
        assert [p["change"] for p in s["points"]] == [None, None]
    one = (
        await team.http.get(
            f"/v1/endpoints/{endpoint['id']}/history",
            params={"split": "model", "model": "lora-fast"},
        )
    ).json()
    assert [s["model"] for s in one["series"]] == ["lora-fast"]
    refused = await team.http.get(
        f"/v1/endpoints/{endpoint['id']}/history", params={"model": "lora-fast"}
    )
    assert refused.status_code == 422
    assert "split=model" in refused.json()["detail"]


async def test_a_model_named_twice_is_refused(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    twice = [{"name": "sim-model", "weight": 1}, {"name": "sim-model", "weight": 2}]
    answer = await team.submit(job(endpoint, models=twice))
    assert answer.status_code == 422, answer.text
    assert "named twice" in answer.json()["detail"]


@pytest.fixture(scope="module")
def sloppy() -> Iterator[SimProcess]:
    """A reasoning model (vLLM's stream) that breaks exactly a quarter of its tool calls and
    of its JSON answers."""
    config = SimConfig.for_engine(
        "vllm",
        port=0,
        ttft_ms=5.0,
        itl_ms=1.0,
        reasoning_tokens=3,
        tool_call_invalid_share=0.25,
        structured_invalid_share=0.25,
    )
    with sim_process(config) as sim:
        yield sim


def feature_job(endpoint: dict[str, Any], features: list[str]) -> dict[str, Any]:
    body = job(endpoint, features=features)
    body["workload"]["output_tokens"] = {"mean": 48}
    body["load"] = {"mode": "concurrency", "levels": [4], "requests_per_level": 40}
    return body


async def test_tool_calls_are_judged_valid_against_their_schema(
    team: TeamClient, sim: SimProcess, sloppy: SimProcess
) -> None:
    # The polite simulator: every call names an offered tool with arguments of its schema
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    done = await team.run_job(feature_job(endpoint, ["tools"]))
    (run,) = done["runs"]
    tools = run["tools"]
    assert tools == {
        "requests": 40,
        "calls": 40,
        "valid_calls": 40,
        "valid_share": 1.0,
        "requests_without_call": 0,
        "invalid": {},
    }
    assert run["tool_calls_valid_share"] == 1.0
    # Tool-call deltas are output: every token of the answer counted and timed
    assert run["ttft_ms"]["count"] == 40
    samples = await team.samples(run["id"])
    assert {(s["n_out"], s["tool_calls"], s["tool_calls_valid"]) for s in samples} == {(48, 1, 1)}

    # One that cuts a quarter of its calls short, and reasons first (features combine)
    endpoint = await team.create_endpoint(base_url=sloppy.openai_base_url, engine="vllm")
    done = await team.run_job(feature_job(endpoint, ["reasoning", "tools"]))
    (run,) = done["runs"]
    tools = run["tools"]
    assert (tools["calls"], tools["valid_calls"], tools["invalid"]) == (40, 30, {"cut_short": 10})
    assert run["tool_calls_valid_share"] == 0.75
    assert run["reasoning"]["reasoning_tokens"]["max"] == 3
    assert run["reasoning"]["answer_tokens"]["min"] == 45
    samples = await team.samples(run["id"])
    assert sum(1 for s in samples if s["invalid_reasons"] == ["cut_short"]) == 10


async def test_structured_answers_are_judged_valid_against_the_schema(
    team: TeamClient, sim: SimProcess, sloppy: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    done = await team.run_job(feature_job(endpoint, ["structured"]))
    (run,) = done["runs"]
    block = run["structured"]
    # No plain run on this endpoint yet: its twin is none (tests/integration/test_structured_plain.py)
    assert block.pop("plain") is None and "without the structured feature" in block.pop(
        "plain_reason"
    )
    assert block == {"answers": 40, "valid": 40, "valid_share": 1.0, "invalid": {}}
    assert run["structured_valid_share"] == 1.0
    assert run["tools"] is None

    endpoint = await team.create_endpoint(base_url=sloppy.openai_base_url, engine="vllm")
    done = await team.run_job(feature_job(endpoint, ["structured"]))
    (run,) = done["runs"]
    assert {k: v for k, v in run["structured"].items() if not k.startswith("plain")} == {
        "answers": 40,
        "valid": 30,
        "valid_share": 0.75,
        "invalid": {"cut_short": 10},
    }
    samples = await team.samples(run["id"])
    assert sorted(s["structured_valid"] for s in samples) == [False] * 10 + [True] * 30


async def test_an_image_job_reports_image_tokens_and_their_prefill(team: TeamClient) -> None:
    """Two 300 x 200 images a request: the simulator counts ceil(300/28) x ceil(200/28) =
    11 x 8 = 88 tokens each and spends 30 ms per image before the first token (fixed mode,
    TTFT 10 ms): no first token before 70 ms, and 176 image tokens of every prompt."""
    config = SimConfig(port=0, ttft_ms=10.0, itl_ms=2.0, image_prefill_ms=30.0)
    with sim_process(config) as sim:
        endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
        body = job(endpoint, features=["image"], images={"count": 2, "width": 300, "height": 200})
        done = await team.run_job(body)
        plain = await team.run_job(job(endpoint))
    (run,) = done["runs"]
    image = run["image"]
    assert (image["requests"], image["images"], image["requests_reporting_tokens"]) == (16, 32, 16)
    assert image["image_tokens"]["min"] == image["image_tokens"]["max"] == 176
    samples = await team.samples(run["id"])
    assert {(s["images"], s["image_tokens"]) for s in samples} == {(2, 176)}
    # the prompt's text is 32 tokens (one a word, as the simulator counts), the rest images
    assert {s["n_in"] - s["image_tokens"] for s in samples} == {32}
    assert image["image_token_share"] == pytest.approx(176 / (176 + 32))
    # Image prefill: no first token before TTFT + 2 x 30 ms (the simulator's own schedule);
    # the same lengths without images carry no image block
    assert min(s["ttft_ms"] for s in samples) >= 70.0
    assert image["ttft_ms"]["count"] == 16 and image["ttft_ms"]["min"] >= 70.0
    (text_only,) = plain["runs"]
    assert text_only["image"] is None


async def test_images_without_the_feature_are_refused(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    answer = await team.submit(job(endpoint, images={"count": 1}))
    assert answer.status_code == 422, answer.text
    assert "image feature" in answer.json()["detail"]


async def test_dataset_items_carry_their_own_tools_schema_and_images(
    team: TeamClient, sim: SimProcess
) -> None:
    """Each item's own request features go with it and judge its answer: a tool that the
    simulator's arguments (a string where an integer is asked for) fail, a schema its JSON
    fits, an image by URL (the simulator counts an image it cannot read as 512 x 512)."""
    strict = {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
            },
        },
    }
    picky = {
        "type": "function",
        "function": {
            "name": "count",
            "parameters": {
                "type": "object",
                "properties": {"n": {"type": "string", "enum": ["one"]}},
                "required": ["n", "missing"],
            },
        },
    }
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    user = [{"role": "user", "content": "hello there"}]
    rows = [
        {"messages": user, "max_tokens": 24, "tools": [strict], "tool_choice": "required"},
        {"messages": user, "max_tokens": 24, "tools": [picky], "tool_choice": "required"},
        {
            "messages": user,
            "max_tokens": 24,
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
        },
        {"messages": user, "max_tokens": 24, "images": ["https://img.example/cat.png"]},
    ]
    body = "\n".join(json.dumps(row) for row in rows).encode()
    response = await team.http.post(
        "/v1/datasets", content=body, headers={"Content-Type": "application/x-ndjson"}
    )
    assert response.status_code == 201, response.text
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    done = await team.run_job(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"dataset_id": response.json()["id"]},
            "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 8},
        }
    )
    (run,) = done["runs"]
    # Each item twice: its own tool judged by its own schema ("lookup" fits; "count" lacks
    # "missing", which the simulator cannot make up), its JSON answer valid
    assert run["tools"]["calls"] == 4 and run["tools"]["valid_calls"] == 2
    assert run["tools"]["invalid"] == {"schema": 2}
    block = run["structured"]
    # Its items asked for JSON themselves: the workload has no plain twin to show
    assert block.pop("plain") is None and "dataset items" in block.pop("plain_reason")
    assert block == {"answers": 2, "valid": 2, "valid_share": 1.0, "invalid": {}}
    samples = await team.samples(run["id"])
    # 2 words of text and one image of 512 x 512 (19 x 19 = 361 tokens) in the image item
    assert sorted(s["n_in"] for s in samples).count(2 + 361) == 2


async def test_chat_features_need_a_chat_endpoint(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, api="openai-completions")
    answer = await team.submit(job(endpoint, features=["tools"]))
    assert answer.status_code == 422, answer.text
    assert "needs chat requests" in answer.json()["detail"]
    # reasoning streams on completions too
    accepted = await team.submit(job(endpoint, features=["reasoning"]))
    assert accepted.status_code == 202, accepted.text
    await team.http.post(f"/v1/jobs/{accepted.json()['id']}/cancel")


async def test_structured_output_on_llamacpp_needs_answers_of_their_own_length(
    team: TeamClient,
) -> None:
    """llama.cpp breaks a grammar-bound answer off under ignore_eos (the captured
    error-json-schema-ignore-eos.sse): such a job is refused before it runs, saying what to
    send; without ignore_eos it runs."""
    config = SimConfig.for_engine("llamacpp", port=0, ttft_ms=5.0, itl_ms=1.0)
    with sim_process(config) as llama:
        endpoint = await team.create_endpoint(base_url=llama.openai_base_url, engine="llamacpp")
        for features in (["structured"], ["reasoning", "tools"]):
            answer = await team.submit(job(endpoint, features=features))
            assert answer.status_code == 422, answer.text
            problem = answer.json()
            assert problem["errors"][0]["field"] == "workload.ignore_eos", problem
            assert 'send "ignore_eos": false with the job' in problem["detail"]
        # ... and so is a dataset whose items ask for JSON answers of their own
        user = [{"role": "user", "content": "hello there"}]
        rows = [
            {"messages": user, "max_tokens": 24},
            {"messages": user, "max_tokens": 24, "response_format": {"type": "json_object"}},
        ]
        uploaded = await team.http.post(
            "/v1/datasets",
            content="\n".join(json.dumps(row) for row in rows).encode(),
            headers={"Content-Type": "application/x-ndjson"},
        )
        assert uploaded.status_code == 201, uploaded.text
        items = {
            "endpoint_id": endpoint["id"],
            "workload": {"dataset_id": uploaded.json()["id"]},
            "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 2},
        }
        answer = await team.submit(items)
        assert answer.status_code == 422, answer.text
        assert "a structured answer only at its end" in answer.json()["detail"]
        items["workload"]["ignore_eos"] = False
        accepted = await team.submit(items)
        assert accepted.status_code == 202, accepted.text
        await team.http.post(f"/v1/jobs/{accepted.json()['id']}/cancel")
        body = job(endpoint, features=["structured"], ignore_eos=False)
        done = await team.run_job(body)
        assert done["workload"]["ignore_eos"] is False
        (run,) = done["runs"]
        assert run["requests"]["succeeded"] == 16
        assert run["structured"]["valid_share"] == 1.0
