"""Real engines' behaviours in the simulator (--engine and its switches), over real TCP.

Shapes are checked against the llama-server captures in shared/fixtures/llama-server, token
and cache figures against hand-computed values, times against the simulator's own schedule
(its reported `timings`), never against the wall clock.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sim.app import SimApp
from sim.config import SimConfig
from sim.gpu import GpuEngine, GpuRequest
from sim.process import wait_for_startup_line
from sim.server import SimServer
from tests.engine_fixtures import shared_llama_server

FIXTURES = shared_llama_server()
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
TTFT_MS = 40.0
ITL_MS = 8.0
# Ten prompt words; SHARED has the same first six and four others.
PROMPT = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"
SHARED = "w0 w1 w2 w3 w4 w5 x6 x7 x8 x9"


def fixture(name: str) -> bytes:
    path = FIXTURES / name
    assert path.is_file(), f"captured response {path} is missing (see shared/fixtures/README.md)"
    return path.read_bytes()


def sse(raw: bytes) -> list[tuple[str, Any]]:
    """(event type, JSON data or "DONE") of every event of an SSE body."""
    events: list[tuple[str, Any]] = []
    for block in raw.split(b"\n\n"):
        if not block.strip():
            continue
        kind, data = "message", b""
        for line in block.split(b"\n"):
            if line.startswith(b"event: "):
                kind = line[len(b"event: ") :].decode()
            elif line.startswith(b"data: "):
                data = line[len(b"data: ") :]
        events.append((kind, "DONE" if data == b"[DONE]" else json.loads(data)))
    return events


def data(raw: bytes) -> list[Any]:
    return [payload for _, payload in sse(raw)]


def shape(payload: Any) -> Any:
    """What a parser depends on: keys at each level, the role's content and finish_reason."""
    if payload == "DONE":
        return "DONE"
    out: dict[str, Any] = {"keys": sorted(payload)}
    choices = []
    for choice in payload["choices"]:
        delta = choice.get("delta")
        choices.append(
            (
                sorted(choice),
                sorted(delta) if delta is not None else None,
                "null content" if delta is not None and delta.get("content", "") is None else "",
                choice["finish_reason"],
            )
        )
    out["choices"] = choices
    if "usage" in payload:
        usage = payload["usage"]
        out["usage"] = (sorted(usage), sorted(usage.get("prompt_tokens_details", {})))
    if "timings" in payload:
        out["timings"] = sorted(payload["timings"])
    return out


def content_events(events: list[Any]) -> int:
    """Events that carry text (what a client times as tokens)."""
    count = 0
    for payload in events:
        if payload == "DONE" or not payload["choices"]:
            continue
        choice = payload["choices"][0]
        if (choice.get("delta") or {}).get("content") or choice.get("text"):
            count += 1
    return count


@asynccontextmanager
async def serve(config: SimConfig) -> AsyncIterator[tuple[SimServer, httpx.AsyncClient]]:
    async with (
        SimServer(config) as server,
        httpx.AsyncClient(base_url=server.base_url, timeout=10.0) as client,
    ):
        yield server, client


def chat_body(prompt: str, n: int, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "max_tokens": n, **extra}


STREAM_USAGE = {"stream": True, "stream_options": {"include_usage": True}}


def llamacpp(**overrides: Any) -> SimConfig:
    return SimConfig.for_engine(
        "llamacpp", **{"port": 0, "ttft_ms": TTFT_MS, "itl_ms": ITL_MS, **overrides}
    )


# ------------------------------------------------------------------ llama.cpp's stream shape


async def test_llamacpp_streams_have_the_captured_shapes() -> None:
    async with serve(llamacpp()) as (_, client):
        for name, path, extra in (
            ("chat-stream-usage.sse", CHAT, STREAM_USAGE),
            ("chat-stream-no-usage.sse", CHAT, {"stream": True}),
            ("completions-stream-usage.sse", COMPLETIONS, STREAM_USAGE),
        ):
            captured = data(fixture(name))
            n = content_events(captured)
            body = (
                chat_body(PROMPT, n, **extra)
                if path == CHAT
                else {"prompt": PROMPT, "max_tokens": n, **extra}
            )
            response = await client.post(path, json=body)
            assert response.status_code == 200
            ours = data(response.content)
            # Same events in the same order with the same keys: role (content null), n
            # content events, finish ("length"), usage and timings where llama-server puts
            # them, [DONE].
            assert [shape(e) for e in ours] == [shape(e) for e in captured], name


