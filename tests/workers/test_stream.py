"""`send()` against real HTTP on loopback: captured llama-server responses replayed event by event,
and servers that fail in each of the ways METRICS.md names.

No mocked transport: uvicorn serves an ASGI app in this test's event loop, or a raw asyncio TCP
server writes the bytes itself, and a real httpx.AsyncClient talks to them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.asgi import serve_in_loop
from workers.loadgen.stream import RawRequest, Target, request_body, send

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "llama-server"
EVENT_GAP_S = 0.005

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def fixture_bytes(name: str) -> bytes:
    path = FIXTURES / name
    assert path.is_file(), f"captured response {path} is missing (see shared/fixtures/README.md)"
    return path.read_bytes()


def sse_events(data: bytes) -> list[bytes]:
    """The events of an SSE body, each with its terminating blank line."""
    return [event + b"\n\n" for event in data.split(b"\n\n") if event.strip()]


async def _start(send: Send, status: int, content_type: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type)],
        }
    )


async def _replay_sse(send: Send, events: list[bytes]) -> None:
    await _start(send, 200, b"text/event-stream")
    for event in events:
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await asyncio.sleep(EVENT_GAP_S)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _whole(send: Send, status: int, body: bytes) -> None:
    await _start(send, status, b"application/json")
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _stall(receive: Receive, send: Send) -> None:
    """Send the role event, then nothing until the client gives up (or 5 s pass)."""
    await _start(send, 200, b"text/event-stream")
    role = sse_events(fixture_bytes("chat-stream-usage.sse"))[0]
    await send({"type": "http.response.body", "body": role, "more_body": True})
    try:
        async with asyncio.timeout(5.0):
            while (await receive())["type"] != "http.disconnect":
                pass
    except TimeoutError:
        pass
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class ReplayApp:
    """ASGI app: the first path segment names what to answer; requests are kept for checks."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.requests.append((scope["path"], headers, body))
        scenario = scope["path"].split("/")[1]
        if scenario.endswith("-sse"):
            await _replay_sse(
                send, sse_events(fixture_bytes(scenario.removesuffix("-sse") + ".sse"))
            )
        elif scenario == "chat-nostream":
            await _whole(send, 200, fixture_bytes("chat-nostream.json"))
        elif scenario == "error-400":
            await _whole(send, 400, fixture_bytes("error-400.json"))
        elif scenario == "unavailable":
            await _whole(send, 503, b'{"error":{"code":503,"message":"Loading model"}}')
        elif scenario == "malformed":
            await _replay_sse(send, [b"data: {not json\n\n"])
        elif scenario == "done-only":
            await _replay_sse(send, [b"data: [DONE]\n\n"])
        elif scenario == "stall":
            await _stall(receive, send)
        else:
            await _whole(send, 404, b'{"detail":"no such scenario"}')


@pytest.fixture(scope="module")
async def replay() -> AsyncIterator[tuple[str, ReplayApp]]:
    """uvicorn serving ReplayApp on a free loopback port, inside the tests' event loop."""
    app = ReplayApp()
    async with serve_in_loop(app) as url:
        yield url, app


async def fetch(
    base_url: str, api: str = "openai-chat", *, stream: bool = True, timeout_s: float = 5.0
) -> RawRequest:
    """One request through send(), as the load generator makes it."""
    target = Target.for_endpoint(base_url, api, "m", None, timeout_s)
    body = request_body(target, "hello there", 8, stream=stream, ignore_eos=True, temperature=None)
    rec = RawRequest(seq=0, warmup=False, t_sched=time.perf_counter_ns(), n_in_local=10)
    async with httpx.AsyncClient() as client:
        await send(client, target, body, rec, stream=stream)
    return rec


def content_events(name: str) -> int:
    """Events of a captured stream that carry text, counted independently of the parser."""
    count = 0
    for event in sse_events(fixture_bytes(name)):
        payload = event.removeprefix(b"data: ").strip()
        if payload == b"[DONE]":
            continue
        for choice in msgspec.json.decode(payload)["choices"]:
            if (choice.get("delta") or {}).get("content") or choice.get("text"):
                count += 1
    return count


