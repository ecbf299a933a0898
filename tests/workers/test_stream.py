"""`send()` against real HTTP on loopback: captured llama-server responses replayed event by event,
servers that fail in each of the ways docs/figures.md names, and every server-sent events rule.

Every case runs on both ways a body reaches the one read loop (`path`): `slot`, the production
path (the worker's load client, a request written straight to a slot's connection, each read
stamped at the socket) and `pool`, httpx's own pool (what a request through a proxy or without
a slot takes). No mocked transport: uvicorn serves an ASGI app in this test's event loop, or a
raw asyncio TCP server writes the bytes itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest

from infercost.figures.metrics import summarize
from tests.asgi import Receive, Send, read_body, send_json, serve_in_loop
from tests.engine_fixtures import shared_llama_server
from workers.loadgen.stream import RawRequest, Target, request_body, send
from workers.loadgen.tokenize import Tokenizer, count_outputs
from workers.loadgen.transport import load_client

FIXTURES = shared_llama_server()
EVENT_GAP_S = 0.005
#: The two ways a body reaches the read loop: straight off a slot's connection, or out of
#: httpx's pool.
PATHS = ("slot", "pool")


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


async def _replay_sse(send: Send, events: list[bytes], written: list[int] | None = None) -> None:
    """Send `events` EVENT_GAP_S apart; `written` gets perf_counter_ns as each is sent."""
    await _start(send, 200, b"text/event-stream")
    for event in events:
        if written is not None:
            written.append(time.perf_counter_ns())
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await asyncio.sleep(EVENT_GAP_S)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


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


#: The captured stream's role event, two content events and its finish event (no usage).
_CAPTURED = sse_events(fixture_bytes("chat-stream-usage.sse"))
_ROLE, _TWO, _FINISH = _CAPTURED[0], _CAPTURED[1:3], _CAPTURED[9]

#: A chat completion as TGI answers one that is not streamed (its timings are in headers).
TGI_CHAT_BODY = (
    b'{"object":"chat.completion","choices":[{"index":0,"finish_reason":"length",'
    b'"message":{"role":"assistant","content":"a b c d e"}}],'
    b'"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}'
)

#: Streams that end in each way docs/figures.md distinguishes.
ENDINGS: dict[str, list[bytes]] = {
    # The body just stops: no finish_reason, no [DONE].
    "just-stops": [_ROLE, *_TWO],
    # A finish_reason ends it properly even without [DONE].
    "finish-no-done": [_ROLE, *_TWO, _FINISH],
    # An SSE error event after two tokens; its data has no `error` key, so only the named
    # event says it is one.
    "error-event": [
        _ROLE,
        *_TWO,
        b'event: error\ndata: {"message":"Request failed during generation: CUDA out of memory"}\n\n',
    ],
    # The same named error event, its `event:` field split across two reads.
    "error-event-split": [
        _ROLE,
        *_TWO,
        b"even",
        b't: error\ndata: {"message":"split across reads"}\n\n',
    ],
    # An event named `error` that carries no data: the blank line ends it, and the events
    # after it are plain data again, so the stream succeeds.
    "empty-error-event": [_ROLE, b"event: error\n\n", *_TWO, _FINISH],
    # An error object in a plain data event (vLLM's and SGLang's form).
    "error-object": [
        _ROLE,
        *_TWO,
        b'data: {"error":{"message":"engine dead","type":"InternalServerError","code":500}}\n\n',
    ],
    # transformers serve's error: a string, not an object; no [DONE] after it.
    "error-string": [_ROLE, *_TWO, b'data: {"error":"CUDA error: device-side assert"}\n\n'],
    # Older vLLM: an error without the `error` wrapper.
    "error-object-type": [
        _ROLE,
        *_TWO,
        b'data: {"object":"error","message":"engine loop died","code":500}\n\n',
    ],
    # Older llama.cpp builds: `error: {...}`, a field server-sent events ignore; the stream
    # then stops, and the reason names what the server wrote.
    "llamacpp-error-line": [
        _ROLE,
        *_TWO,
        b'error: {"code":500,"message":"the context is full","type":"server_error"}\n\n',
    ],
    # [DONE] without the blank line that would dispatch it, at the end of the body: the
    # standard discards an event never ended, so the body just stopped.
    "unended-done": [_ROLE, *_TWO, b"data: [DONE]\n"],
}


def _crlf_multiline(event: bytes) -> bytes:
    """An event of the capture with its JSON split over two `data:` lines after a comma
    (the standard joins them with a newline, which JSON takes as space) and CRLF line ends."""
    payload = event.strip().removeprefix(b"data: ")
    if payload == b"[DONE]":
        return b"data: [DONE]\r\n\r\n"
    cut = payload.index(b",", len(payload) // 2) + 1
    return b"data: " + payload[:cut] + b"\r\ndata:" + payload[cut:] + b"\r\n\r\n"


_WHOLE = sse_events(fixture_bytes("chat-stream-usage.sse"))
#: The whole captured stream (8 content events, usage, [DONE]) in every shape the standard
#: allows; each must read exactly as the capture does.
SHAPES: dict[str, list[bytes]] = {
    "as-captured": _WHOLE,
    "multiline-crlf": [_crlf_multiline(e) for e in _WHOLE],
    "cr-only": [e.replace(b"\n", b"\r") for e in _WHOLE],
    # CRLF ends, each event's CR at the end of one write and its LF at the start of the next.
    "crlf-split": [
        (b"\n" if i else b"") + e.replace(b"\n", b"\r\n")[:-1] for i, e in enumerate(_WHOLE)
    ],
    # A byte order mark first, comments and ids and retry lines around the data, an event
    # type nobody asked for with an empty JSON object, an event of only a comment.
    "fields": [
        b"\xef\xbb\xbf: a comment before anything\n\n",
        *(b": keep-alive\nid: %d\nretry: 1000\n" % i + e for i, e in enumerate(_WHOLE[:5])),
        b"event: ping\ndata: {}\n\n",
        b"id\n: only a comment\n\n",
        *_WHOLE[5:],
    ],
    # Every event in one write: the request has no per-token time (not a time of zero).
    "one-write": [b"".join(_WHOLE)],
}


def _tool_delta(call: dict[str, Any]) -> bytes:
    delta = {"tool_calls": [{"index": 0, **call}]}
    event = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + msgspec.json.encode(event) + b"\n\n"


#: A model answering with a tool call only: its name, then its arguments in three pieces.
TOOL_CALLS = [
    _ROLE,
    _tool_delta({"id": "call_1", "type": "function", "function": {"name": "get_weather"}}),
    _tool_delta({"function": {"arguments": '{"city":'}}),
    _tool_delta({"function": {"arguments": ' "Oslo"'}}),
    _tool_delta({"function": {"arguments": "}"}}),
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
    b"data: [DONE]\n\n",
]


class ReplayApp:
    """ASGI app: the first path segment names what to answer; requests are kept for checks."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        #: perf_counter_ns as each event of the latest captured stream was sent.
        self.written: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        body = await read_body(receive)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.requests.append((scope["path"], headers, body))
        scenario = scope["path"].split("/")[1]
        if scenario.endswith("-sse"):
            self.written = []
            await _replay_sse(
                send,
                sse_events(fixture_bytes(scenario.removesuffix("-sse") + ".sse")),
                self.written,
            )
        elif scenario == "chat-nostream":
            await send_json(send, 200, fixture_bytes("chat-nostream.json"))
        elif scenario == "error-400":
            await send_json(send, 400, fixture_bytes("error-400.json"))
        elif scenario == "unavailable":
            await send_json(send, 503, b'{"error":{"code":503,"message":"Loading model"}}')
        elif scenario == "malformed":
            await _replay_sse(send, [b"data: {not json\n\n"])
        elif scenario == "done-only":
            await _replay_sse(send, [b"data: [DONE]\n\n"])
        elif scenario == "stall":
            await _stall(receive, send)
        elif scenario in ENDINGS:
            await _replay_sse(send, ENDINGS[scenario])
        elif scenario.startswith("shape-"):
            await _replay_sse(send, SHAPES[scenario.removeprefix("shape-")])
        elif scenario == "not-a-stream":
            # A server that does not stream: one whole answer to a streamed request.
            await send_json(send, 200, fixture_bytes("chat-nostream.json"))
        elif scenario == "tool-calls":
            await _replay_sse(send, TOOL_CALLS)
        elif scenario == "finish-then-hold":
            # A finish_reason and no [DONE], then the body stays open a second before it
            # ends; `written` gets the finish event's time, then the end's.
            self.written = []
            await _start(send, 200, b"text/event-stream")
            for event in [_ROLE, *_TWO, _FINISH]:
                self.written.append(time.perf_counter_ns())
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await asyncio.sleep(1.0)
            self.written.append(time.perf_counter_ns())
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif scenario == "tgi-nostream":
            headers = [
                (b"content-type", b"application/json"),
                (b"x-queue-time", b"7"),
                (b"x-inference-time", b"120"),
                (b"x-time-per-token", b"24"),
                (b"x-generated-tokens", b"5"),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": TGI_CHAT_BODY})
        else:
            await send_json(send, 404, b'{"detail":"no such scenario"}')


@pytest.fixture(scope="module")
async def replay() -> AsyncIterator[tuple[str, ReplayApp]]:
    """uvicorn serving ReplayApp on a free loopback port, inside the tests' event loop."""
    app = ReplayApp()
    async with serve_in_loop(app) as url:
        yield url, app


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Which way the body reaches the read loop (see the module docstring)."""
    value: str = request.param
    return value


async def fetch(
    base_url: str,
    path: str = "slot",
    api: str = "openai-chat",
    *,
    stream: bool = True,
    timeout_s: float = 5.0,
) -> RawRequest:
    """One request through send(), as the load generator makes it: on slot 0 of the worker's
    load client (`slot`), or without a slot, through its httpx pool (`pool`)."""
    target = Target.for_endpoint(base_url, api, "m", None, timeout_s)
    body = request_body(target, "hello there", 8, stream=stream, ignore_eos=True, temperature=None)
    rec = RawRequest(seq=0, warmup=False, t_sched=time.perf_counter_ns(), n_in_local=10)
    async with load_client(4) as client:
        await send(client, target, body, rec, stream=stream, slot=0 if path == "slot" else None)
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


async def test_chat_stream_with_usage(replay: tuple[str, ReplayApp], path: str) -> None:
    base, app = replay
    rec = await fetch(f"{base}/chat-stream-usage-sse/v1", path)
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
    assert list(rec.chunk_ns) == sorted(rec.chunk_ns)
    assert rec.t_end is not None
    assert rec.t_end >= rec.chunk_ns[-1]

    # Against the server's own record of when it sent each event (the same clock, the same
    # process): each token's time is no earlier than its own event, never the role event's
    # or the one before, so the timestamps belong to the content events in order.
    role_sent, content_sent = app.written[0], app.written[1:9]
    assert rec.t_first_byte >= role_sent
    assert all(got >= sent for got, sent in zip(rec.chunk_ns, content_sent, strict=True))

    t = rec.timing(rec.t_sched)
    assert t.succeeded
    assert t.ttfb is not None
    assert t.ttft is not None
    assert 0 < t.ttfb < t.ttft
    assert t.ttft >= (content_sent[0] - rec.t_send) * 1e-9
    # TPOT spans the 8 tokens' 7 gaps, so the last token is ttft + 7 TPOT after the send:
    # no earlier than the server sent it.
    assert t.tpot is not None
    assert t.ttft + 7 * t.tpot >= (content_sent[-1] - rec.t_send) * 1e-9 - 1e-9

    # what the server received: the chat route, the body request_body() built
    path, headers, body = app.requests[-1]
    assert path == "/chat-stream-usage-sse/v1/chat/completions"
    assert headers["accept"] == "text/event-stream"
    sent = msgspec.json.decode(body)
    assert sent["stream"] is True
    assert sent["messages"] == [{"role": "user", "content": "hello there"}]
    # llama.cpp's own timings and cache count, as the captured usage event states them
    assert rec.cached_tokens == 0
    assert rec.server is not None
    assert rec.server.source == "llamacpp"
    assert rec.server.prefill_ms == 18.145
    assert rec.server.per_token_ms == pytest.approx(42.313 / 7)
    assert rec.server.n_out == 8
    assert rec.server.n_prefilled == 18


async def test_chat_stream_without_usage_counts_events(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/chat-stream-no-usage-sse/v1", path)
    assert rec.error_class is None, rec.error
    assert content_events("chat-stream-no-usage.sse") == 5
    assert len(rec.chunk_ns) == 5
    assert rec.n_out == 5
    assert rec.count_source == "events"
    # no usage: the prompt count is the local one
    assert rec.n_in == 10
    # ... but the finish event's timings say 4 prompt tokens came from the cache, 5 prefilled
    assert rec.cached_tokens == 4
    assert rec.server is not None
    assert (rec.server.n_prefilled, rec.server.n_out, rec.server.prefill_ms) == (5, 5, 14.656)


async def test_completions_stream_with_usage(replay: tuple[str, ReplayApp], path: str) -> None:
    base, app = replay
    rec = await fetch(f"{base}/completions-stream-usage-sse/v1", path, "openai-completions")
    assert rec.error_class is None, rec.error
    # five events with text; the finish event's text is "" and does not count
    assert content_events("completions-stream-usage.sse") == 5
    assert len(rec.chunk_ns) == 5
    assert rec.n_out == 5
    assert rec.n_in == 5
    assert rec.count_source == "usage"
    assert rec.cached_tokens == 1  # usage.prompt_tokens_details.cached_tokens
    path, _, body = app.requests[-1]
    assert path == "/completions-stream-usage-sse/v1/completions"
    assert msgspec.json.decode(body)["prompt"] == "hello there"


async def test_chat_not_streamed(replay: tuple[str, ReplayApp], path: str) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/chat-nostream/v1", path, stream=False)
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
    assert rec.cached_tokens == 8  # the captured body's usage.prompt_tokens_details


async def test_tgi_timing_headers_are_the_servers_timings(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/tgi-nostream/v1", path, stream=False)
    assert rec.error_class is None, rec.error
    assert rec.server is not None
    assert rec.server.source == "tgi"
    assert (rec.server.queue_ms, rec.server.per_token_ms, rec.server.n_out) == (7.0, 24.0, 5)
    assert rec.cached_tokens is None  # the server did not say


async def test_finish_reason_without_done_is_a_proper_end(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/finish-no-done/v1", path)
    assert rec.error_class is None, rec.error
    assert len(rec.chunk_ns) == 2


async def test_without_done_the_request_ends_with_its_last_event(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    # The server held the body open a second after the finish event: the request ended
    # with that event, not when the server got round to closing the body.
    base, app = replay
    rec = await fetch(f"{base}/finish-then-hold/v1", path)
    assert rec.error_class is None, rec.error
    finish_sent, end_sent = app.written[-2], app.written[-1]
    assert rec.t_end is not None
    assert finish_sent <= rec.t_end < end_sent


async def test_an_error_event_without_data_ends_at_its_blank_line(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/empty-error-event/v1", path)
    assert rec.error_class is None, rec.error
    assert len(rec.chunk_ns) == 2


# --- failures ---------------------------------------------------------------------------------


async def test_a_body_that_just_stops_is_stream_broken(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/just-stops/v1", path)
    assert rec.status == 200
    assert rec.error_class == "stream_broken"
    assert rec.error is not None
    assert "without [DONE] or a finish_reason" in rec.error
    assert len(rec.chunk_ns) == 2  # what did arrive was timed and counted
    assert rec.n_out == 2


@pytest.mark.parametrize(
    ("scenario", "said"),
    [
        ("error-event", "CUDA out of memory"),
        ("error-event-split", "split across reads"),
        ("error-object", "engine dead"),
    ],
)
async def test_an_error_in_the_stream_is_a_protocol_error(
    replay: tuple[str, ReplayApp], path: str, scenario: str, said: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/{scenario}/v1", path)
    assert rec.status == 200
    assert rec.error_class == "protocol"
    assert rec.error is not None
    assert said in rec.error
    assert len(rec.chunk_ns) == 2


async def test_http_400_keeps_the_servers_message(replay: tuple[str, ReplayApp], path: str) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/error-400/v1", path)
    assert rec.status == 400
    assert rec.error_class == "http_4xx"
    assert rec.error is not None
    assert "Expected 'messages' to be an array" in rec.error
    assert "400" in rec.error
    assert not rec.chunk_ns
    assert rec.n_out == 0
    assert rec.t_end is not None


async def test_http_503(replay: tuple[str, ReplayApp], path: str) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/unavailable/v1", path)
    assert rec.status == 503
    assert rec.error_class == "http_5xx"
    assert rec.error is not None
    assert "Loading model" in rec.error
    assert not rec.timing(rec.t_sched).succeeded


async def test_connection_refused(path: str) -> None:
    base = "http://127.0.0.1:1/v1"
    rec = await fetch(base, path)
    assert rec.error_class == "connect"
    assert rec.error is not None
    assert f"connection refused at {base}" in rec.error
    assert rec.status is None
    assert rec.t_end is not None
    assert rec.n_in == 10  # the local count is kept for a request that never got an answer


async def test_malformed_event_is_a_protocol_error(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/malformed/v1", path)
    assert rec.status == 200
    assert rec.error_class == "protocol"
    assert rec.error is not None
    assert "malformed" in rec.error


async def test_stream_with_only_done_is_empty(replay: tuple[str, ReplayApp], path: str) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/done-only/v1", path)
    assert rec.status == 200
    assert rec.error_class == "empty"
    assert not rec.chunk_ns
    assert rec.n_out == 0


async def test_stalled_server_times_out(replay: tuple[str, ReplayApp], path: str) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/stall/v1", path, timeout_s=0.3)
    assert rec.error_class == "timeout"
    assert rec.error == "no complete response within 0.3 s"
    assert not rec.chunk_ns
    assert rec.t_end is not None
    # it gave up at the limit (counted from the call, connecting included), not when the
    # server finally hung up 5 s later
    assert 0.3 <= (rec.t_end - rec.t_sched) * 1e-9 < 3.0


@contextlib.asynccontextmanager
async def truncated_stream_server(events: list[bytes], gap_s: float) -> AsyncIterator[str]:
    """A raw HTTP server on loopback that streams `events` as chunks `gap_s` apart, then
    closes the connection without the terminating zero-length chunk; yields its /v1 URL."""

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
            await asyncio.sleep(gap_s)
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


async def test_connection_closed_mid_stream_is_stream_broken(path: str) -> None:
    events = sse_events(fixture_bytes("chat-stream-usage.sse"))[:2]  # role, first content
    async with truncated_stream_server(events, EVENT_GAP_S) as url:
        rec = await fetch(url, path)
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
    # Bodies as sent: a compressed stream could not be stamped read by read.
    assert chat.headers["Accept-Encoding"] == "identity"
    completions = Target.for_endpoint("http://h:1/v1", "openai-completions", "m", None, 5.0)
    assert completions.url == "http://h:1/v1/completions"
    assert "Authorization" not in completions.headers


def test_continuous_usage_asked_for_only_from_vllm() -> None:
    def options(engine: str | None) -> Any:
        target = Target.for_endpoint("http://h:1/v1", "openai-chat", "m", None, 5.0, engine=engine)
        body = request_body(target, "hi", 4, stream=True, ignore_eos=False, temperature=None)
        return msgspec.json.decode(body)["stream_options"]

    assert options("vllm") == {"include_usage": True, "continuous_usage_stats": True}
    assert options("VLLM") == {"include_usage": True, "continuous_usage_stats": True}
    for other in (None, "sglang", "llama.cpp", "tgi"):
        assert options(other) == {"include_usage": True}


# --- scripted streams: role events, reasoning, missing usage, several tokens per event -------

GAP_S = 0.02


def _chunk(delta: dict[str, Any] | None = None, usage: dict[str, int] | None = None) -> bytes:
    event: dict[str, Any] = {
        "object": "chat.completion.chunk",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    if usage is not None:
        event["usage"] = usage
    return b"data: " + msgspec.json.encode(event) + b"\n\n"


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


# Each scenario: (event, seconds to wait before sending it).
SCRIPTS: dict[str, list[tuple[bytes, float]]] = {
    # An empty role-only event at once, then the first content 3 gaps later.
    "role-then-content": [
        (_chunk({"role": "assistant", "content": ""}), 0.0),
        (_chunk({"content": " one"}), 3 * GAP_S),
        (_chunk({"content": " two"}), GAP_S),
        (_chunk({"content": " three"}), GAP_S),
        (_chunk(None, _usage(4, 3)), 0.0),
    ],
    # No usage at all; two words (tokens, for the tokenizer below) per event.
    "no-usage": [
        (_chunk({"role": "assistant", "content": ""}), 0.0),
        (_chunk({"content": " one two"}), GAP_S),
        (_chunk({"content": " three four"}), GAP_S),
        (_chunk({"content": " five six"}), GAP_S),
    ],
    # vLLM continuous usage: cumulative completion_tokens on every event; the events carry
    # 1, 3 and 2 tokens, and one event in between carries a token but no text yet.
    "continuous": [
        (_chunk({"role": "assistant", "content": ""}, _usage(4, 0)), 0.0),
        (_chunk({"content": " a"}, _usage(4, 1)), GAP_S),
        (_chunk({"content": " b c d"}, _usage(4, 4)), GAP_S),
        (_chunk({"content": ""}, _usage(4, 5)), GAP_S),
        (_chunk({"content": " e f"}, _usage(4, 6)), GAP_S),
        (_chunk(None, _usage(4, 6)), 0.0),
    ],
    # A reasoning model: three reasoning deltas, then the visible answer.
    "reasoning": [
        (_chunk({"role": "assistant", "content": ""}), 0.0),
        (_chunk({"reasoning_content": "Let"}), GAP_S),
        (_chunk({"reasoning_content": " me"}), GAP_S),
        (_chunk({"reasoning": " think"}), GAP_S),
        (_chunk({"content": " Yes"}), GAP_S),
        (_chunk({"content": "."}), GAP_S),
        (_chunk(None, _usage(4, 5)), 0.0),
    ],
}


class ScriptedApp:
    """Streams SCRIPTS[first path segment] with its delays, then [DONE]; `/<x>/tokenize`
    counts whitespace-separated words (vLLM's shape). Request bodies are kept."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        #: perf_counter_ns as each event of the latest scripted stream was sent.
        self.written: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        raw = await read_body(receive)
        body = msgspec.json.decode(raw) if raw else {}
        self.bodies.append((scope["path"], body))
        if scope["path"].endswith("/tokenize"):
            if "messages" in body:
                text = " ".join(m["content"] for m in body["messages"])
            else:
                text = body["prompt"]
            words = text.split()
            answer = {"count": len(words), "tokens": list(range(len(words))), "max_model_len": 8}
            await send_json(send, 200, answer)
            return
        await _start(send, 200, b"text/event-stream")
        self.written = []
        for event, delay in SCRIPTS[scope["path"].split("/")[1]]:
            await asyncio.sleep(delay)
            self.written.append(time.perf_counter_ns())
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


@pytest.fixture(scope="module")
async def scripted() -> AsyncIterator[tuple[str, ScriptedApp]]:
    """uvicorn serving ScriptedApp on a free loopback port."""
    app = ScriptedApp()
    async with serve_in_loop(app) as url:
        yield url, app


async def scripted_fetch(
    base: str,
    scenario: str,
    path: str,
    *,
    engine: str | None = None,
    keep_text: bool = False,
) -> RawRequest:
    target = Target.for_endpoint(
        f"{base}/{scenario}/v1", "openai-chat", "m", None, 5.0, engine=engine
    )
    body = request_body(target, "hello there", 8, stream=True, ignore_eos=True, temperature=None)
    rec = RawRequest(0, False, time.perf_counter_ns(), 2, keep_text=keep_text)
    async with load_client(4) as client:
        await send(client, target, body, rec, stream=True, slot=0 if path == "slot" else None)
    assert rec.error_class is None, rec.error
    return rec


async def test_ttft_skips_an_empty_role_event(scripted: tuple[str, ScriptedApp], path: str) -> None:
    base, app = scripted
    rec = await scripted_fetch(base, "role-then-content", path, keep_text=True)
    t = rec.timing(rec.t_sched)
    assert t.ttfb is not None
    assert t.ttft is not None
    # The role event is the first byte; the first token is the first content event: no
    # earlier than the server sent it (its own record, on the same clock), 3 gaps after the
    # role event, whenever a loaded machine let the client read either.
    role_sent, content_sent = app.written[0], app.written[1]
    assert rec.t_first_byte is not None and rec.t_first_byte >= role_sent
    assert rec.chunk_ns[0] >= content_sent > role_sent
    assert t.ttft >= (content_sent - rec.t_send) * 1e-9
    assert len(t.chunk_times) == 3
    # no reasoning: time to first output is time to first token
    assert t.ttfo == t.ttft
    assert rec.count_source == "usage"
    assert rec.n_out == 3
    # usage arrived, so the text kept for a tokenizer count was dropped
    assert rec.text is None
    # no continuous usage: nothing said per event, one token per event assumed
    assert t.chunk_tokens is None


async def test_without_usage_the_tokenizer_counts_the_text(
    scripted: tuple[str, ScriptedApp], path: str
) -> None:
    base, app = scripted
    rec = await scripted_fetch(base, "no-usage", path, keep_text=True)
    # at first: three content events, counted as three tokens
    assert rec.count_source == "events"
    assert rec.n_out == 3
    assert rec.n_in == 2  # the local count
    assert rec.text == [" one two", " three four", " five six"]
    target = Target.for_endpoint(f"{base}/no-usage/v1", "openai-chat", "m", None, 5.0)
    tokenizer = Tokenizer.for_target(target)
    assert tokenizer.url == f"{base}/no-usage/tokenize"
    async with httpx.AsyncClient() as client:
        await count_outputs(client, tokenizer, [rec])
    # then: the endpoint's tokenizer over the received text, six words = six tokens
    assert rec.count_source == "tokenizer"
    assert rec.n_out == 6
    assert rec.text is None
    path, body = app.bodies[-1]
    assert path == "/no-usage/tokenize"
    assert body == {
        "model": "m",
        "prompt": " one two three four five six",
        "add_special_tokens": False,
    }


async def test_without_usage_and_without_keeping_text_events_count(
    scripted: tuple[str, ScriptedApp], path: str
) -> None:
    base, _ = scripted
    rec = await scripted_fetch(base, "no-usage", path)
    assert rec.text is None
    assert rec.count_source == "events"
    assert rec.n_out == 3
    assert rec.timing(rec.t_sched).count_source == "events"


async def test_continuous_usage_weights_itl_by_tokens_per_event(
    scripted: tuple[str, ScriptedApp], path: str
) -> None:
    base, app = scripted
    rec = await scripted_fetch(base, "continuous", path, engine="vllm")
    assert app.bodies[-1][1]["stream_options"] == {
        "include_usage": True,
        "continuous_usage_stats": True,
    }
    assert rec.count_source == "usage"
    assert rec.n_out == 6
    # three events with text; the textless event's token goes to the next event with text
    assert len(rec.chunk_ns) == 3
    assert list(rec.chunk_tokens) == [1, 3, 2]
    t = rec.timing(rec.t_sched)
    assert t.chunk_tokens == [1, 3, 2]
    gap1 = t.chunk_times[1] - t.chunk_times[0]
    gap2 = t.chunk_times[2] - t.chunk_times[1]
    itl = summarize([t]).stats["itl_ms"]
    # gap1 once at weight 3 (gap1 / 3 each), gap2 at weight 2: five per-token values
    assert itl["count"] == 5
    assert itl["mean"] == pytest.approx((gap1 + gap2) * 1000.0 / 5)
    assert itl["min"] == pytest.approx(min(gap1 / 3, gap2 / 2) * 1000.0)
    assert itl["max"] == pytest.approx(max(gap1 / 3, gap2 / 2) * 1000.0)


async def test_reasoning_counts_for_ttft_and_ttfo_waits_for_content(
    scripted: tuple[str, ScriptedApp], path: str
) -> None:
    base, _ = scripted
    rec = await scripted_fetch(base, "reasoning", path, keep_text=True)
    t = rec.timing(rec.t_sched)
    # every event with text is timed: three reasoning, two content
    assert len(t.chunk_times) == 5
    assert t.ttft is not None
    assert t.ttfo is not None
    # TTFT is the first reasoning delta; TTFO the first visible content, three gaps later
    assert t.ttft == pytest.approx(t.chunk_times[0] - t.t_send)
    assert t.ttfo == pytest.approx(t.chunk_times[3] - t.t_send)
    assert t.ttfo - t.ttft >= 3 * GAP_S * 0.9
    assert rec.n_out == 5
    fig = summarize([t])
    assert fig.stats["ttfo_ms"]["count"] == 1
    assert fig.stats["ttfo_ms"]["mean"] == pytest.approx(t.ttfo * 1000.0)


# --- every rule of server-sent events, on both paths -------------------------------------------


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {"as-captured"}))
async def test_every_shape_the_standard_allows_reads_as_the_capture(
    replay: tuple[str, ReplayApp], path: str, shape: str
) -> None:
    base, _ = replay
    want = await fetch(f"{base}/shape-as-captured/v1", path)
    got = await fetch(f"{base}/shape-{shape}/v1", path)
    assert got.error_class is None, got.error
    # The capture's own figures (see test_chat_stream_with_usage): 8 content events, the
    # server's 8 output and 18 prompt tokens, llama.cpp's timings.
    assert (len(got.chunk_ns), got.n_out, got.n_in, got.count_source) == (8, 8, 18, "usage")
    assert got.server == want.server
    assert got.cached_tokens == want.cached_tokens == 0
    t = got.timing(got.t_sched)
    if shape == "one-write":
        # all 8 events came in one read: the same stamp for each, so no per-token time
        assert len(set(got.chunk_ns)) == 1
        assert t.tpot is None
        assert summarize([t]).stats["tpot_ms"]["count"] == 0
    else:
        assert t.tpot is not None
        assert t.tpot > 0


