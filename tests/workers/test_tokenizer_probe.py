"""The tokenizer probe against loopback servers shaped like each engine (tests/
tokenizer_engines.py): the right form is picked, the chat template is measured where the
form counts raw text only, and prompts come out exactly as long as the server counts them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
import pytest

from infercost.workload.synthetic import PromptMaker
from sim.config import SimConfig
from sim.process import start_sim_process
from tests.asgi import Receive, Send, send_json, serve_in_loop
from tests.tokenizer_engines import (
    BOS,
    CHAT_TEMPLATE,
    FIXTURE,
    EngineApp,
    prompt_tokens,
    text_tokens,
)
from workers.loadgen.stream import Target
from workers.loadgen.tokenize import (
    Probes,
    calibrate,
    prepare_prompts,
    probe_tokenizer,
)
from workers.loadgen.tokenize import _count_of as count_of

CHAT, COMPLETIONS = "openai-chat", "openai-completions"
#: The field of each engine's own text form (what the probe asks first when it is declared).
FIRST_FIELD = {"vllm": "prompt", "sglang": "prompt", "tgi": "inputs", "llamacpp": "content"}


def target(url: str, api: str, engine: str | None) -> Target:
    return Target.for_endpoint(f"{url}/v1", api, "m", "sk-1", 10.0, engine=engine)


async def serve(app: Any) -> AsyncIterator[str]:
    async with serve_in_loop(app) as url:
        yield url


# (engine served, engine declared, api) -> (form, exact, template tokens measured from usage)
CASES = [
    ("vllm", "vllm", CHAT, "vllm:/tokenize messages", None),
    ("vllm", "vllm", COMPLETIONS, "vllm:/tokenize prompt", None),
    ("sglang", "sglang", CHAT, "sglang:/tokenize prompt", CHAT_TEMPLATE["sglang"]),
    ("sglang", "sglang", COMPLETIONS, "sglang:/tokenize prompt", None),
    ("tgi", "tgi", CHAT, "tgi:/chat_tokenize messages", None),
    ("tgi", "text-generation-inference", COMPLETIONS, "tgi:/tokenize inputs", None),
    ("llamacpp", "llama.cpp", CHAT, "llamacpp:/tokenize content", CHAT_TEMPLATE["llamacpp"]),
    ("llamacpp", "llamacpp", COMPLETIONS, "llamacpp:/tokenize content", None),
    # undeclared: vLLM's body is tried first, and llama-server's {"tokens": []} refused
    ("llamacpp", None, CHAT, "llamacpp:/tokenize content", CHAT_TEMPLATE["llamacpp"]),
    ("tgi", None, CHAT, "tgi:/chat_tokenize messages", None),
]


@pytest.mark.parametrize(("engine", "declared", "api", "form", "template"), CASES)
async def test_the_probe_picks_each_engines_form_and_prompts_are_exact(
    engine: str, declared: str | None, api: str, form: str, template: int | None
) -> None:
    app = EngineApp(engine)
    chat = api == CHAT
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        probe = await probe_tokenizer(client, target(url, api, declared))
        assert probe.form == form, probe.tried
        assert probe.exact, probe.note
        assert probe.template_tokens == template
        assert probe.tokenizer is not None
        if declared is not None:
            # the declared engine's form is the first one asked
            assert FIRST_FIELD[engine] in app.tokenize_bodies[0]
        maker = PromptMaker(np.random.default_rng(3))
        lengths = [int(n) for n in np.random.default_rng(4).integers(20, 700, 40)]
        calibration = await calibrate(client, probe.tokenizer, maker)
        assert calibration is not None
        prepared = await prepare_prompts(client, probe.tokenizer, calibration, maker, lengths)
    assert all(p.exact for p in prepared)
    for seq, (n, p) in enumerate(zip(lengths, prepared, strict=True)):
        # the server's own count of the prompt as it will be sent
        assert prompt_tokens(engine, maker.make(seq, p.words, p.pad), chat=chat) == n


async def test_llamacpp_answers_a_messages_body_with_no_tokens_and_that_is_refused() -> None:
    app = EngineApp("llamacpp")
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        probe = await probe_tokenizer(client, target(url, CHAT, None))
    assert probe.form == "llamacpp:/tokenize content"
    assert "vllm:/tokenize prompt: empty answer (0 tokens)" in probe.tried
    # the empty answers came from bodies llama-server does not read
    assert any("content" not in b for b in app.tokenize_bodies)
    # the template was measured with two one-token chat requests: the probe sentence (22
    # tokens by the counting rule: 7 words of 5-6 characters are 2 tokens each) once and
    # four times
    assert [(chat, n) for chat, _, n in app.prompts] == [
        (True, CHAT_TEMPLATE["llamacpp"] + 22),
        (True, CHAT_TEMPLATE["llamacpp"] + 4 * 22),
    ]


async def test_output_text_is_counted_without_special_tokens() -> None:
    text = " the sim says each token arrives right on time 12345"
    for engine, api in (("tgi", COMPLETIONS), ("llamacpp", CHAT), ("vllm", CHAT)):
        async with serve_in_loop(EngineApp(engine)) as url, httpx.AsyncClient() as client:
            probe = await probe_tokenizer(client, target(url, api, engine))
            assert probe.tokenizer is not None
            counted = await probe.tokenizer.count(client, text, as_prompt=False)
            as_prompt = await probe.tokenizer.count(client, text)
        # 6 words of up to 4 letters, 3 of 5-7 letters (2 tokens each), 12345 (2 tokens)
        assert counted == text_tokens(text) == 14, engine
        assert as_prompt == 14 + (CHAT_TEMPLATE[engine] if api == CHAT else BOS)


async def test_without_usage_a_text_only_form_says_lengths_are_approximate() -> None:
    app = EngineApp("llamacpp", usage=False)
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        probe = await probe_tokenizer(client, target(url, CHAT, "llamacpp"))
    assert probe.form == "llamacpp:/tokenize content"
    assert probe.tokenizer is not None
    assert not probe.exact
    assert probe.template_tokens is None
    assert "exact for the text" in probe.note
    assert probe.block() == {
        "form": "llamacpp:/tokenize content",
        "exact": False,
        "template_tokens": None,
        "note": probe.note,
    }


async def test_without_usage_a_whole_prompt_form_is_used_unchecked() -> None:
    app = EngineApp("vllm", usage=False)
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        probe = await probe_tokenizer(client, target(url, CHAT, "vllm"))
    assert probe.form == "vllm:/tokenize messages"
    assert probe.exact
    assert probe.template_tokens is None
    assert probe.note == (
        "prompts counted with vllm:/tokenize messages (not checked: the server sent no usage)"
    )


async def test_old_tgi_without_chat_tokenize_measures_the_template() -> None:
    app = EngineApp("tgi", chat_tokenize=False)
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        probe = await probe_tokenizer(client, target(url, CHAT, "tgi"))
        assert probe.tokenizer is not None
        assert probe.tokenizer.specials == BOS
        counted = await probe.tokenizer.count(client, "a b c")
    assert probe.form == "tgi:/tokenize inputs"
    assert probe.exact
    assert probe.template_tokens == CHAT_TEMPLATE["tgi"]
    assert "tgi:/chat_tokenize messages: HTTP 404" in probe.tried[-1]
    assert counted == CHAT_TEMPLATE["tgi"] + 3


async def test_no_tokenizer_route_is_said_up_front() -> None:
    async with serve_in_loop(EngineApp("none")) as url, httpx.AsyncClient() as client:
        probe = await probe_tokenizer(client, target(url, CHAT, "vllm"))
    assert probe.tokenizer is None
    assert probe.form is None
    assert not probe.exact
    assert probe.note.startswith("no tokenizer route answered consistently")
    # every form, at the root and under /v1
    assert len(probe.tried) == 6
    assert probe.tried[0] == "vllm:/tokenize prompt: HTTP 404 from " + f"{url}/tokenize"


async def test_a_server_that_is_not_listening_ends_the_probe_at_once() -> None:
    async with httpx.AsyncClient() as client:
        probe = await probe_tokenizer(
            client, Target.for_endpoint("http://127.0.0.1:1/v1", CHAT, "m", None, 5.0)
        )
    assert probe.tokenizer is None
    assert len(probe.tried) == 1
    assert probe.tried[0].startswith("ConnectError at http://127.0.0.1:1/tokenize")


class ConstantApp:
    """Answers every tokenize call with the same count: not a tokenizer."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await send_json(send, 200, {"count": 5, "tokens": [1, 2, 3, 4, 5]})


