"""The simulated endpoint, over real TCP: wire format, token counts and timing vs its config."""

from __future__ import annotations

import asyncio
import json
import re
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from sim.server import SimServer

TTFT_MS = 50.0
ITL_MS = 10.0
MODEL = "sim-model"


def never_early(times_ms: list[float]) -> bool:
    """Each token at or after its due time, TTFT_MS + i * ITL_MS after the client sent the
    request (the simulator's schedule starts later, when the request arrives). How late is
    the machine's business: bench/accuracy.py and bench/loadgen.py measure it; a test on a
    loaded box can only hold the schedule's lower bound."""
    return all(t >= TTFT_MS + i * ITL_MS for i, t in enumerate(times_ms))


CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


@pytest.fixture(scope="module")
def fixed_sim() -> Iterator[SimProcess]:
    """A simulator of this module's own (not conftest's shared `sim`): the metrics test
    checks exact counter deltas, which only hold when no other test uses the server."""
    with sim_process(SimConfig(port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, model=MODEL)) as proc:
        yield proc


@pytest.fixture
async def client(fixed_sim: SimProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=fixed_sim.base_url, timeout=10.0) as c:
        # Open the connection first so timings below exclude the TCP handshake.
        (await c.get("/health")).raise_for_status()
        yield c


@dataclass
class Stream:
    """What a benchmark client sees of one SSE response."""

    t_send: float
    status: int
    content_type: str
    raw: bytes = b""
    events: list[tuple[float, Any]] = field(default_factory=list)  # (perf_counter, json | DONE)

    def data(self) -> list[Any]:
        return [payload for _, payload in self.events]

    def token_times_ms(self, key: str) -> list[float]:
        """Arrival of each event carrying text, ms after send (key: "delta" or "text")."""
        return [
            (t - self.t_send) * 1000.0
            for t, payload in self.events
            if isinstance(payload, dict) and _token_text(payload, key)
        ]


def _token_text(payload: dict[str, Any], key: str) -> str:
    if not payload.get("choices"):
        return ""
    choice = payload["choices"][0]
    if key == "delta":
        return str(choice["delta"].get("content") or "")
    return str(choice.get("text") or "")