# --- captured llama-server responses ---------------------------------------------------------


async def test_chat_stream_with_usage(replay: tuple[str, ReplayApp]) -> None:
    base, app = replay
    rec = await fetch(f"{base}/chat-stream-usage-sse/v1")
    assert rec.error_class is None, rec.error
    assert rec.status == 200
    # 11 events: role only (content null), 8 with content, finish (empty delta), usage
    assert content_events("chat-stream-usage.sse") == 8
    assert len(rec.chunk_ns) == 8
    assert rec.n_out == 8
    assert rec.n_in == 18  # the server's prompt_tokens, not the local 10
    assert rec.count_source == "usage"
    # the role event is the first byte; the first token comes one event later
    assert rec.t_first_byte is not None
    assert rec.t_send <= rec.t_first_byte < rec.chunk_ns[0]
    assert rec.chunk_ns == sorted(rec.chunk_ns)
    assert rec.t_end is not None
    assert rec.t_end >= rec.chunk_ns[-1]

    t = rec.timing(rec.t_sched)
    assert t.succeeded
    assert t.ttfb is not None
    assert t.ttft is not None
    assert 0 < t.ttfb < t.ttft
    # TPOT = (t_last - t_first) / (8 - 1), in seconds
    assert t.tpot == pytest.approx((rec.chunk_ns[-1] - rec.chunk_ns[0]) * 1e-9 / 7)
    assert t.tpot is not None
    assert t.tpot > 0

    # what the server received: the chat route, the body request_body() built
    path, headers, body = app.requests[-1]
    assert path == "/chat-stream-usage-sse/v1/chat/completions"
    assert headers["accept"] == "text/event-stream"
    sent = msgspec.json.decode(body)
    assert sent["stream"] is True
    assert sent["messages"] == [{"role": "user", "content": "hello there"}]


async def test_chat_stream_without_usage_counts_events(replay: tuple[str, ReplayApp]) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/chat-stream-no-usage-sse/v1")
    assert rec.error_class is None, rec.error
    assert content_events("chat-stream-no-usage.sse") == 5
    assert len(rec.chunk_ns) == 5
    assert rec.n_out == 5
    assert rec.count_source == "events"
    # no usage: the prompt count is the local one
    assert rec.n_in == 10


async def test_completions_stream_with_usage(replay: tuple[str, ReplayApp]) -> None:
    base, app = replay
    rec = await fetch(f"{base}/completions-stream-usage-sse/v1", "openai-completions")
    assert rec.error_class is None, rec.error
    # five events with text; the finish event's text is "" and does not count
    assert content_events("completions-stream-usage.sse") == 5
    assert len(rec.chunk_ns) == 5
    assert rec.n_out == 5
    assert rec.n_in == 5
    assert rec.count_source == "usage"
    path, _, body = app.requests[-1]
    assert path == "/completions-stream-usage-sse/v1/completions"
    assert msgspec.json.decode(body)["prompt"] == "hello there"


async def test_chat_not_streamed(replay: tuple[str, ReplayApp]) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/chat-nostream/v1", stream=False)
    assert rec.error_class is None, rec.error
    assert rec.status == 200
    assert len(rec.chunk_ns) == 1
    assert rec.n_out == 5
    assert rec.n_in == 9
    assert rec.count_source == "usage"
    t = rec.timing(rec.t_sched)
    assert t.ttft is not None
    assert t.ttft > 0
    # the whole text came at once: no time per output token to speak of
    assert t.tpot is None


# --- failures ---------------------------------------------------------------------------------


async def test_http_400_keeps_the_servers_message(replay: tuple[str, ReplayApp]) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/error-400/v1")
    assert rec.status == 400
    assert rec.error_class == "http_4xx"
    assert rec.error is not None
    assert "Expected 'messages' to be an array" in rec.error
    assert "400" in rec.error
    assert rec.chunk_ns == []
    assert rec.n_out == 0
    assert rec.t_end is not None


async def test_http_503(replay: tuple[str, ReplayApp]) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/unavailable/v1")
    assert rec.status == 503
    assert rec.error_class == "http_5xx"
    assert rec.error is not None
    assert "Loading model" in rec.error
    assert not rec.timing(rec.t_sched).succeeded