async def test_an_unended_done_is_discarded(replay: tuple[str, ReplayApp], path: str) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/unended-done/v1", path)
    assert rec.error_class == "stream_broken"
    assert rec.error is not None
    assert "never ended by a blank line" in rec.error
    assert len(rec.chunk_ns) == 2


@pytest.mark.parametrize(
    ("scenario", "said"),
    [
        ("error-string", "CUDA error: device-side assert"),
        ("error-object-type", "engine loop died"),
        ("llamacpp-error-line", "the context is full"),
    ],
)
async def test_every_engines_error_shape_is_a_protocol_error(
    replay: tuple[str, ReplayApp], path: str, scenario: str, said: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/{scenario}/v1", path)
    assert rec.error_class == "protocol"
    assert rec.error is not None
    assert said in rec.error
    assert len(rec.chunk_ns) == 2


async def test_a_whole_answer_to_a_streamed_request_says_the_server_does_not_stream(
    replay: tuple[str, ReplayApp], path: str
) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/not-a-stream/v1", path)
    assert rec.status == 200
    assert rec.error_class == "protocol"
    assert rec.error is not None
    assert "does not stream" in rec.error
    assert "application/json" in rec.error


async def test_tool_call_deltas_are_output(replay: tuple[str, ReplayApp], path: str) -> None:
    base, _ = replay
    rec = await fetch(f"{base}/tool-calls/v1", path)
    assert rec.error_class is None, rec.error
    # the name and the three argument pieces: four events of generated text
    assert len(rec.chunk_ns) == 4
    assert rec.n_out == 4
    assert rec.count_source == "events"