async def _stream(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Stream:
    t_send = time.perf_counter()
    async with client.stream("POST", path, json=body) as response:
        result = Stream(t_send, response.status_code, response.headers.get("content-type", ""))
        buffer = b""
        async for chunk in response.aiter_raw():
            now = time.perf_counter()
            result.raw += chunk
            buffer += chunk
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                assert event.startswith(b"data: "), event
                payload = event[len(b"data: ") :]
                result.events.append((now, "DONE" if payload == b"[DONE]" else json.loads(payload)))
        assert buffer == b"", "stream ended inside an event"
    return result


def _metrics(text: str) -> dict[str, float]:
    """`name{labels}` -> value for every sample line; HELP/TYPE must precede each family."""
    samples: dict[str, float] = {}
    declared: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
        elif line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            assert series.split("{", 1)[0] in declared, f"no # TYPE before {series}"
            samples[series] = float(value)
    return samples


def _series(name: str) -> str:
    return f'{name}{{model_name="{MODEL}"}}'


async def test_models_lists_the_configured_model(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [MODEL]


async def test_chat_stream_with_usage_matches_openai_sequence_and_timing(
    client: httpx.AsyncClient,
) -> None:
    n = 20
    messages = [
        {"role": "system", "content": "you are  terse"},  # 3 words
        {"role": "user", "content": [{"type": "text", "text": "count\tthese four\nwords"}]},
    ]
    stream = await _stream(
        client,
        CHAT,
        {"model": MODEL, "messages": messages, "max_tokens": n, "stream": True,
         "stream_options": {"include_usage": True}},
    )  # fmt: skip
    assert stream.status == 200
    assert stream.content_type.startswith("text/event-stream")
    events = stream.data()

    role = events[0]["choices"][0]
    assert role["delta"] == {"role": "assistant", "content": ""}
    assert role["finish_reason"] is None
    content = events[1 : 1 + n]
    assert all(_token_text(e, "delta") for e in content)
    text = "".join(e["choices"][0]["delta"]["content"] for e in content)
    assert len(text.split()) == n
    finish = events[1 + n]["choices"][0]
    assert finish["finish_reason"] == "length"
    assert finish["delta"] == {}
    usage_event = events[2 + n]
    assert usage_event["choices"] == []
    assert usage_event["usage"] == {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 27}
    assert events[3 + n :] == ["DONE"]
    assert {e["id"] for e in events[:-1]} == {events[0]["id"]}
    assert {e["object"] for e in events[:-1]} == {"chat.completion.chunk"}

    times = stream.token_times_ms("delta")
    assert len(times) == n
    assert never_early(times), times


async def test_chat_stream_without_include_usage_has_no_usage_event(
    client: httpx.AsyncClient,
) -> None:
    stream = await _stream(
        client,
        CHAT,
        {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3,
         "max_tokens": 99, "stream": True},
    )  # fmt: skip
    events = stream.data()
    assert events[-1] == "DONE"
    assert all("usage" not in e and e["choices"] for e in events[:-1])
    # role, max_completion_tokens (not max_tokens) content events, finish
    assert len(events) == 1 + 3 + 1 + 1
    assert len(stream.token_times_ms("delta")) == 3


async def test_default_max_tokens_applies_when_none_given(client: httpx.AsyncClient) -> None:
    stream = await _stream(
        client, CHAT, {"messages": [{"role": "user", "content": "hi"}], "stream": True}
    )
    assert len(stream.token_times_ms("delta")) == 16


async def test_completions_stream_with_usage(client: httpx.AsyncClient) -> None:
    n = 5
    stream = await _stream(
        client,
        COMPLETIONS,
        {"prompt": ["one two", "three"], "max_tokens": n, "stream": True,
         "stream_options": {"include_usage": True}},
    )  # fmt: skip
    assert stream.status == 200
    assert stream.content_type.startswith("text/event-stream")
    assert re.fullmatch(rb"(data: [^\n]+\n\n)+", stream.raw)
    events = stream.data()
    tokens = events[:n]
    assert all(e["object"] == "text_completion" and _token_text(e, "text") for e in tokens)
    assert len("".join(e["choices"][0]["text"] for e in tokens).split()) == n
    assert events[n]["choices"][0]["finish_reason"] == "length"
    assert events[n]["choices"][0]["text"] == ""
    assert events[n + 1]["choices"] == []
    assert events[n + 1]["usage"] == {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 8}
    assert events[n + 2 :] == ["DONE"]
    assert stream.token_times_ms("text")[0] >= TTFT_MS  # never early


async def test_non_streaming_chat_waits_for_the_whole_response(
    client: httpx.AsyncClient,
) -> None:
    n = 6
    t0 = time.perf_counter()
    response = await client.post(
        CHAT, json={"messages": [{"role": "user", "content": "a b c d"}], "max_tokens": n}
    )
    elapsed_ms = (time.perf_counter() - t0) * 1000.0
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["role"] == "assistant"
    assert len(choice["message"]["content"].split()) == n
    assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": n, "total_tokens": 10}
    # Never early: the whole answer waits for its last token's due time.
    assert elapsed_ms >= TTFT_MS + (n - 1) * ITL_MS, elapsed_ms


async def test_non_streaming_completion(client: httpx.AsyncClient) -> None:
    response = await client.post(COMPLETIONS, json={"prompt": "x y z", "max_tokens": 2})
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "text_completion"
    assert len(body["choices"][0]["text"].split()) == 2
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


async def test_empty_prompt_still_counts_one_token(client: httpx.AsyncClient) -> None:
    response = await client.post(COMPLETIONS, json={"prompt": "  ", "max_tokens": 1})
    assert response.json()["usage"]["prompt_tokens"] == 1


async def test_tokenize_counts_words(client: httpx.AsyncClient) -> None:
    response = await client.post("/tokenize", json={"prompt": "the quick  brown\nfox"})
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 4
    assert len(body["tokens"]) == 4
    assert all(isinstance(t, int) for t in body["tokens"])
    assert body["max_model_len"] == 131072
    chat = await client.post(
        "/tokenize",
        json={"model": MODEL, "messages": [{"role": "user", "content": "one two three"}]},
    )
    assert chat.json()["count"] == 3


async def test_metrics_follow_requests(client: httpx.AsyncClient) -> None:
    before = _metrics((await client.get("/metrics")).text)
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:request_success_total"):  # fmt: skip
        assert _series(name) in before, name

    # While a stream is open it counts as running.
    async with client.stream(
        "POST", CHAT, json={"messages": [{"role": "user", "content": "a b"}], "max_tokens": 10,
                            "stream": True},
    ) as response:  # fmt: skip
        during = _metrics((await client.get("/metrics")).text)
        async for _ in response.aiter_raw():
            pass
    await client.post(COMPLETIONS, json={"prompt": "a b c", "max_tokens": 4})
    after = _metrics((await client.get("/metrics")).text)

    assert during[_series("vllm:num_requests_running")] >= 1
    assert after[_series("vllm:num_requests_running")] == 0
    assert after[_series("vllm:num_requests_waiting")] == 0

    def delta(name: str) -> float:
        return after[_series(name)] - before[_series(name)]

    assert delta("vllm:prompt_tokens_total") == 2 + 3
    assert delta("vllm:generation_tokens_total") == 10 + 4
    assert delta("vllm:request_success_total") == 2


async def test_client_disconnect_ends_the_request(client: httpx.AsyncClient) -> None:
    before = _metrics((await client.get("/metrics")).text)
    async with httpx.AsyncClient(base_url=str(client.base_url), timeout=10.0) as other:
        request = {"messages": [{"role": "user", "content": "a"}], "max_tokens": 1000,
                   "stream": True}  # fmt: skip
        async with other.stream("POST", CHAT, json=request) as response:
            async for chunk in response.aiter_raw():
                if b'"content":" ' in chunk:
                    break  # leave after the first token; closing drops the connection
    running = after = before
    for _ in range(50):
        after = _metrics((await client.get("/metrics")).text)
        running = after[_series("vllm:num_requests_running")]
        if running == 0:
            break
        await asyncio.sleep(0.02)
    assert running == 0
    assert (
        after[_series("vllm:request_success_total")]
        == before[_series("vllm:request_success_total")]
    )
    generated = (
        after[_series("vllm:generation_tokens_total")]
        - before[_series("vllm:generation_tokens_total")]
    )
    assert 1 <= generated < 100


@pytest.mark.parametrize(
    ("path", "content"),
    [
        (CHAT, b'{"messages": [}'),
        (CHAT, b""),
        (CHAT, b'{"prompt": "no messages here"}'),
        (CHAT, b'{"messages": "not a list"}'),
        (CHAT, b'{"messages": [], "max_tokens": 0}'),
        (COMPLETIONS, b'{"messages": []}'),
        (COMPLETIONS, b"[1, 2]"),
        ("/tokenize", b"{}"),
    ],
)
async def test_bad_requests_get_openai_400(
    client: httpx.AsyncClient, path: str, content: bytes
) -> None:
    response = await client.post(
        path, content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == 400
    assert isinstance(error["message"], str)
    assert error["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, {"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}),
        (COMPLETIONS, {"model": "gpt-9", "prompt": "hi", "stream": True}),
        ("/tokenize", {"model": "gpt-9", "prompt": "hi"}),
    ],
)
async def test_unknown_model_gets_404(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    response = await client.post(path, json=body)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == 404
    assert "gpt-9" in error["message"]
    assert isinstance(error["type"], str)


async def test_error_rate_is_seeded_and_shaped_like_openai() -> None:
    config = SimConfig(port=0, ttft_ms=0, itl_ms=0, error_rate=0.5, seed=7)
    body = {"prompt": "x", "max_tokens": 1}
    patterns: list[list[int]] = []
    for _ in range(2):
        async with (
            SimServer(config) as server,
            httpx.AsyncClient(base_url=server.base_url, timeout=10.0) as client,
        ):
            statuses = []
            for _ in range(60):
                response = await client.post(COMPLETIONS, json=body)
                statuses.append(response.status_code)
                if response.status_code == 500:
                    error = response.json()["error"]
                    assert error["code"] == 500
                    assert error["type"] == "server_error"
            patterns.append(statuses)
            assert server.app.metrics.request_success == statuses.count(200)
    assert set(patterns[0]) == {200, 500}
    assert 15 <= patterns[0].count(500) <= 45
    assert patterns[0] == patterns[1], "same seed, same failures"


async def test_shutdown_ends_inflight_requests_cleanly() -> None:
    long = {"messages": [{"role": "user", "content": "a"}], "max_tokens": 100_000}
    server = SimServer(SimConfig(port=0, ttft_ms=5, itl_ms=5))
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=10.0) as client:
            waiting = asyncio.create_task(client.post(CHAT, json=long))
            stream_task = asyncio.create_task(_stream(client, CHAT, {**long, "stream": True}))
            await asyncio.sleep(0.2)  # same loop: both requests are in by now
            assert server.app.metrics.running == 2
            await server.stop()  # would otherwise wait out a 500 s stream
            stream = await stream_task
            response = await waiting
    finally:
        await server.stop()
    events = stream.data()
    assert stream.status == 200
    assert events, "the stream started"
    assert "DONE" not in events  # cut short: a client must count it as incomplete
    assert response.status_code == 503
    assert response.json()["error"]["code"] == 503
    assert server.app.metrics.running == 0
    assert server.app.metrics.request_success == 0


