"""The endpoint check and a job judge every stream alike: a set of broken (and sound) streams is
served on loopback, and for each the check's streaming probe passes exactly when a job's
request succeeds, and fails with the job's own reason when it fails.

Both send what a job sends (one body builder) and read with one reader; this holds them to
it over real HTTP, the job on its production path (a slot of the worker's load client)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from infercost.endpoints.preflight import Target as CheckTarget
from infercost.endpoints.preflight import run_check
from infercost.net.outbound import Policy
from tests.asgi import Receive, Send, read_body, send_json, serve_in_loop
from tests.workers.test_stream import ENDINGS, SHAPES, TOOL_CALLS, fixture_bytes
from workers.loadgen.stream import RawRequest, Target, request_body, send
from workers.loadgen.transport import load_client

#: Streams beyond test_stream's: an empty one, text that is not JSON, a refused field.
EXTRA: dict[str, tuple[int, bytes, list[bytes]]] = {
    "done-only": (200, b"text/event-stream", [b"data: [DONE]\n\n"]),
    "not-json": (200, b"text/event-stream", [b"data: {not json\n\n"]),
    "html": (200, b"text/html", [b"<html><body>a login page</body></html>"]),
    "refused-field": (
        422,
        b"application/json",
        [b'{"detail":"Unexpected fields in the request: {\'ignore_eos\'}"}'],
    ),
    "no-key": (401, b"application/json", [b'{"error":{"message":"Invalid API key"}}']),
}

#: What docs/figures.md makes of each (None: a request that succeeds); the shapes all succeed.
EXPECTED: dict[str, str | None] = {
    "just-stops": "stream_broken",
    "unended-done": "stream_broken",
    "html": "stream_broken",
    "error-event": "protocol",
    "error-event-split": "protocol",
    "error-object": "protocol",
    "error-string": "protocol",
    "error-object-type": "protocol",
    "llamacpp-error-line": "protocol",
    "not-json": "protocol",
    "not-a-stream": "protocol",
    "done-only": "empty",
    "refused-field": "http_4xx",
    "no-key": "http_4xx",
}

STREAMS: dict[str, tuple[int, bytes, list[bytes]]] = {
    **{name: (200, b"text/event-stream", events) for name, events in ENDINGS.items()},
    **{f"shape-{name}": (200, b"text/event-stream", e) for name, e in SHAPES.items()},
    "tool-calls": (200, b"text/event-stream", TOOL_CALLS),
    "not-a-stream": (200, b"application/json", [fixture_bytes("chat-nostream.json")]),
    **EXTRA,
}


class Streams:
    """`/<name>/v1/chat/completions` answers STREAMS[name]; `/<name>/v1/models` lists `m`."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        await read_body(receive)
        name, _, rest = scope["path"].strip("/").partition("/")
        if rest == "v1/models":
            await send_json(send, 200, {"object": "list", "data": [{"id": "m"}]})
            return
        if rest != "v1/chat/completions" or name not in STREAMS:
            await send_json(send, 404, {"detail": "not found"})
            return
        status, kind, pieces = STREAMS[name]
        headers = [(b"content-type", kind)]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for piece in pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture(scope="module")
async def streams() -> AsyncIterator[str]:
    async with serve_in_loop(Streams()) as url:
        yield url


async def job_request(base: str) -> RawRequest:
    target = Target.for_endpoint(base, "openai-chat", "m", None, 5.0)
    body = request_body(target, "hello", 4, stream=True, ignore_eos=True, temperature=None)
    rec = RawRequest(0, False, time.perf_counter_ns(), 2)
    async with load_client(2) as client:
        await send(client, target, body, rec, stream=True, slot=0)
    return rec


@pytest.mark.parametrize("name", sorted(STREAMS))
async def test_the_check_and_a_job_judge_a_stream_alike(streams: str, name: str) -> None:
    base = f"{streams}/{name}/v1"
    rec = await job_request(base)
    check = await run_check(CheckTarget(base, "m"), Policy.parse(["127.0.0.0/8"]))
    probe = next(p for p in check["probes"] if p["name"] == "streaming")
    if rec.error_class is None:
        assert probe["status"] == "pass", probe
    else:
        assert probe["status"] == "fail", (rec.error, probe)
        assert rec.error is not None
        assert rec.error in probe["detail"]
    # every broken stream of the set is caught, every sound one passes
    sound = name.startswith("shape-") or name in (
        "finish-no-done",
        "empty-error-event",
        "tool-calls",
    )
    assert (rec.error_class is None) == sound, rec.error


async def test_a_refused_field_is_named_with_the_fix(streams: str) -> None:
    base = f"{streams}/refused-field/v1"
    rec = await job_request(base)
    check = await run_check(CheckTarget(base, "m"), Policy.parse(["127.0.0.0/8"]))
    assert rec.error_class == "http_4xx"
    assert rec.error is not None
    assert "refuses the request field 'ignore_eos'" in rec.error
    assert "set the endpoint's engine to transformers" in rec.error
    probe = next(p for p in check["probes"] if p["name"] == "streaming")
    assert probe["refused_fields"] == ["ignore_eos"]
    assert check["engine"] == "transformers"  # the wording is transformers serve's
    assert check["ok"] is False
