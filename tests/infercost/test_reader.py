"""The stream reader's brief decode (what judges an event, the rest left raw until it carries a
figure) against its full decode of every event: the llama.cpp captures and a stream of every
simulator engine profile, cut into reads at many places, must give identical samples.

The streams are real bytes: captured from llama-server (tests/fixtures/engines, the shared
captures) and served by the simulator over HTTP on loopback."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, get_args

import httpx
import msgspec
import pytest

from infercost.engines.reader import RawRequest, RequestFailure, StreamReader
from sim.app import SimApp
from sim.config import SimConfig, SimEngine
from tests.asgi import serve_in_loop
from tests.engine_fixtures import REPO_FIXTURES, shared_llama_server

CAPTURES = [
    *sorted((REPO_FIXTURES / "llamacpp").glob("*.sse")),
    *sorted(shared_llama_server().glob("*.sse")),
]


def observed(body: bytes, cuts: list[int], *, decode_all: bool) -> dict[str, Any]:
    """Everything a request records from `body` read in pieces cut at `cuts`, the n-th piece
    stamped n."""
    rec = RawRequest(0, False, 0, 3, keep_text=False)
    reader = StreamReader(rec, decode_all=decode_all)
    failure: tuple[str, str] | None = None
    bounds = [0, *cuts, len(body)]
    try:
        for stamp, (a, b) in enumerate(itertools.pairwise(bounds), start=1):
            reader.feed(body[a:b], stamp)
        reader.finish(len(bounds))
    except RequestFailure as exc:
        failure = (exc.error_class, exc.reason)
    return {
        "chunk_ns": list(rec.chunk_ns),
        "chunk_tokens": list(rec.chunk_tokens),
        "t_first_byte": rec.t_first_byte,
        "t_content": rec.t_content,
        "t_end": rec.t_end,
        "finished": rec.finished,
        "n_out": rec.n_out,
        "n_in": rec.n_in,
        "count_source": rec.count_source,
        "cached": rec.cached_tokens,
        "server": rec.server,
        "reasoning_events": rec.reasoning_events,
        "n_reasoning": rec.n_reasoning,
        "failure": failure,
    }


def cut_sets(body: bytes) -> list[list[int]]:
    """Reads of the whole body, of each event, of 7 bytes, and cut at every third line end."""
    ends = [i + 1 for i in range(len(body)) if body[i : i + 1] == b"\n"]
    return [[], ends[1::2], list(range(7, len(body), 7)), ends[::3]]


def assert_identical(body: bytes) -> dict[str, Any]:
    """Both decodes agree on every cut of `body`; the whole-body observation."""
    for cuts in cut_sets(body):
        brief = observed(body, cuts, decode_all=False)
        full = observed(body, cuts, decode_all=True)
        assert brief == full, cuts
    return observed(body, [], decode_all=False)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_llamacpp_captures_read_the_same_both_ways(path: Path) -> None:
    seen = assert_identical(path.read_bytes())
    assert seen["chunk_ns"]
    if path.name.startswith("error-"):
        # A stream the server broke off with an error event (its README says which).
        assert seen["failure"] is not None
        assert seen["failure"][0] == "protocol"
        return
    assert seen["failure"] is None
    assert seen["server"] is not None  # llama.cpp's timings, decoded from the raw bytes


PROFILES = list(get_args(SimEngine))


@pytest.mark.parametrize("engine", PROFILES)
@pytest.mark.parametrize("continuous", [False, True])
async def test_every_simulator_profile_reads_the_same_both_ways(
    engine: SimEngine, continuous: bool
) -> None:
    config = SimConfig.for_engine(engine, port=0, ttft_ms=0.0, itl_ms=0.0, model="m")
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "one two three"}],
        "max_tokens": 6,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": continuous},
    }
    if engine == "transformers":
        del body["stream_options"]  # it takes none of this; its usage comes anyway
        body["generation_config"] = '{"min_new_tokens":6,"max_new_tokens":6}'
    async with serve_in_loop(SimApp(config)) as url, httpx.AsyncClient() as client:
        answer = await client.post(f"{url}/v1/chat/completions", content=msgspec.json.encode(body))
    assert answer.status_code == 200, answer.text
    seen = assert_identical(answer.content)
    assert seen["failure"] is None
    # The simulator's ground truth: 6 tokens, one a content event, 3 prompt words.
    assert len(seen["chunk_ns"]) == 6
    assert (seen["n_out"], seen["n_in"], seen["count_source"]) == (6, 3, "usage")
    if continuous and engine in ("default", "vllm", "sglang", "llamacpp", "tgi"):
        # usage on every event (the simulator honours it under usage "requested")
        assert seen["chunk_tokens"] == [1] * 6


@pytest.mark.parametrize("engine", ["default", "vllm", "sglang", "llamacpp"])
@pytest.mark.parametrize("continuous", [False, True])
async def test_reasoning_is_counted_apart_from_the_answer(
    engine: SimEngine, continuous: bool
) -> None:
    """A reasoning model's stream (each profile's own field: reasoning_content or reasoning):
    its reasoning events and usage's reasoning_tokens where the engine reports them, both
    decodes alike, and the request's figures equal what the simulator sent (4 of 10)."""
    config = SimConfig.for_engine(
        engine, port=0, ttft_ms=0.0, itl_ms=0.0, model="m", reasoning_tokens=4
    )
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "one two three"}],
        "max_tokens": 10,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": continuous},
    }
    async with serve_in_loop(SimApp(config)) as url, httpx.AsyncClient() as client:
        answer = await client.post(f"{url}/v1/chat/completions", content=msgspec.json.encode(body))
    field = b'"reasoning_content"' if engine != "default" else b'"reasoning"'
    assert answer.content.count(field) == 4
    seen = assert_identical(answer.content)
    assert seen["failure"] is None
    assert seen["reasoning_events"] == 4
    # Only the OpenAI-style profile counts reasoning in usage
    assert seen["n_reasoning"] == (4 if engine == "default" else None)
    # Reads stamped one per event: the first reasoning at read 1, the answer at read 5
    rec = RawRequest(0, False, 0, 3)
    reader = StreamReader(rec)
    ends = [i + 2 for i in range(len(answer.content)) if answer.content[i : i + 2] == b"\n\n"]
    for stamp, (a, b) in enumerate(itertools.pairwise([0, *ends]), start=1):
        reader.feed(answer.content[a:b], stamp)
    reader.finish(len(ends) + 1)
    timing = rec.timing(0)
    role = 1 if config.role_chunk in ("arrival", "separate") else 0
    assert timing.n_reasoning == 4 and timing.n_answer == 6
    assert timing.reasoning_source == ("usage" if engine == "default" else "events")
    assert timing.t_first_reasoning == pytest.approx((1 + role) * 1e-9)
    assert timing.t_first_content == pytest.approx((5 + role) * 1e-9)