async def test_llamacpp_non_streamed_answer_has_the_captured_keys() -> None:
    captured = json.loads(fixture("chat-nostream.json"))
    async with serve(llamacpp()) as (_, client):
        ours = (await client.post(CHAT, json=chat_body(PROMPT, 5))).json()
    assert sorted(ours) == sorted(captured)
    assert sorted(ours["choices"][0]) == sorted(captured["choices"][0])
    assert sorted(ours["usage"]) == sorted(captured["usage"])
    assert sorted(ours["timings"]) == sorted(captured["timings"])


async def test_timings_and_cached_tokens_follow_the_prefix_cache() -> None:
    # Fixed mode: TTFT = ttft x uncached / prompt tokens; prompt_ms is that schedule.
    async with serve(llamacpp()) as (_, client):
        first = data((await client.post(CHAT, json=chat_body(PROMPT, 4, **STREAM_USAGE))).content)
        shared = data((await client.post(CHAT, json=chat_body(SHARED, 4, **STREAM_USAGE))).content)
        again = data((await client.post(CHAT, json=chat_body(PROMPT, 4, **STREAM_USAGE))).content)

    def usage_and_timings(events: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        last = events[-2]  # the choices: [] event before [DONE]
        assert last["choices"] == []
        return last["usage"], last["timings"]

    usage, timings = usage_and_timings(first)
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert (timings["cache_n"], timings["prompt_n"]) == (0, 10)
    assert timings["prompt_ms"] == pytest.approx(40.0)
    assert timings["prompt_per_token_ms"] == pytest.approx(4.0)
    assert timings["prompt_per_second"] == pytest.approx(250.0)
    # 4 tokens 8 ms apart: 24 ms from first to last, per token over the 3 gaps.
    assert timings["predicted_n"] == 4
    assert timings["predicted_ms"] == pytest.approx(24.0)
    assert timings["predicted_per_token_ms"] == pytest.approx(8.0)
    assert timings["predicted_per_second"] == pytest.approx(125.0)

    usage, timings = usage_and_timings(shared)
    assert usage["prompt_tokens"] == 10
    assert usage["prompt_tokens_details"] == {"cached_tokens": 6}
    assert (timings["cache_n"], timings["prompt_n"]) == (6, 4)
    assert timings["prompt_ms"] == pytest.approx(40.0 * 4 / 10)

    # The whole prompt seen before: all but the last token (always computed) is cached.
    usage, timings = usage_and_timings(again)
    assert usage["prompt_tokens_details"] == {"cached_tokens": 9}
    assert (timings["cache_n"], timings["prompt_n"]) == (9, 1)
    assert timings["prompt_ms"] == pytest.approx(40.0 / 10)


async def test_json_answers_go_at_the_structured_itl_and_others_at_the_itl() -> None:
    # llama.cpp's timings report the schedule: 5 tokens, 4 gaps of the gap the switch set.
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    json_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    async with serve(llamacpp(structured_itl_ms=20.0)) as (_, client):
        plain = (await client.post(CHAT, json=chat_body(PROMPT, 5))).json()
        other = " ".join(f"v{i}" for i in range(10))  # no prefix cached: the whole TTFT
        guided = await client.post(CHAT, json=chat_body(other, 5, response_format=json_format))
    assert plain["timings"]["predicted_per_token_ms"] == pytest.approx(ITL_MS)
    timings = guided.json()["timings"]
    assert timings["predicted_ms"] == pytest.approx(4 * 20.0)
    assert timings["predicted_per_token_ms"] == pytest.approx(20.0)
    assert timings["prompt_ms"] == pytest.approx(TTFT_MS)  # the TTFT is the model's
    assert "itl 20 ms for JSON answers" in llamacpp(structured_itl_ms=20.0).describe()


async def test_vllm_caches_whole_16_token_blocks_and_reports_only_hits() -> None:
    words = [f"t{i}" for i in range(40)]
    other = words[:35] + [f"u{i}" for i in range(5)]
    config = SimConfig.for_engine("vllm", port=0, ttft_ms=0, itl_ms=0)
    async with serve(config) as (_, client):
        body = {"prompt": " ".join(words), "max_tokens": 2}
        cold = (await client.post(COMPLETIONS, json=body)).json()["usage"]
        body = {"prompt": " ".join(other), "max_tokens": 2}
        warm = (await client.post(COMPLETIONS, json=body)).json()["usage"]
        metrics = (await client.get("/metrics")).text
    assert "prompt_tokens_details" not in cold  # no hit, no details (vLLM leaves them out)
    assert warm["prompt_tokens_details"] == {"cached_tokens": 32}  # 35 shared: 2 whole blocks
    values = _samples(metrics)
    labels = (("engine", "0"), ("model_name", "sim-model"))
    assert values[("vllm:prefix_cache_queries_total", labels)] == 80
    assert values[("vllm:prefix_cache_hits_total", labels)] == 32


async def test_prefix_cache_forgets_beyond_its_capacity() -> None:
    config = SimConfig(port=0, ttft_ms=0, itl_ms=0, prefix_cache=True, prefix_cache_tokens=12)
    async with serve(config) as (_, client):

        async def cached(prompt: str) -> int:
            body = {"prompt": prompt, "max_tokens": 1}
            usage = (await client.post(COMPLETIONS, json=body)).json()["usage"]
            return int(usage.get("prompt_tokens_details", {}).get("cached_tokens", 0))

        assert await cached(PROMPT) == 0
        assert await cached(PROMPT) == 9
        # 10 more tokens in a 12-token cache: PROMPT keeps 2, its first two (tails go first).
        assert await cached("z0 z1 z2 z3 z4 z5 z6 z7 z8 z9") == 0
        assert await cached(PROMPT) == 2


# ------------------------------------------------------------------ connection and writes


def _http_request(path: str, body: dict[str, Any]) -> bytes:
    raw = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n\r\n"
    )
    return head.encode() + raw


