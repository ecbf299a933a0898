"""The simulator's `transformers` profile (Hugging Face `transformers serve`) and its switch for
multi-line data with CRLF line ends, checked against what that server does (ENGINES.md facts)
and against the server-sent events standard, with a hand-written reader here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from sim.app import SimApp
from sim.config import SimConfig
from tests.asgi import serve_in_loop

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
async def transformers() -> AsyncIterator[str]:
    config = SimConfig.for_engine("transformers", port=0, ttft_ms=0.0, itl_ms=0.0, model="m")
    async with serve_in_loop(SimApp(config)) as url:
        yield url


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "a b c"}], **fields}


def data_events(raw: bytes) -> list[Any]:
    """The JSON of each data event, read by the standard's rules for LF line ends."""
    out = []
    for block in raw.decode().split("\n\n"):
        lines = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if lines:
            out.append(json.loads("\n".join(lines)))
    return out


async def test_unknown_fields_get_its_422(transformers: str) -> None:
    async with httpx.AsyncClient(base_url=transformers) as client:
        answer = await client.post(CHAT, json=chat(max_tokens=4, ignore_eos=True, top_k=5))
    assert answer.status_code == 422
    assert answer.json() == {"detail": "Unexpected fields in the request: {'ignore_eos', 'top_k'}"}


async def test_generation_config_forces_the_length_and_nothing_else_does(transformers: str) -> None:
    forced = chat(
        max_tokens=9, stream=True, generation_config='{"min_new_tokens": 9, "max_new_tokens": 9}'
    )
    async with httpx.AsyncClient(base_url=transformers) as client:
        full = await client.post(CHAT, json=forced)
        short = await client.post(CHAT, json=chat(max_tokens=9, stream=True))
    events = data_events(full.content)
    # the role chunk, 9 content chunks, the last with finish_reason and usage; no [DONE]
    assert b"[DONE]" not in full.content
    texts = [e["choices"][0]["delta"].get("content") for e in events if e["choices"]]
    assert len([t for t in texts if t]) == 9
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 9
    # Not forced: the model stops at its end of sequence after 3 tokens (the profile's).
    unforced = data_events(short.content)
    assert unforced[-1]["choices"][0]["finish_reason"] == "stop"
    assert unforced[-1]["usage"]["completion_tokens"] == 3


async def test_no_tokenize_and_no_metrics_route(transformers: str) -> None:
    async with httpx.AsyncClient(base_url=transformers) as client:
        assert (await client.post("/tokenize", json={"prompt": "a"})).status_code == 404
        assert (await client.get("/metrics")).status_code == 404
        assert (await client.get("/v1/models")).status_code == 200


async def test_multiline_crlf_events_join_back_to_the_plain_ones() -> None:
    plain = SimConfig(port=0, ttft_ms=0.0, itl_ms=0.0, model="m")
    split = SimConfig(port=0, ttft_ms=0.0, itl_ms=0.0, model="m", sse_multiline_crlf=True)
    body = chat(max_tokens=5, stream=True, stream_options={"include_usage": True})
    bodies = []
    for config in (plain, split):
        async with serve_in_loop(SimApp(config)) as url, httpx.AsyncClient(base_url=url) as c:
            bodies.append((await c.post(CHAT, json=body)).content)
    plain_raw, split_raw = bodies
    assert b"\r\n" not in plain_raw
    # every line ends CRLF, and every JSON event is two data lines
    assert split_raw.replace(b"\r\n", b"").count(b"\n") == 0
    json_events = [b for b in split_raw.split(b"\r\n\r\n") if b.startswith(b"data: {")]
    assert json_events and all(b.count(b"\r\ndata:") == 1 for b in json_events)

    # joined with a newline, as the standard says, they are the plain stream's events
    def strip_ids(events: list[Any]) -> list[Any]:
        return [
            {k: v for k, v in e.items() if k not in ("id", "created")}
            for e in events
            if e != "DONE"
        ]

    assert strip_ids(
        data_events(split_raw.replace(b"\r\n", b"\n").replace(b"data: [DONE]\n\n", b""))
    ) == strip_ids(data_events(plain_raw.replace(b"data: [DONE]\n\n", b"")))