async def test_answers_that_do_not_grow_with_the_text_are_refused() -> None:
    async with serve_in_loop(ConstantApp()) as url, httpx.AsyncClient() as client:
        probe = await probe_tokenizer(client, target(url, COMPLETIONS, None))
    assert probe.tokenizer is None
    assert probe.tried[0] == "vllm:/tokenize prompt: no growth with longer text (5, 5, 5 tokens)"


async def test_the_probe_is_kept_per_endpoint() -> None:
    app = EngineApp("sglang")
    probes = Probes()
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        first = await probes.get(client, target(url, COMPLETIONS, "sglang"))
        calls = len(app.tokenize_bodies)
        assert await probes.get(client, target(url, COMPLETIONS, "sglang")) is first
        assert len(app.tokenize_bodies) == calls
    assert first.form == "sglang:/tokenize prompt"


def test_llama_server_fixture_reads_as_ten_tokens() -> None:
    # the captured answer lists ten token ids
    assert count_of(FIXTURE.read_bytes()) == 10
    assert count_of(b'{"tokens":[]}') == 0
    assert count_of(b'[{"id":1,"text":"<s>","start":0,"stop":0}]') == 1


# (sim --engine, api) -> the form the probe settles on. The simulator counts a token per
# word, adds no chat template and no BOS, and serves no /chat_tokenize for TGI.
SIM_CASES = [
    ("llamacpp", CHAT, "llamacpp:/tokenize content", 0),
    ("vllm", CHAT, "vllm:/tokenize messages", None),
    ("sglang", CHAT, "sglang:/tokenize prompt", 0),
    ("tgi", CHAT, "tgi:/tokenize inputs", 0),
    ("sglang", COMPLETIONS, "sglang:/tokenize prompt", None),
    # the simulator's usage counts no BOS where its /tokenize add_special adds one: the
    # usage check finds 0 tokens added to a completion prompt's text
    ("llamacpp", COMPLETIONS, "llamacpp:/tokenize content", 0),
]