async def test_16_concurrent_streams_keep_their_schedule(client: httpx.AsyncClient) -> None:
    # Client-side timing under concurrency depends on this machine's load (a claim for
    # bench/, not a test); what must hold is: every token, none early.
    n = 20
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": n, "stream": True}
    async with httpx.AsyncClient(
        base_url=str(client.base_url), timeout=10.0, limits=httpx.Limits(max_connections=16)
    ) as pool:
        await asyncio.gather(*(pool.get("/health") for _ in range(16)))  # warm 16 connections
        streams = await asyncio.gather(*(_stream(pool, CHAT, body) for _ in range(16)))
    times = [s.token_times_ms("delta") for s in streams]
    assert all(len(t) == n for t in times)
    assert all(never_early(t) for t in times), times


async def test_256_concurrent_streams_all_complete() -> None:
    n, concurrency = 20, 256
    config = SimConfig(port=0, ttft_ms=50, itl_ms=20)
    body = {"messages": [{"role": "user", "content": "one two three"}], "max_tokens": n,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with sim_process(config) as proc:
        async with httpx.AsyncClient(base_url=proc.base_url, timeout=30.0, limits=limits) as c:
            streams = await asyncio.gather(*(_stream(c, CHAT, body) for _ in range(concurrency)))
    for s in streams:
        assert s.status == 200
        assert len(s.token_times_ms("delta")) == n
        assert s.data()[-2]["usage"] == {"prompt_tokens": 3, "completion_tokens": n,
                                         "total_tokens": n + 3}  # fmt: skip
        assert s.token_times_ms("delta")[0] >= 50


def test_cli_command_prints_its_address_and_serves() -> None:
    argv = [
        sys.executable, "-c", "from cli.sim import sim; sim()",
        "--port", "0", "--ttft-ms", "5", "--itl-ms", "1.5", "--model", "cli-model",
        "--max-tokens-default", "3",
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], 20.0)
        assert ready, "no startup line within 20 s"
        line = process.stdout.readline().decode()
        match = re.fullmatch(
            r"sim listening on (http://127\.0\.0\.1:\d+) \(fixed, ttft 5 ms, itl 1\.5 ms\)\n",
            line,
        )
        assert match, line
        url = match.group(1)
        models = httpx.get(f"{url}/v1/models", timeout=5.0).json()
        assert [m["id"] for m in models["data"]] == ["cli-model"]
        completion = httpx.post(f"{url}/v1/completions", json={"prompt": "a"}, timeout=5.0)
        assert completion.json()["usage"]["completion_tokens"] == 3
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()


