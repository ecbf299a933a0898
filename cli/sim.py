"""`infercost sim`: the simulated OpenAI-compatible endpoint (see docs/cli-and-api.md)."""

from __future__ import annotations

from typing import get_args

import click

from sim.config import (
    MetricsFlavor,
    ReasoningField,
    RoleChunk,
    SimConfig,
    SimEngine,
    SimMode,
    SimPrecision,
    StreamEnd,
    TokenizeFlavor,
    UsageStyle,
    gpu_names,
)


def _gpu_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The catalog spelling of --gpu (case-insensitive), or a usage error listing them."""
    for name in gpu_names():
        if name.lower() == value.lower():
            return name
    raise click.BadParameter(f"unknown GPU {value!r}; known: {', '.join(gpu_names())}")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9100,
    show_default=True,
    help="Port; 0 picks a free one (the startup line says which).",
)
@click.option(
    "--mode",
    type=click.Choice(get_args(SimMode)),
    default="fixed",
    show_default=True,
    help="fixed: every token at exactly --ttft-ms, then every --itl-ms. gpu: a "
    "continuous-batching server whose steps take the roofline time of --gpu.",
)
@click.option(
    "--ttft-ms",
    type=click.FloatRange(min=0),
    default=50.0,
    show_default=True,
    help="Time from request arrival to the first content event.",
)
@click.option(
    "--itl-ms",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Time between consecutive content events.",
)
@click.option(
    "--embed-token-ms",
    type=click.FloatRange(min=0),
    default=0.02,
    show_default=True,
    help="POST /v1/embeddings answers --ttft-ms plus this much per input token after arrival.",
)
@click.option("--model", default="sim-model", show_default=True, help="Model id to serve.")
@click.option(
    "--max-tokens-default",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Output tokens when a request gives no max_tokens.",
)
@click.option(
    "--error-rate",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Fraction of generation requests answered with HTTP 500.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for --error-rate.")
@click.option(
    "--max-concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Fixed mode: generate at most N requests at once; later ones queue before their "
    "first token.",
)
@click.option(
    "--burst",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Fixed mode: events per write (each write when its last token is due); with "
    "--itl-ms 0 a large burst keeps the simulator from bounding a capacity benchmark.",
)
@click.option(
    "--gpu",
    default="H200-SXM",
    show_default=True,
    callback=_gpu_name,
    help=f"Gpu mode: the GPU to model, one of {', '.join(gpu_names())}.",
)
@click.option(
    "--gpu-count",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Gpu mode: GPUs (tensor parallel: bandwidth, compute and memory add up).",
)
@click.option(
    "--params-b",
    type=click.FloatRange(min=0, min_open=True),
    default=8.0,
    show_default=True,
    help="Gpu mode: model size in billions of parameters.",
)
@click.option(
    "--precision",
    type=click.Choice(get_args(SimPrecision)),
    default="bf16",
    show_default=True,
    help="Gpu mode: weight precision (2 or 1 bytes per parameter, and its compute peak).",
)
@click.option(
    "--kv-bytes-per-token",
    type=click.IntRange(min=1),
    default=None,
    help="Gpu mode: KV-cache bytes per token [default: from --params-b, Llama-3-like; "
    "131072 for 8B bf16].",
)
@click.option(
    "--max-batch",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Gpu mode: most requests running at once; the rest wait.",
)
@click.option(
    "--efficiency",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=0.7,
    show_default=True,
    help="Gpu mode: share of peak bandwidth and compute a step achieves.",
)
@click.option(
    "--step-overhead-ms",
    type=click.FloatRange(min=0),
    default=0.5,
    show_default=True,
    help="Gpu mode: fixed time added to every engine step.",
)
@click.option(
    "--prefill-chunk",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Gpu mode: most prompt tokens prefilled in one step, across requests.",
)
@click.option(
    "--engine",
    type=click.Choice(get_args(SimEngine)),
    default="default",
    show_default=True,
    help="Behave like this engine: a profile of the switches below (each one given on its "
    "own wins). llamacpp: close after each stream, role chunk at the first token, usage and "
    "timings, prefix cache, llama tokenize and metrics. vllm / sglang: role chunk at the first "
    "token, prefix cache (vLLM: 16-token blocks, continuous usage when asked), their tokenize "
    "and metrics. tgi: no role-only chunk, TGI tokenize and metrics, 429 when the queue is "
    "full. transformers: 422 for request fields beyond the OpenAI ones, lengths forced only "
    "by generation_config's min_new_tokens, usage on the last chunk, no [DONE], no tokenize "
    "or metrics route. default: the original polite simulator.",
)
@click.option(
    "--close-after-response/--keep-alive",
    default=None,
    help="Close the connection after each streamed response although the headers say "
    "keep-alive (llama-server does).",
)
@click.option(
    "--role-chunk",
    type=click.Choice(get_args(RoleChunk)),
    default=None,
    help="The role-only first chat chunk: on arrival, at the first token as its own write "
    "(separate), in the first content write (joined), or none.",
)
@click.option(
    "--usage",
    type=click.Choice(get_args(UsageStyle)),
    default=None,
    help="requested: a final choices:[] chunk when stream_options.include_usage (every "
    "chunk with continuous_usage_stats); finish: on the finish_reason chunk, always; "
    "continuous: on every chunk, always; none: never.",
)
@click.option(
    "--stream-end",
    type=click.Choice(get_args(StreamEnd)),
    default=None,
    help="How streamed responses end. done: finish chunk then [DONE]; no_done: no [DONE]; "
    "abrupt: the body just stops (no finish_reason, no [DONE]); error: an SSE `event: error`, "
    "then the body stops.",
)
@click.option(
    "--fault-after-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="With --stream-end abrupt or error: fail after this many tokens [default: all].",
)
@click.option(
    "--finish-reason-default",
    type=click.Choice(["length", "stop"]),
    default=None,
    help="finish_reason of a request without max_tokens (engines stop at EOS: stop).",
)
@click.option(
    "--prefix-cache/--no-prefix-cache",
    default=None,
    help="Remember prompt prefixes: a shared prefix is not prefilled again (fixed mode: ttft "
    "x uncached / prompt tokens; gpu mode: only uncached tokens are prefilled) and usage "
    "reports prompt_tokens_details.cached_tokens.",
)
@click.option(
    "--prefix-cache-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Prefix cache capacity in tokens, least recently used evicted [default: 1000000].",
)
@click.option(
    "--prefix-cache-block",
    type=click.IntRange(min=1),
    default=None,
    help="Prefix cache hits come in whole blocks of this many tokens (vLLM 16) [default: 1].",
)
@click.option(
    "--timings/--no-timings",
    default=None,
    help="llama.cpp's `timings` object on the last event and in non-streamed answers.",
)
@click.option(
    "--tokenize",
    type=click.Choice(get_args(TokenizeFlavor)),
    default=None,
    help="Whose POST /tokenize body and answer.",
)
@click.option(
    "--metrics",
    type=click.Choice(get_args(MetricsFlavor)),
    default=None,
    help="Whose metric names on GET /metrics (DCGM too in gpu mode).",
)
@click.option(
    "--strict-fields/--any-fields",
    default=None,
    help="Refuse request fields beyond the OpenAI ones (transformers: 422 in its words; "
    "else 400 in the OpenAI API's).",
)
@click.option(
    "--generation-config/--no-generation-config",
    default=None,
    help="Honour generation_config (a JSON GenerationConfig): min_new_tokens forces a length.",
)
@click.option(
    "--eos-after-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="An answer whose length is not forced (ignore_eos, generation_config) ends after "
    "this many tokens with finish_reason stop [default: never early].",
)
@click.option(
    "--sse-multiline-crlf/--sse-plain",
    default=None,
    help="Write each event's JSON over two data: lines with CRLF line ends (valid "
    "server-sent events a client must join).",
)
@click.option(
    "--max-queue",
    type=click.IntRange(min=0),
    default=None,
    help="Overload: when N requests already wait (fixed mode: behind --max-concurrency), "
    "answer --overload-status with Retry-After.",
)
@click.option(
    "--overload-status",
    type=click.Choice(["429", "503"]),
    default=None,
    help="Status of an overload answer [default: 429; llamacpp 503].",
)
@click.option(
    "--retry-after-s",
    type=click.IntRange(min=0),
    default=None,
    help="Retry-After seconds of an overload answer [default: 1].",
)
@click.option(
    "--reasoning-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="A reasoning model: the first N tokens of each chat answer are reasoning text "
    "(all but one at most) [default: 0].",
)
@click.option(
    "--reasoning-field",
    type=click.Choice(get_args(ReasoningField)),
    default=None,
    help="The delta field of reasoning text [default: reasoning; vllm, sglang, llamacpp: "
    "reasoning_content].",
)
@click.option(
    "--reasoning-usage/--no-reasoning-usage",
    default=None,
    help="Count reasoning in usage.completion_tokens_details.reasoning_tokens [default: yes; "
    "vllm, sglang, llamacpp: no].",
)
@click.option(
    "--served-models",
    default=None,
    help="More model names served beside --model, each at its own fixed-mode speed: "
    "name:ttft_ms:itl_ms, comma-separated (e.g. lora-a:80:12,lora-b:30:6).",
)
@click.option(
    "--tool-call-invalid-share",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Share of tool-call answers (requests with tools) cut one character short: "
    "arguments that are no JSON [default: 0].",
)
@click.option(
    "--structured-invalid-share",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Share of JSON answers (a json_schema response_format) cut one character short "
    "[default: 0].",
)
@click.option(
    "--structured-itl-ms",
    type=click.FloatRange(min=0),
    default=None,
    help="Fixed mode: the gap between tokens of a JSON answer (a json_schema "
    "response_format), as guided decoding slows each step [default: --itl-ms].",
)
@click.option(
    "--image-prefill-ms",
    type=click.FloatRange(min=0),
    default=None,
    help="Fixed mode: more time before the first token per image part [default: 20].",
)
@click.option(
    "--image-patch-px",
    type=click.IntRange(min=1),
    default=None,
    help="An image costs one prompt token per square of this many pixels [default: 28].",
)
@click.option(
    "--image-usage/--no-image-usage",
    default=None,
    help="Report image tokens in usage.prompt_tokens_details.image_tokens [default: yes].",
)
@click.option(
    "--reasoning-format",
    type=click.Choice(["auto", "deepseek", "none"]),
    default=None,
    help="llamacpp: where reasoning goes unless a request's reasoning_format says; none: in "
    "content between <think> tags [default: auto, reasoning_content].",
)
def sim(  # click passes options by keyword
    *,
    host: str,
    port: int,
    mode: SimMode,  # click.Choice guarantees one of SimMode's values
    ttft_ms: float,
    itl_ms: float,
    embed_token_ms: float,
    model: str,
    max_tokens_default: int,
    error_rate: float,
    seed: int,
    max_concurrency: int | None,
    burst: int,
    gpu: str,
    gpu_count: int,
    params_b: float,
    precision: SimPrecision,  # click.Choice guarantees one of its values
    kv_bytes_per_token: int | None,
    max_batch: int,
    efficiency: float,
    step_overhead_ms: float,
    prefill_chunk: int,
    engine: SimEngine,  # click.Choice guarantees one of its values
    **switches: object,
) -> None:
    """Serve a simulated OpenAI-compatible endpoint with known timings (test ground truth).

    --mode fixed sends every token on a fixed schedule; --mode gpu models continuous
    batching of a --params-b model on --gpu-count x --gpu (roofline step times, KV-cache
    admission) and publishes vLLM and DCGM metrics at /metrics.

    --engine copies a real engine's behaviours that clients get wrong (closed connections,
    role chunks, usage placement, missing [DONE], prefix caching, tokenize and metric
    shapes); each switch can also be set on its own.
    """
    # Imported here so that `infercost --help` does not pay for uvicorn and msgspec.
    from sim.server import serve

    given = {name: value for name, value in switches.items() if value is not None}
    if "overload_status" in given:
        given["overload_status"] = int(str(given["overload_status"]))
    try:
        config = SimConfig.for_engine(
            engine,
            host=host,
            port=port,
            mode=mode,
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
            embed_token_ms=embed_token_ms,
            model=model,
            max_tokens_default=max_tokens_default,
            error_rate=error_rate,
            seed=seed,
            max_concurrency=max_concurrency,
            burst=burst,
            gpu=gpu,
            gpu_count=gpu_count,
            params_b=params_b,
            precision=precision,
            kv_bytes_per_token=kv_bytes_per_token,
            max_batch=max_batch,
            efficiency=efficiency,
            step_overhead_ms=step_overhead_ms,
            prefill_chunk=prefill_chunk,
            **given,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    serve(config)