@pytest.mark.parametrize(("engine", "api", "form", "template"), SIM_CASES)
async def test_against_infercost_sim_each_engine(
    engine: str, api: str, form: str, template: int | None
) -> None:
    sim = start_sim_process(SimConfig.for_engine(engine, port=0))  # type: ignore[arg-type]
    try:
        async with httpx.AsyncClient() as client:
            probe = await probe_tokenizer(
                client,
                Target.for_endpoint(
                    sim.openai_base_url, api, "sim-model", None, 10.0, engine=engine
                ),
            )
            assert probe.form == form, probe.tried
            assert probe.exact, probe.note
            assert probe.template_tokens == template
            assert probe.tokenizer is not None
            if (engine, api) == ("llamacpp", COMPLETIONS):
                # the probe sentence is 15 words; with BOS 16, four times 61
                assert probe.tried[-1] == (
                    "llamacpp:/tokenize content: counted [16, 61] prompt tokens where "
                    "usage said [15, 60]"
                )
            maker = PromptMaker(np.random.default_rng(5))
            lengths = [int(n) for n in np.random.default_rng(6).integers(5, 300, 20)]
            calibration = await calibrate(client, probe.tokenizer, maker)
            assert calibration is not None
            prepared = await prepare_prompts(client, probe.tokenizer, calibration, maker, lengths)
    finally:
        sim.stop()
    for seq, (n, p) in enumerate(zip(lengths, prepared, strict=True)):
        # the simulator's rule: one token per whitespace-separated word
        assert len(maker.make(seq, p.words, p.pad).split()) == n
