"""Exact-length prompts through an endpoint's tokenizer route, served on loopback.

The server here counts tokens the way real tokenizers roughly do: a chat template that adds
a fixed number of tokens, words that are sometimes more than one token, and a sequence
number whose digits split into groups of three. Its count is the truth the prompts must hit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import numpy as np
import pytest

from infercost.workload.synthetic import PromptMaker
from tests.asgi import Receive, Send, read_body, send_json, serve_in_loop
from workers.loadgen.stream import Target
from workers.loadgen.tokenize import (
    PARALLEL,
    Calibrations,
    Prepared,
    Tokenizer,
    calibrate,
    exact_words,
    lanes,
    prepare_prompts,
    tokenize_url,
)
from workers.loadgen.transport import load_client

CHAT_OVERHEAD = 7  # e.g. <|begin_of_text|><|start_header_id|>user<|end_header_id|>...
BOS = 1


def word_tokens(word: str) -> int:
    """Digits in groups of three; other words one token per 4 letters, rounded up."""
    if word.isdigit():
        return -(-len(word) // 3)
    return -(-len(word) // 4)


def true_count(text: str, *, chat: bool, special: bool = True) -> int:
    body = sum(word_tokens(w) for w in text.split())
    if chat:
        return CHAT_OVERHEAD + body
    return body + (BOS if special else 0)


class TokenizerApp:
    """POST /tokenize (vLLM's shape) with the counting rules above; /broken/tokenize fails."""

    def __init__(self) -> None:
        self.calls = 0
        # (client port, path) of every request: the connections the calls came on
        self.seen: list[tuple[int, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        raw = await read_body(receive)
        self.calls += 1
        self.seen.append((scope["client"][1], scope["path"]))
        if scope["path"] != "/tokenize":
            status, answer = 404, {"detail": "Not Found"}
        else:
            body = msgspec.json.decode(raw)
            if "messages" in body:
                count = true_count(body["messages"][0]["content"], chat=True)
            else:
                count = true_count(
                    body["prompt"], chat=False, special=body.get("add_special_tokens", True)
                )
            status, answer = 200, {"count": count, "tokens": [0] * count, "max_model_len": 4096}
        await send_json(send, status, answer)


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[tuple[str, TokenizerApp]]:
    app = TokenizerApp()
    async with serve_in_loop(app) as url:
        yield url, app


def tokenizer(base: str, api: str = "openai-chat") -> Tokenizer:
    return Tokenizer.for_target(Target.for_endpoint(f"{base}/v1", api, "m", "sk-1", 5.0))


def assert_exact(
    maker: PromptMaker, lengths: list[int], prepared: list[Prepared], *, chat: bool
) -> None:
    """Every prepared prompt says exact and is, counted independently of the server: the
    prompt as it will be sent."""
    assert all(p.exact for p in prepared)
    for seq, (n, p) in enumerate(zip(lengths, prepared, strict=True)):
        assert true_count(maker.make(seq, p.words, p.pad), chat=chat) == n, (seq, n, p)


def test_tokenize_url_is_next_to_the_openai_base() -> None:
    assert tokenize_url("http://h:8000/v1") == "http://h:8000/tokenize"
    assert tokenize_url("http://h:8000/v1/") == "http://h:8000/tokenize"
    assert tokenize_url("http://h:8000/proxy/v1") == "http://h:8000/proxy/tokenize"
    assert tokenize_url("http://h:8000") == "http://h:8000/tokenize"


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions"])
async def test_prepared_prompts_have_exactly_the_asked_length(
    server: tuple[str, TokenizerApp], api: str
) -> None:
    base, _ = server
    tok = tokenizer(base, api)
    assert tok.headers["Authorization"] == "Bearer sk-1"
    maker = PromptMaker(np.random.default_rng(1))
    lengths = [int(n) for n in np.random.default_rng(2).integers(10, 600, 60)]
    async with httpx.AsyncClient() as client:
        calibration = await calibrate(client, tok, maker)
        assert calibration is not None
        # the pool's words average over one token each, and the template or BOS shows as
        # overhead
        assert calibration.tokens_per_word > 1.0
        prepared = await prepare_prompts(client, tok, calibration, maker, lengths)
    assert_exact(maker, lengths, prepared, chat=api == "openai-chat")


async def test_the_workers_client_prepares_prompts_on_its_slots(
    server: tuple[str, TokenizerApp],
) -> None:
    # The worker's own client (per-slot connections): the checks go PARALLEL at a time, each
    # lane on its slot's one kept-alive connection, and every prompt still comes out exact.
    base, app = server
    tok = tokenizer(base)
    maker = PromptMaker(np.random.default_rng(3))
    lengths = [int(n) for n in np.random.default_rng(4).integers(10, 300, 80)]
    async with load_client(64) as client:
        calibration = await calibrate(client, tok, maker)
        assert calibration is not None
        before = len(app.seen)
        prepared = await prepare_prompts(client, tok, calibration, maker, lengths)
    assert_exact(maker, lengths, prepared, chat=True)
    calls = app.seen[before:]
    assert len(calls) >= len(lengths)  # a call per prompt at least
    assert len({port for port, _ in calls}) == PARALLEL


async def test_lanes_keep_the_calls_order_and_one_call_a_lane_at_a_time() -> None:
    running: set[int] = set()
    overlaps: list[int] = []

    def call(i: int) -> Any:
        async def go(lane: int) -> tuple[int, int]:
            if lane in running:
                overlaps.append(lane)
            running.add(lane)
            await asyncio.sleep(0.001 * (i % 3))  # uneven: lanes finish out of order
            running.discard(lane)
            return i, lane

        return go

    results = await lanes([call(i) for i in range(20)], 4)
    assert [i for i, _ in results] == list(range(20))
    assert {lane for _, lane in results} == {0, 1, 2, 3}
    assert overlaps == []
    assert await lanes([call(0)], 4) == [(0, 0)]
    assert await lanes([], 4) == []


async def test_a_length_below_the_template_cannot_be_exact(
    server: tuple[str, TokenizerApp],
) -> None:
    base, _ = server
    tok = tokenizer(base)
    maker = PromptMaker(np.random.default_rng(1))
    async with httpx.AsyncClient() as client:
        calibration = await calibrate(client, tok, maker)
        assert calibration is not None
        # the chat template alone is 7 tokens; one word more is the least a prompt can be
        prepared = await exact_words(client, tok, calibration, maker, seq=5, tokens=3)
    assert not prepared.exact
    assert (prepared.words, prepared.pad) == (1, 0)
    assert true_count(maker.make(5, 1), chat=True) == CHAT_OVERHEAD + 1


async def test_calibration_is_measured_once_and_a_missing_route_is_remembered(
    server: tuple[str, TokenizerApp],
) -> None:
    base, app = server
    cache = Calibrations()
    maker = PromptMaker(np.random.default_rng(1))
    async with httpx.AsyncClient() as client:
        before = app.calls
        first = await cache.get(client, tokenizer(base), maker)
        assert first is not None
        assert app.calls == before + 2
        assert await cache.get(client, tokenizer(base), maker) is first
        assert app.calls == before + 2
        broken = Tokenizer.for_target(
            Target.for_endpoint(f"{base}/broken/v1", "openai-chat", "m", None, 5.0)
        )
        assert await cache.get(client, broken, maker) is None
        calls = app.calls
        assert await cache.get(client, broken, maker) is None
        assert app.calls == calls  # not asked again for a while
        # nobody listening at all: no calibration either
        closed = Tokenizer.for_target(
            Target.for_endpoint("http://127.0.0.1:1/v1", "openai-chat", "m", None, 5.0)
        )
        assert await cache.get(client, closed, maker) is None
