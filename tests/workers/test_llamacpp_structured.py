"""Structured output as a real llama-server answers it (tests/fixtures/engines/llamacpp, its
README gives each capture's request), replayed over loopback through the production read path
(`send()` on a slot's connection and through httpx's pool) and judged as a job judges it
(workers/runner/driver.py after the level).

The reference values are read off the captures by hand: the content events counted in the
file, the usage of its last event, the text its content pieces spell.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from infercost.figures.metrics import RequestTiming
from infercost.workload.tools import STRUCTURED_SCHEMA, Judge, response_format
from tests.asgi import Receive, Send, read_body, serve_in_loop
from tests.engine_fixtures import REPO_FIXTURES
from workers.loadgen.stream import RawRequest, Target, request_body, send
from workers.loadgen.transport import load_client
from workers.runner.driver import _judge_answers
from workers.runner.sources import item_judge

FIXTURES = REPO_FIXTURES / "llamacpp"
EVENT_GAP_S = 0.002
PATHS = ("slot", "pool")
PROMPT = "Hello world, how are you?"

#: The schema of the `-bounded` captures, as their README request gives it: every value one
#: llama.cpp's grammar bounds (an enum, an integer between bounds, a boolean).
BOUNDED_SCHEMA = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "neutral", "negative"]},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "resolved": {"type": "boolean"},
    },
    "required": ["sentiment", "stars", "resolved"],
    "additionalProperties": False,
}
#: The bounded answer's text, as the captures spell it (README.md, content).
BOUNDED_TEXT = '{"sentiment": "positive", "stars":3,\n"resolved"\n                 :true\n\n                    }'


def sse_events(data: bytes) -> list[bytes]:
    """The events of a captured SSE body, each with its terminating blank line."""
    return [event + b"\n\n" for event in data.split(b"\n\n") if event.strip()]


def http_parts(raw: bytes) -> tuple[int, bytes, bytes]:
    """(status, content type, body) of a captured whole response (`.http`)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = dict(line.split(b": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers[b"Content-Type"], body


class CaptureApp:
    """Serves the capture its first path segment names; keeps what it received and when it
    wrote each event of the latest stream."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.written: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        self.requests.append(await read_body(receive))
        raw = (FIXTURES / scope["path"].split("/")[1]).read_bytes()
        if scope["path"].split("/")[1].endswith(".http"):
            status, content_type, payload = http_parts(raw)
            chunks = [payload]
        else:
            status = 200
            is_sse = scope["path"].split("/")[1].endswith(".sse")
            content_type = b"text/event-stream" if is_sse else b"application/json"
            chunks = sse_events(raw) if is_sse else [raw]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", content_type)],
            }
        )
        self.written = []
        for chunk in chunks:
            self.written.append(time.perf_counter_ns())
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await asyncio.sleep(EVENT_GAP_S)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.fixture(scope="module")
async def captures() -> AsyncIterator[tuple[str, CaptureApp]]:
    app = CaptureApp()
    async with serve_in_loop(app) as url:
        yield url, app


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


async def fetch(
    base: str, capture: str, path: str, features: dict[str, Any], *, stream: bool = True
) -> RawRequest:
    """One request of a job with `features` (workload.features fields) through send(), its
    answer kept apart for the judge, as a level that judges its answers keeps it."""
    target = Target.for_endpoint(
        f"{base}/{capture}/v1", "openai-chat", "tiny-llama-4x256", None, 5.0, engine="llamacpp"
    )
    body = request_body(
        target, PROMPT, 64, stream=stream, ignore_eos=False, temperature=0, features=features
    )
    rec = RawRequest(0, False, time.perf_counter_ns(), 10, keep_parts=True)
    async with load_client(4) as client:
        await send(client, target, body, rec, stream=stream, slot=0 if path == "slot" else None)
    return rec


def judged(rec: RawRequest, judge: Judge | None) -> RequestTiming:
    """The request's figures, its answer judged as the driver judges a level's answers."""
    timing = rec.timing(rec.t_sched)
    _judge_answers([rec], [timing], lambda _seq: judge)
    return timing


def recorded_request(capture: str) -> dict[str, Any]:
    """The request a capture answers, as its README line gives it."""
    for line in (FIXTURES / "README.md").read_text().splitlines():
        if line.startswith(f"- {capture} "):
            request = line.split(" POST /v1/chat/completions ", 1)[1].split(" -> ", 1)[0]
            parsed: dict[str, Any] = json.loads(request)
            return parsed
    raise AssertionError(f"README.md does not list {capture}")


STRUCTURED = {"response_format": response_format(STRUCTURED_SCHEMA)}
BOUNDED = {"response_format": response_format(BOUNDED_SCHEMA)}


def test_the_captured_request_is_what_a_structured_job_sends() -> None:
    """The capture stays evidence only while jobs still ask the way it was asked."""
    target = Target.for_endpoint(
        "http://127.0.0.1:1/v1", "openai-chat", "tiny-llama-4x256", None, 5.0, engine="llamacpp"
    )
    sent = msgspec.json.decode(
        request_body(
            target, PROMPT, 64, stream=True, ignore_eos=False, temperature=0, features=STRUCTURED
        )
    )
    recorded = recorded_request("chat-stream-json-schema.sse")
    assert recorded.pop("seed") == 1
    assert sent == recorded
    # The job's default asks for an exact length: the capture that breaks off
    with_eos = recorded_request("error-json-schema-ignore-eos.sse")
    assert with_eos["ignore_eos"] is True
    assert with_eos["response_format"] == recorded["response_format"]


async def test_grammar_bounded_answer_is_valid_json_of_its_schema(
    captures: tuple[str, CaptureApp], path: str
) -> None:
    base, app = captures
    rec = await fetch(base, "chat-stream-json-schema-bounded.sse", path, BOUNDED)
    assert rec.error_class is None, rec.error
    # 50 events: the role (content null), 46 content pieces, the finish, usage, [DONE]
    assert len(rec.chunk_ns) == 46
    # usage: completion_tokens 56 (the grammar's white space goes out as pieces of several
    # tokens, so there are fewer pieces than tokens), prompt_tokens 15, 14 of them cached
    assert (rec.n_out, rec.count_source) == (56, "usage")
    assert (rec.n_in, rec.cached_tokens) == (15, 14)
    # TTFT is stamped at the first content piece ("{", event 1), not at the role event
    assert rec.t_first_byte is not None
    assert rec.t_content == rec.chunk_ns[0]
    assert rec.t_first_byte >= app.written[0]
    assert rec.chunk_ns[0] >= app.written[1]
    assert rec.t_first_byte < rec.chunk_ns[0]
    # the answer the judge reads is the text the pieces spell
    assert rec.parts is not None
    assert "".join(rec.parts.content) == BOUNDED_TEXT
    # as a dataset item with its own schema is judged (item_judge)
    t = judged(rec, item_judge(BOUNDED, None))
    assert t.succeeded
    assert t.structured_valid is True
    assert t.invalid_reasons == []
    assert t.n_out == 56
    assert t.ttft is not None
    assert t.ttft == t.ttfo
    # llama.cpp's own timings of the request, from the usage event
    assert rec.server is not None
    assert (rec.server.n_out, rec.server.n_prefilled) == (56, 1)


async def test_the_workers_schema_gets_json_that_breaks_its_bounds(
    captures: tuple[str, CaptureApp], path: str
) -> None:
    """llama.cpp's grammar keeps the answer JSON of the schema's shape but does not bound a
    number: the capture's confidence is 3, above the schema's maximum of 1."""
    base, _ = captures
    rec = await fetch(base, "chat-stream-json-schema.sse", path, STRUCTURED)
    assert rec.error_class is None, rec.error
    # 42 events: role, 38 content pieces, finish, usage, [DONE]; usage says 50 tokens
    assert len(rec.chunk_ns) == 38
    assert (rec.n_out, rec.n_in, rec.count_source) == (50, 15, "usage")
    assert rec.t_content == rec.chunk_ns[0]
    assert rec.parts is not None
    text = "".join(rec.parts.content)
    assert text == '{"sentiment": "positive", "confidence":3,\n"topics"\n   : [] }'
    assert json.loads(text)["confidence"] == 3
    # judged as a job of the structured feature judges it
    t = judged(rec, Judge(None, STRUCTURED_SCHEMA))
    assert t.succeeded
    assert t.structured_valid is False
    assert t.invalid_reasons == ["schema"]


async def test_a_whole_structured_answer(captures: tuple[str, CaptureApp], path: str) -> None:
    base, _ = captures
    rec = await fetch(base, "chat-json-schema-bounded.json", path, BOUNDED, stream=False)
    assert rec.error_class is None, rec.error
    # one body: the whole text at once, usage 56 tokens out of 15 in (14 cached)
    assert len(rec.chunk_ns) == 1
    assert (rec.n_out, rec.n_in, rec.cached_tokens) == (56, 15, 14)
    assert rec.parts is not None
    assert "".join(rec.parts.content) == BOUNDED_TEXT
    t = judged(rec, item_judge(BOUNDED, None))
    assert t.structured_valid is True
    assert t.tpot is None  # no time per token in an answer that came at once


async def test_a_json_object_answer_comes_in_one_piece_at_the_end(
    captures: tuple[str, CaptureApp], path: str
) -> None:
    """response_format json_object: the server sent the whole object "{}" as one piece after
    generating 14 tokens (its white space left out), so the first content is the last."""
    base, _ = captures
    features = {"response_format": {"type": "json_object"}}
    rec = await fetch(base, "chat-stream-json-object.sse", path, features)
    assert rec.error_class is None, rec.error
    assert len(rec.chunk_ns) == 1
    assert (rec.n_out, rec.count_source) == (14, "usage")
    assert rec.t_content == rec.chunk_ns[0]
    assert rec.parts is not None
    assert json.loads("".join(rec.parts.content)) == {}
    # a dataset item asking for json_object is judged as that mode promises: a JSON object
    t = judged(rec, item_judge(features, None))
    assert t.structured_valid is True
    assert t.invalid_reasons == []


async def test_an_exact_length_breaks_off_the_structured_stream(
    captures: tuple[str, CaptureApp], path: str
) -> None:
    """A job's default (ignore_eos) with structured output: once the grammar is complete the
    only token it allows is the end, which ignore_eos forbids; the server sends an error
    event after the 38 content pieces and no [DONE]."""
    base, _ = captures
    rec = await fetch(base, "error-json-schema-ignore-eos.sse", path, STRUCTURED)
    assert rec.error_class == "protocol"
    assert rec.error is not None
    assert "Unexpected empty grammar stack" in rec.error
    assert len(rec.chunk_ns) == 38
    t = judged(rec, Judge(None, STRUCTURED_SCHEMA))
    assert not t.succeeded
    assert t.structured_valid is None  # a failed request's answer is not judged


async def test_without_a_chat_template_structured_output_is_refused(
    captures: tuple[str, CaptureApp], path: str
) -> None:
    """The model has no chat template; with llama.cpp's ChatML fallback the grammar refuses
    the generation prompt and the server answers 400."""
    base, _ = captures
    rec = await fetch(base, "error-json-schema-chatml.http", path, STRUCTURED)
    assert rec.status == 400
    assert rec.error_class == "http_4xx"
    assert rec.error is not None
    assert "Failed to initialize samplers" in rec.error
    assert not rec.chunk_ns


def test_a_json_object_item_judges_json_that_is_not_an_object_invalid() -> None:
    judge = item_judge({"response_format": {"type": "json_object"}}, None)
    assert judge is not None and judge.structured
    assert judge.answer('{"a": 1}').valid == 1
    assert judge.answer("[1, 2]").why == ("schema",)
    assert judge.answer("{").why == ("cut_short",)  # the text ended inside the JSON
    assert judge.answer('{"sentiment": "posi').why == ("cut_short",)  # inside a string
    assert judge.answer('{"topics": ["a",    ').why == ("cut_short",)
    # ... inside a number or a literal (the parser stops where the value starts)
    for cut in ('{"confidence": 0.', '{"a": tru', '{"a": -', '{"a": 1e', '{"a": nu'):
        assert judge.answer(cut).why == ("cut_short",), cut
    assert judge.answer('{"a": trux}').why == ("not_json",)
    assert judge.answer("{]").why == ("not_json",)
    assert judge.answer('{"a": 1} trailing').why == ("not_json",)
    assert judge.answer("").why == ("not_json",)