async def test_llamacpp_closes_the_connection_after_a_stream_despite_keep_alive() -> None:
    async with serve(llamacpp(ttft_ms=0, itl_ms=0)) as (server, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(_http_request(CHAT, chat_body("hi", 3, stream=True)))
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            body = await asyncio.wait_for(reader.readuntil(b"\r\n0\r\n\r\n"), 10)
            # A client reusing the kept-alive connection gets no answer: the server hung up.
            writer.write(_http_request(CHAT, chat_body("hi", 3, stream=True)))
            try:
                after = await asyncio.wait_for(reader.read(-1), 10)
            except ConnectionResetError:
                after = b""
        finally:
            writer.close()
    headers = head.lower()
    assert b"\r\nconnection: keep-alive" in headers
    assert b"\r\nkeep-alive: timeout=5, max=100" in headers
    assert b"data: [DONE]" in body
    assert after == b""


async def test_default_keeps_the_connection_for_the_next_request() -> None:
    async with serve(SimConfig(port=0, ttft_ms=0, itl_ms=0)) as (server, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            for _ in range(2):
                writer.write(_http_request(CHAT, chat_body("hi", 3, stream=True)))
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                assert head.startswith(b"HTTP/1.1 200")
                body = await asyncio.wait_for(reader.readuntil(b"\r\n0\r\n\r\n"), 10)
                assert b"data: [DONE]" in body
            assert not reader.at_eof()
        finally:
            writer.close()


async def _writes(config: SimConfig, path: str, body: dict[str, Any]) -> list[tuple[float, bytes]]:
    """(seconds after arrival, body) of every write the app makes for one request, driven
    through its ASGI interface: write boundaries are what the role switches change, and TCP
    may merge writes."""
    app = SimApp(config)
    incoming = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await never.wait()  # the client never leaves
        return {"type": "http.disconnect"}

    loop = asyncio.get_running_loop()
    start = loop.time()
    sent: list[tuple[float, bytes]] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body":
            sent.append((loop.time() - start, message["body"]))

    scope = {"type": "http", "method": "POST", "path": path, "headers": []}
    await app(scope, receive, send)
    return sent


async def test_role_chunk_switch_places_the_role_event() -> None:
    body = chat_body("hi", 2, stream=True)

    def role_of(write: bytes) -> list[bool]:
        return [
            "role" in (e["choices"][0].get("delta") or {})
            for e in data(write)
            if e != "DONE" and e["choices"]
        ]

    for role, expected in (
        ("arrival", [[True], [False], [False], [False]]),  # role, 2 tokens, finish
        ("separate", [[True], [False], [False], [False]]),
        ("joined", [[True, False], [False], [False]]),
        ("none", [[False], [False], [False]]),
    ):
        config = SimConfig(port=0, ttft_ms=0, itl_ms=0, role_chunk=role)  # type: ignore[arg-type]
        got = [role_of(w) for _, w in await _writes(config, CHAT, body) if w]
        assert got == expected, role


async def test_separate_role_chunk_goes_out_at_the_first_token_not_on_arrival() -> None:
    # With a long TTFT, "arrival" writes the role event before waiting and "separate" after:
    # a client that times the first event as the first token is wrong only in the first case.
    for role, late in (("arrival", False), ("separate", True)):
        config = SimConfig(port=0, ttft_ms=1000, itl_ms=0, role_chunk=role)  # type: ignore[arg-type]
        writes = await _writes(config, CHAT, chat_body("hi", 1, stream=True))
        role_at = [t for t, body in writes if b'"role"' in body]
        # "separate" is never early (the schedule is a lower bound); "arrival" does not wait
        # for the TTFT (a full second: no load stalls the loop that long).
        assert (role_at[0] >= 1.0) is late, (role, role_at)


# ------------------------------------------------------------------ usage and stream ends


async def test_usage_styles() -> None:
    def usages(events: list[Any]) -> list[tuple[bool, int | None]]:
        """(is a choices: [] event, completion_tokens or None) per event before [DONE]."""
        return [
            (not e["choices"], e["usage"]["completion_tokens"] if e.get("usage") else None)
            for e in events
            if e != "DONE"
        ]

    asked = chat_body("a b c", 3, **STREAM_USAGE)
    plain = chat_body("a b c", 3, stream=True)
    continuous = chat_body(
        "a b c", 3, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )  # fmt: skip
    cases: list[tuple[str, dict[str, Any], list[tuple[bool, int | None]]]] = [
        # role, 3 tokens, finish, then the usage event only when asked
        ("requested", asked, [(False, None)] * 5 + [(True, 3)]),
        ("requested", plain, [(False, None)] * 5),
        ("requested", continuous, [(False, 0), (False, 1), (False, 2), (False, 3), (False, 3),
                                   (True, 3)]),
        ("finish", plain, [(False, None)] * 4 + [(False, 3)]),
        ("continuous", plain, [(False, 0), (False, 1), (False, 2), (False, 3), (False, 3),
                               (True, 3)]),
        ("none", asked, [(False, None)] * 5),
    ]  # fmt: skip
    for usage, body, expected in cases:
        config = SimConfig(port=0, ttft_ms=0, itl_ms=0, usage=usage)  # type: ignore[arg-type]
        async with serve(config) as (_, client):
            events = data((await client.post(CHAT, json=body)).content)
        assert events[-1] == "DONE"
        assert usages(events) == expected, (usage, body)


async def test_finish_reason_is_stop_without_max_tokens_on_engine_profiles() -> None:
    async with serve(SimConfig.for_engine("vllm", port=0, ttft_ms=0, itl_ms=0)) as (_, client):
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
        events = data((await client.post(CHAT, json=body)).content)
        given = data((await client.post(CHAT, json=chat_body("hi", 2, stream=True))).content)
    assert events[-2]["choices"][0]["finish_reason"] == "stop"
    assert content_events(events) == 16  # the default max_tokens, "reaching EOS"
    assert given[-2]["choices"][0]["finish_reason"] == "length"


async def test_stream_end_switches() -> None:
    body = chat_body("a b", 6, stream=True)
    config = SimConfig(port=0, ttft_ms=0, itl_ms=0, stream_end="no_done")
    async with serve(config) as (_, client):
        events = data((await client.post(CHAT, json=body)).content)
    assert content_events(events) == 6
    assert events[-1]["choices"][0]["finish_reason"] == "length"  # and no [DONE]

    config = SimConfig(port=0, ttft_ms=0, itl_ms=0, stream_end="abrupt", fault_after_tokens=3)
    async with serve(config) as (_, client):
        response = await client.post(CHAT, json=body)
        events = data(response.content)
        metrics = _samples((await client.get("/metrics")).text)
    assert response.status_code == 200
    assert content_events(events) == 3
    assert all(e != "DONE" and e["choices"][0]["finish_reason"] is None for e in events)
    assert metrics[("vllm:request_success_total", (("model_name", "sim-model"),))] == 0

    config = SimConfig(port=0, ttft_ms=0, itl_ms=0, stream_end="error", fault_after_tokens=2)
    async with serve(config) as (_, client):
        raw = (await client.post(CHAT, json=body)).content
    events_typed = sse(raw)
    assert [kind for kind, _ in events_typed] == ["message"] * 3 + ["error"]
    assert content_events([e for _, e in events_typed[:-1]]) == 2
    error = events_typed[-1][1]["error"]
    assert error["type"] == "server_error"
    assert error["message"]


# ------------------------------------------------------------------ tokenize per engine


async def test_tokenize_answers_in_each_engines_shape() -> None:
    captured = json.loads(fixture("tokenize.json"))
    async with serve(llamacpp()) as (_, client):
        plain = (await client.post("/tokenize", json={"content": "the quick  fox"})).json()
        special = await client.post("/tokenize", json={"content": "the quick", "add_special": True})
        pieces = await client.post("/tokenize", json={"content": "a b", "with_pieces": True})
        messages = await client.post(
            "/tokenize", json={"messages": [{"role": "user", "content": "hello there"}]}
        )
    assert sorted(plain) == sorted(captured)
    assert len(plain["tokens"]) == 3
    assert all(isinstance(t, int) for t in plain["tokens"])
    assert special.json()["tokens"][0] == 1  # BOS first
    assert len(special.json()["tokens"]) == 3
    assert [p["piece"] for p in pieces.json()["tokens"]] == ["a", "b"]
    assert messages.json() == {"tokens": []}  # as llama-server answered a messages body

    config = SimConfig.for_engine("vllm", port=0)
    async with serve(config) as (_, client):
        prompt = (
            await client.post("/tokenize", json={"model": "sim-model", "prompt": "a b c"})
        ).json()
        chat = await client.post(
            "/tokenize",
            json={"model": "sim-model", "messages": [{"role": "user", "content": "x y"}]},
        )
        v1 = await client.post("/v1/tokenize", json={"prompt": "a"})
    assert sorted(prompt) == ["count", "max_model_len", "token_strs", "tokens"]
    assert (prompt["count"], len(prompt["tokens"]), prompt["token_strs"]) == (3, 3, None)
    assert chat.json()["count"] == 2
    assert v1.status_code == 404  # vLLM has no /v1/tokenize

    config = SimConfig.for_engine("sglang", port=0)
    async with serve(config) as (_, client):
        one = (await client.post("/v1/tokenize", json={"prompt": "a b c"})).json()
        many = (await client.post("/tokenize", json={"prompt": ["a b", "c"]})).json()
        chat = await client.post("/tokenize", json={"messages": [{"role": "user", "content": "x"}]})
    assert sorted(one) == ["count", "max_model_len", "tokens"]
    assert one["count"] == 3
    assert many["count"] == [2, 1]
    assert [len(t) for t in many["tokens"]] == [2, 1]
    assert chat.status_code == 422  # SGLang's request has only `prompt`

    config = SimConfig.for_engine("tgi", port=0)
    async with serve(config) as (_, client):
        tokens = (await client.post("/tokenize", json={"inputs": "hi  there\tyou"})).json()
    assert [{k: t[k] for k in ("text", "start", "stop")} for t in tokens] == [
        {"text": "hi", "start": 0, "stop": 2},
        {"text": "there", "start": 4, "stop": 9},
        {"text": "you", "start": 10, "stop": 13},
    ]
    assert all(sorted(t) == ["id", "start", "stop", "text"] for t in tokens)


# ------------------------------------------------------------------ metrics per engine


def _families(text: str) -> dict[str, tuple[str, list[str]]]:
    return {
        f.name: (f.type, [s.name for s in f.samples]) for f in text_string_to_metric_families(text)
    }


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


async def test_llamacpp_metrics_have_the_captured_names_and_the_sims_figures() -> None:
    captured = fixture("metrics.prom").decode()
    async with serve(llamacpp()) as (_, client):
        for prompt in (PROMPT, SHARED):
            await client.post(CHAT, json=chat_body(prompt, 3, stream=True))
        async with client.stream("POST", CHAT, json=chat_body("q", 50, stream=True)) as live:
            during = _samples((await client.get("/metrics")).text)
            await live.aclose()
        text = (await client.get("/metrics")).text
    # Same families in the same order, same types and sample names as llama-server's.
    assert list(_families(text).items()) == list(_families(captured).items())
    # Counters without _total stay as llama-server writes them (not renamed by a library).
    assert "\nllamacpp:n_tokens_max 13.0\n" in text
    values = {name: value for (name, _), value in _samples(text).items()}
    assert during[("llamacpp:requests_processing", ())] == 1
    assert values["llamacpp:prompt_tokens_total"] == 10 + 4 + 1  # uncached only
    assert values["llamacpp:prompt_tokens_cached_total"] == 6
    assert values["llamacpp:tokens_predicted_total"] >= 3 + 3
    assert values["llamacpp:prompt_seconds_total"] == pytest.approx((40 + 16) / 1000)
    assert values["llamacpp:tokens_predicted_seconds_total"] == pytest.approx(2 * 2 * 8 / 1000)
    assert values["llamacpp:requests_processing"] == 0


async def test_vllm_sglang_and_tgi_metric_names_and_values() -> None:
    for engine, expected in (
        ("vllm", {"vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
                  "vllm:kv_cache_usage_perc": "gauge", "vllm:prefix_cache_queries": "counter",
                  "vllm:prefix_cache_hits": "counter", "vllm:prompt_tokens": "counter",
                  "vllm:generation_tokens": "counter", "vllm:request_success": "counter"}),
        ("sglang", {"sglang:num_running_reqs": "gauge", "sglang:num_queue_reqs": "gauge",
                    "sglang:token_usage": "gauge", "sglang:cache_hit_rate": "gauge",
                    "sglang:prompt_tokens": "counter", "sglang:generation_tokens": "counter",
                    "sglang:cached_tokens": "counter"}),
        ("tgi", {"tgi_queue_size": "gauge", "tgi_batch_current_size": "gauge",
                 "tgi_request_count": "counter", "tgi_request_success": "counter"}),
    ):  # fmt: skip
        config = SimConfig.for_engine(engine, port=0, ttft_ms=0, itl_ms=0)  # type: ignore[arg-type]
        async with serve(config) as (_, client):
            for prompt in (PROMPT, SHARED):
                await client.post(COMPLETIONS, json={"prompt": prompt, "max_tokens": 2})
            text = (await client.get("/metrics")).text
        families = _families(text)
        for name, kind in expected.items():
            assert families[name][0] == kind, (engine, name)
        values: dict[str, float] = {}
        for (name, _), value in _samples(text).items():
            values[name] = values.get(name, 0.0) + value
        if engine == "vllm":  # 16-token blocks: 10-word prompts never hit
            assert values["vllm:prompt_tokens_total"] == 20
            assert values["vllm:prefix_cache_hits_total"] == 0
            assert values["vllm:request_success_total"] == 2
        elif engine == "sglang":
            assert values["sglang:cached_tokens_total"] == 6
            assert values["sglang:cache_hit_rate"] == pytest.approx(6 / 20)
            assert values["sglang:generation_tokens_total"] == 4
        else:
            assert "\ntgi_request_count 2.0\n" in text  # TGI's counters have no _total
            assert values["tgi_request_success_total"] == 2  # as the parser names it
            assert values["tgi_queue_size"] == 0


# ------------------------------------------------------------------ overload


async def test_requests_beyond_max_queue_get_429_with_retry_after() -> None:
    for engine, status in (("default", 429), ("llamacpp", 503), ("tgi", 429)):
        config = SimConfig.for_engine(
            engine,  # type: ignore[arg-type]
            port=0, ttft_ms=5000, itl_ms=0, max_concurrency=1, max_queue=1, retry_after_s=2,
        )  # fmt: skip
        async with serve(config) as (server, client):
            body = chat_body("hi", 1)
            held = [asyncio.create_task(client.post(CHAT, json=body)) for _ in range(2)]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            metrics = server.app.metrics
            while (metrics.running, metrics.waiting) != (1, 1):
                assert loop.time() < deadline, "the first two requests never ran and waited"
                await asyncio.sleep(0.01)
            rejected = await client.post(CHAT, json=body)
            await server.stop()  # ends the two held requests at once
            await asyncio.gather(*held)
        assert rejected.status_code == status, engine
        assert rejected.headers["retry-after"] == "2"
        if engine == "tgi":
            assert rejected.json() == {"error": "Model is overloaded", "error_type": "overloaded"}
        else:
            assert rejected.json()["error"]["code"] == status


def test_max_queue_needs_a_concurrency_limit_in_fixed_mode() -> None:
    with pytest.raises(ValueError, match="max_queue needs max_concurrency"):
        SimConfig(max_queue=2)


# ------------------------------------------------------------------ gpu mode


def test_gpu_engine_prefills_only_the_uncached_tokens() -> None:
    engine = GpuEngine.from_config(SimConfig(mode="gpu", prefill_chunk=100_000))
    cold = GpuRequest(4000, 2)
    engine.submit(cold, 0.0)
    engine.drain()
    warm = GpuRequest(4000, 2, cached_tokens=3000)
    engine.submit(warm, engine.clock)
    engine.drain()
    assert engine.prompt_tokens_total == 4000 + 1000
    cold_ttft = cold.first_token_at - cold.submitted_at
    warm_ttft = warm.first_token_at - warm.submitted_at
    assert warm_ttft < cold_ttft
    with pytest.raises(ValueError, match="cached_tokens"):
        GpuRequest(10, 1, cached_tokens=10)


async def test_gpu_mode_reports_the_cache_in_llamacpp_timings() -> None:
    config = SimConfig.for_engine("llamacpp", mode="gpu", port=0)
    words = " ".join(f"g{i}" for i in range(3000))
    other = " ".join([f"g{i}" for i in range(2500)] + [f"h{i}" for i in range(500)])
    async with serve(config) as (_, client):
        cold = data((await client.post(CHAT, json=chat_body(words, 2, **STREAM_USAGE))).content)
        warm = data((await client.post(CHAT, json=chat_body(other, 2, **STREAM_USAGE))).content)
        metrics = _samples((await client.get("/metrics")).text)
    cold_t, warm_t = cold[-2]["timings"], warm[-2]["timings"]
    assert (cold_t["cache_n"], cold_t["prompt_n"]) == (0, 3000)
    assert (warm_t["cache_n"], warm_t["prompt_n"]) == (2500, 500)
    assert warm[-2]["usage"]["prompt_tokens_details"] == {"cached_tokens": 2500}
    assert warm_t["prompt_ms"] < cold_t["prompt_ms"]  # the model's clock, not the wall's
    assert metrics[("llamacpp:prompt_tokens_total", ())] == 3000 + 500
    assert any(name.startswith("DCGM_FI_DEV_GPU_UTIL") for name, _ in metrics)


async def test_gpu_mode_stream_that_breaks_off_frees_its_place() -> None:
    config = SimConfig(mode="gpu", port=0, stream_end="abrupt", fault_after_tokens=2)
    async with serve(config) as (server, client):
        events = data((await client.post(CHAT, json=chat_body("a b c", 50, stream=True))).content)
        engine = server.app.engine
        assert engine is not None
        assert (len(engine.running), len(engine.waiting)) == (0, 0)
    assert content_events(events) == 2
    assert all(e != "DONE" and e["choices"][0]["finish_reason"] is None for e in events)


# ------------------------------------------------------------------ profiles and CLI


def test_profiles_and_overrides() -> None:
    config = SimConfig.for_engine("llamacpp", close_after_response=False)
    assert config.engine == "llamacpp"
    assert not config.close_after_response  # the switch wins over the profile
    assert (config.role_chunk, config.tokenize, config.metrics) == ("separate", "llamacpp",
                                                                   "llamacpp")  # fmt: skip
    assert SimConfig.from_json(config.to_json()) == config
    assert SimConfig.for_engine("default") == SimConfig()
    with pytest.raises(ValueError, match="unknown SimConfig fields"):
        SimConfig.for_engine("vllm", no_such_switch=True)
    with pytest.raises(ValueError, match="usage must be one of"):
        SimConfig(usage="sometimes")  # type: ignore[arg-type]


def test_cli_engine_profile_with_an_override() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", "from cli.sim import sim; sim()", "--port", "0",
         "--engine", "tgi",
         "--usage", "none", "--ttft-ms", "0", "--itl-ms", "0"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        url = wait_for_startup_line(process)
        with httpx.Client(base_url=url, timeout=10) as client:
            tokens = client.post("/tokenize", json={"inputs": "a b"}).json()
            body = chat_body("a", 2, **STREAM_USAGE)
            events = data(client.post(CHAT, json=body).content)
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    assert [t["text"] for t in tokens] == ["a", "b"]  # the tgi profile
    assert not any(e != "DONE" and "usage" in e for e in events)  # --usage none won