async def test_llamacpp_reasoning_left_in_content_is_no_reasoning() -> None:
    """llama.cpp asked for reasoning_format "none" leaves the thinking in content, between
    think tags: a client can no longer tell it apart (the default puts it in
    reasoning_content)."""
    config = SimConfig.for_engine(
        "llamacpp", port=0, ttft_ms=0.0, itl_ms=0.0, model="m", reasoning_tokens=3
    )
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "one two three"}],
        "max_tokens": 6,
        "stream": True,
        "reasoning_format": "none",
    }
    async with serve_in_loop(SimApp(config)) as url, httpx.AsyncClient() as client:
        inline = await client.post(f"{url}/v1/chat/completions", content=msgspec.json.encode(body))
        del body["reasoning_format"]
        apart = await client.post(f"{url}/v1/chat/completions", content=msgspec.json.encode(body))
        whole = await client.post(
            f"{url}/v1/chat/completions", content=msgspec.json.encode({**body, "stream": False})
        )
    seen = assert_identical(inline.content)
    assert (len(seen["chunk_ns"]), seen["reasoning_events"]) == (6, 0)
    assert b"<think> the" in inline.content and b"says</think>" in inline.content
    assert assert_identical(apart.content)["reasoning_events"] == 3
    assert whole.json()["choices"][0]["message"]["reasoning_content"] == " the sim says"