async def test_connection_refused() -> None:
    base = "http://127.0.0.1:1/v1"
    rec = await fetch(base)
    assert rec.error_class == "connect"
    assert rec.error is not None
    assert f"connection refused at {base}" in rec.error
    assert rec.status is None
    assert rec.t_end is not None
    assert rec.n_in == 10  # the local count is kept for a request that never got an answer


async def test_malformed_event_is_a_protocol_error(replay: tuple[str, ReplayApp]) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/malformed/v1")
    assert rec.status == 200
    assert rec.error_class == "protocol"
    assert rec.error is not None
    assert "malformed" in rec.error


async def test_stream_with_only_done_is_empty(replay: tuple[str, ReplayApp]) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/done-only/v1")
    assert rec.status == 200
    assert rec.error_class == "empty"
    assert rec.chunk_ns == []
    assert rec.n_out == 0


async def test_stalled_server_times_out(replay: tuple[str, ReplayApp]) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/stall/v1", timeout_s=0.3)
    assert rec.error_class == "timeout"
    assert rec.error == "no complete response within 0.3 s"
    assert rec.chunk_ns == []
    assert rec.t_end is not None
    # it gave up at the limit (counted from the call, connecting included), not when the
    # server finally hung up 5 s later
    assert 0.3 <= (rec.t_end - rec.t_sched) * 1e-9 < 3.0


async def test_connection_closed_mid_stream_is_stream_broken() -> None:
    events = sse_events(fixture_bytes("chat-stream-usage.sse"))[:2]  # role, first content

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        match = re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE)
        await reader.readexactly(int(match.group(1)) if match else 0)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for event in events:
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            await asyncio.sleep(EVENT_GAP_S)
        # closed without the terminating zero-length chunk
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        rec = await fetch(f"http://127.0.0.1:{port}/v1")
    finally:
        server.close()
        await server.wait_closed()
    assert rec.status == 200
    assert rec.error_class == "stream_broken"
    assert rec.error is not None
    assert "broke" in rec.error
    # the one content event that did arrive was timed and counted
    assert len(rec.chunk_ns) == 1
    assert rec.n_out == 1


# --- request bodies ---------------------------------------------------------------------------


def _body(api: str, **kwargs: Any) -> dict[str, Any]:
    target = Target.for_endpoint("http://h:1/v1", api, "m", None, 5.0)
    options: dict[str, Any] = {"stream": True, "ignore_eos": False, "temperature": None}
    options.update(kwargs)
    decoded: dict[str, Any] = msgspec.json.decode(request_body(target, "hi there", 16, **options))
    return decoded


def test_chat_body_shape() -> None:
    assert _body("openai-chat") == {
        "model": "m",
        "max_tokens": 16,
        "stream": True,
        "messages": [{"role": "user", "content": "hi there"}],
        "stream_options": {"include_usage": True},
    }


def test_completions_body_shape() -> None:
    assert _body("openai-completions") == {
        "model": "m",
        "max_tokens": 16,
        "stream": True,
        "prompt": "hi there",
        "stream_options": {"include_usage": True},
    }


def test_usage_asked_for_only_when_streaming() -> None:
    body = _body("openai-chat", stream=False)
    assert body["stream"] is False
    assert "stream_options" not in body


def test_ignore_eos_and_temperature_only_when_set() -> None:
    assert "ignore_eos" not in _body("openai-chat")
    assert _body("openai-chat", ignore_eos=True)["ignore_eos"] is True
    assert "temperature" not in _body("openai-chat")
    assert _body("openai-chat", temperature=0.0)["temperature"] == 0.0


def test_target_routes_and_headers() -> None:
    chat = Target.for_endpoint("http://h:1/v1/", "openai-chat", "m", "sk-1", 5.0)
    assert chat.url == "http://h:1/v1/chat/completions"
    assert chat.headers["Authorization"] == "Bearer sk-1"
    completions = Target.for_endpoint("http://h:1/v1", "openai-completions", "m", None, 5.0)
    assert completions.url == "http://h:1/v1/completions"
    assert "Authorization" not in completions.headers
