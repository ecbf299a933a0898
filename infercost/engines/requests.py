"""The body of a generation request, the one way every part of infercost builds it.

A job's requests (workers/runner/sources.py through workers/loadgen/stream.py) and the
endpoint check's probe (infercost/endpoints/preflight.py) both come from `generation_body`,
so the check sends what a job will send and a server that refuses a job's request refuses
the check's too.

Per engine (infercost/engines/catalog.py): usage is asked for in the stream
(stream_options.include_usage; on every event too where the engine offers
continuous_usage_stats, so an event of several tokens says how many), except from an engine
that sends usage anyway and may refuse the option (`transformers serve`). An exact output
length is asked the engine's own way: `ignore_eos` for vLLM, SGLang, llama.cpp,
TensorRT-LLM and engines not known; a `generation_config` with min_new_tokens and
max_new_tokens for `transformers serve`; nothing where the engine has no way (TGI, the OpenAI
API). A field an engine refuses is never sent.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from infercost.engines.catalog import Engine, engine_of
from infercost.workload.fingerprint import DEFAULTS

#: The workload fields a generation request depends on, at a job's defaults (what the endpoint
#: check sends): exact lengths asked for, streamed, the server's own temperature.
JOB_DEFAULTS: Final = DEFAULTS


def exact_length_fields(engine: str | None, max_tokens: int) -> dict[str, Any]:
    """The fields that ask `engine` for exactly `max_tokens` tokens (empty where it cannot
    be asked)."""
    known = engine_of(engine)
    how = "ignore_eos" if known is None else known.exact_length
    if how == "generation_config":
        config = {"min_new_tokens": max_tokens, "max_new_tokens": max_tokens}
        return {"generation_config": json.dumps(config, separators=(",", ":"))}
    if how == "ignore_eos":
        return {"ignore_eos": True}
    return {}


def generation_body(
    *,
    api: str,
    model: str,
    engine: str | None,
    prompt: str,
    max_tokens: int,
    stream: bool,
    exact_length: bool,
    temperature: float | None,
    messages: list[dict[str, Any]] | None = None,
    features: dict[str, Any] | None = None,
) -> bytes:
    """The JSON body of one chat (`api` openai-chat) or completion request: `messages` when
    given (a dataset's chat item), else `prompt` as one user message; usage asked for when
    streaming; an exact length asked the engine's way when `exact_length`; `features` the
    fields of workload.features (tools and tool_choice, response_format), as sent."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": stream}
    if api == "openai-chat":
        body["messages"] = messages or [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    known = engine_of(engine)
    if stream and not (known is not None and known.usage_always):
        options: dict[str, bool] = {"include_usage": True}
        if known is not None and known.continuous_usage:
            options["continuous_usage_stats"] = True
        body["stream_options"] = options
    if exact_length:
        body.update(exact_length_fields(engine, max_tokens))
    if temperature is not None:
        body["temperature"] = temperature
    if features:
        body.update(features)
    return msgspec.json.encode(_accepted(body, known))


def _accepted(body: dict[str, Any], engine: Engine | None) -> dict[str, Any]:
    """`body` without the fields `engine` refuses."""
    if engine is None or engine.accepted_fields is None:
        return body
    return {k: v for k, v in body.items() if not engine.refuses(k)}