def test_startup_line_is_parsed_by_the_process_helper(fixed_sim: SimProcess) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", fixed_sim.base_url)
    assert fixed_sim.openai_base_url == fixed_sim.base_url + "/v1"
    assert httpx.get(fixed_sim.metrics_url, timeout=5.0).status_code == 200


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="error_rate"):
        SimConfig(error_rate=1.5)
    with pytest.raises(ValueError, match="itl_ms"):
        SimConfig(itl_ms=-1)
    assert SimConfig.from_json(SimConfig(port=0, seed=3).to_json()) == SimConfig(port=0, seed=3)


async def test_record_writes_keys_requests_by_user_or_by_their_prompts_first_word() -> None:
    """What tests/truth.py reads: each request's arrival and content writes, keyed by its
    `user`, or else its prompt's first word; a key met again gets `#2`, `#3`, ..."""
    config = SimConfig(port=0, ttft_ms=5, itl_ms=1, model=MODEL, record_writes=True)
    with sim_process(config) as sim:
        async with httpx.AsyncClient(base_url=sim.base_url, timeout=10.0) as http:
            for content, user in (("7 a b", None), ("7 c", None), ("7 d", "named")):
                body: dict[str, Any] = {
                    "model": MODEL,
                    "messages": [{"role": "user", "content": content}],
                    "max_tokens": 3,
                    "stream": True,
                }
                if user is not None:
                    body["user"] = user
                assert (await http.post(CHAT, json=body)).status_code == 200
            completion = {"model": MODEL, "prompt": "8 e f", "max_tokens": 2, "stream": True}
            assert (await http.post(COMPLETIONS, json=completion)).status_code == 200
            writes = (await http.get("/stats")).json()["writes"]
    assert sorted(writes) == ["7", "7#2", "8", "named"]
    assert [len(writes[k]) for k in ("7", "7#2", "named", "8")] == [4, 4, 4, 3]
    # Arrival first, then each write at or after its schedule from it (5 ms, then 1 ms each).
    for times in writes.values():
        assert times == sorted(times)
        assert times[1] - times[0] >= 0.005
    assert writes["7"][0] < writes["7#2"][0] < writes["named"][0] < writes["8"][0]
