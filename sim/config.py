"""The simulator's settings: one frozen object shared by the CLI, the server and test helpers."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Final, Literal, get_args

from infercost.hardware.catalog import BYTES_PER_PARAM, PUBLIC_GPUS, GpuSpec

SimMode = Literal["fixed", "gpu"]
SimPrecision = Literal["bf16", "fp8"]
#: Which real engine's behaviour to copy; "default" is the simulator's original, polite one.
SimEngine = Literal["default", "llamacpp", "vllm", "sglang", "tgi", "transformers"]
#: When the role-only first chat chunk goes out: on arrival as its own write (OpenAI-like),
#: at the first token as its own write (llama.cpp, vLLM, SGLang), in the same write as the
#: first content event, or not at all.
RoleChunk = Literal["arrival", "separate", "joined", "none"]
#: Where usage goes: "requested" = a final `choices: []` chunk when the request asks
#: (stream_options.include_usage; with continuous_usage_stats also on every chunk, as vLLM);
#: "finish" = on the finish_reason chunk, always; "continuous" = on every chunk and the final
#: chunk, always; "none" = never.
UsageStyle = Literal["requested", "finish", "continuous", "none"]
#: How a stream ends: finish chunk then [DONE]; finish chunk and no [DONE]; the body just
#: stops (no finish_reason, no [DONE]); an SSE `event: error` and the body stops.
StreamEnd = Literal["done", "no_done", "abrupt", "error"]
#: Whose /tokenize body and answer, and whose /metrics names.
#: "none": no such route (404), as `transformers serve` has neither.
TokenizeFlavor = Literal["default", "llamacpp", "vllm", "sglang", "tgi", "none"]
MetricsFlavor = Literal["default", "llamacpp", "vllm", "vllm-v0", "sglang", "tgi", "none"]
FinishReason = Literal["length", "stop"]
#: Where a chat delta carries reasoning text: vLLM, SGLang and llama.cpp's
#: `reasoning_content`, or the OpenAI-style `reasoning` (OpenRouter, gpt-oss servers).
ReasoningField = Literal["reasoning_content", "reasoning"]

# What /tokenize reports and the largest max_tokens a request may ask for.
MAX_MODEL_LEN = 131072

# Default KV cache per token for a Llama-3-like model with grouped-query attention
# (2 x layers x kv_heads x head_dim x bytes): 131072 B at 8B and 327680 B at 70B in bf16
# (Llama-3.1 8B: 32 x 8 x 128; 70B: 80 x 8 x 128), a power law through both in between.
_KV_BF16_AT_8B: Final = 131072
_KV_EXPONENT: Final = math.log(327680 / 131072) / math.log(70 / 8)


def served_model_speeds(text: str) -> dict[str, tuple[float, float]]:
    """The extra models of `served_models`, "name:ttft_ms:itl_ms" comma-separated, as
    {name: (ttft_ms, itl_ms)}; ValueError saying what is wrong otherwise."""
    speeds: dict[str, tuple[float, float]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, times = item.partition(":")
        ttft, _, itl = times.partition(":")
        try:
            pair = (float(ttft), float(itl))
        except ValueError:
            raise ValueError(
                f"served_models: {item!r} is not name:ttft_ms:itl_ms (e.g. lora-a:80:12)"
            ) from None
        if not name or not all(math.isfinite(v) and v >= 0 for v in pair):
            raise ValueError(f"served_models: {item!r} needs a name and times >= 0 in ms")
        if name in speeds:
            raise ValueError(f"served_models: {name!r} is given twice")
        speeds[name] = pair
    return speeds


def gpu_spec(name: str) -> GpuSpec:
    """The catalog entry called `name`; ValueError listing the known names otherwise."""
    for spec in PUBLIC_GPUS:
        if spec.name == name:
            return spec
    raise ValueError(f"unknown GPU {name!r}; known: {', '.join(gpu_names())}")


def gpu_names() -> list[str]:
    """Names of the GPUs gpu mode can model, in catalog order."""
    return [spec.name for spec in PUBLIC_GPUS]


def default_kv_bytes_per_token(params_b: float, precision: SimPrecision) -> int:
    """KV-cache bytes per token of a Llama-3-like model of `params_b` billion parameters."""
    bf16: float = _KV_BF16_AT_8B * math.pow(params_b / 8.0, _KV_EXPONENT)
    return max(1, round(bf16 * BYTES_PER_PARAM[precision] / 2))


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How the simulated endpoint behaves; `port` 0 binds a free port.

    `fixed` mode uses ttft_ms, itl_ms and max_concurrency. `gpu` mode models a
    continuous-batching server of a `params_b` model on `gpu_count` x `gpu` (see
    sim.gpu) and uses the fields from `gpu` on.
    """

    host: str = "127.0.0.1"
    port: int = 9100
    mode: SimMode = "fixed"
    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    model: str = "sim-model"
    max_tokens_default: int = 16
    error_rate: float = 0.0
    seed: int = 0
    # At most this many requests generate at once; the rest wait, in arrival order, before
    # their first token (None: no limit), so load tests meet a server that saturates.
    max_concurrency: int | None = None
    # Fixed mode: stream this many events per write (each write when its last token is
    # due), so that at itl 0 the simulator is not the bottleneck of a capacity benchmark.
    burst: int = 1
    # POST /v1/embeddings answers ttft_ms plus this much per input token after it arrives.
    embed_token_ms: float = 0.02
    # gpu mode: the hardware (a catalog name), the model and the engine.
    gpu: str = "H200-SXM"
    gpu_count: int = 1
    params_b: float = 8.0
    precision: SimPrecision = "bf16"
    # None: derived from params_b and precision (default_kv_bytes_per_token).
    kv_bytes_per_token: int | None = None
    max_batch: int = 256
    # Share of peak bandwidth and compute a step achieves.
    efficiency: float = 0.7
    # Fixed cost of every step (scheduling, kernel launches), on top of the roofline time.
    step_overhead_ms: float = 0.5
    # At most this many prompt tokens are prefilled per step, across requests.
    prefill_chunk: int = 2048
    # Share of GPU memory the engine may use for weights plus KV cache (vLLM's default).
    gpu_memory_utilization: float = 0.9
    # -- real engines' behaviours (issue 10); `for_engine` fills them from a profile.
    # The profile these came from; it also picks the chunk dialect (llama.cpp's chunks have
    # no `logprobs`, a `system_fingerprint`, `content: null` in the role chunk, usage details
    # always and usage on a completion's finish chunk).
    engine: SimEngine = "default"
    # Close the TCP connection after each streamed response although the headers say
    # `Connection: keep-alive` (llama-server does).
    close_after_response: bool = False
    role_chunk: RoleChunk = "arrival"
    usage: UsageStyle = "requested"
    stream_end: StreamEnd = "done"  # streamed responses only
    # abrupt/error end: after this many content tokens (None: after all of them).
    fault_after_tokens: int | None = None
    # finish_reason when the request gave no max_tokens (real engines stop at EOS: "stop").
    finish_reason_default: FinishReason = "length"
    # Remember prompt prefixes (in the simulator's word tokens); a request sharing one is
    # cheaper to prefill and reports cached_tokens.
    prefix_cache: bool = False
    prefix_cache_tokens: int = 1_000_000
    # Cache granularity: hits are whole blocks (vLLM: 16 tokens; llama.cpp, SGLang: 1).
    prefix_cache_block: int = 1
    # llama.cpp's `timings` object on the last event (and in non-streamed answers).
    timings: bool = False
    tokenize: TokenizeFlavor = "default"
    metrics: MetricsFlavor = "default"
    # Overload: when this many requests already wait, answer overload_status with
    # Retry-After (fixed mode needs max_concurrency, or nothing ever waits).
    max_queue: int | None = None
    overload_status: int = 429
    retry_after_s: int = 1
    # Refuse a request carrying any field beyond the OpenAI ones (and generation_config where
    # honoured): HTTP 422 in transformers serve's words for that engine, else 400 in the
    # OpenAI API's.
    strict_fields: bool = False
    # Honour `generation_config`, a JSON string of GenerationConfig: its min_new_tokens keeps
    # the answer from ending before that many tokens, its max_new_tokens caps it (max_tokens
    # wins over it), as transformers serve does.
    generation_config: bool = False
    # An answer whose length the request did not force ends ("stop") after this many tokens,
    # as a model reaching its end-of-sequence does (None: every answer has the asked length,
    # the simulator's original rule). Forced: ignore_eos true (unless strict_fields), or
    # generation_config's min_new_tokens at least the asked length.
    eos_after_tokens: int | None = None
    # Every streamed event written with its JSON split over two `data:` lines (after a comma
    # in its middle) and CRLF line ends: what the server-sent events standard allows and a
    # client must join back with a newline.
    sse_multiline_crlf: bool = False
    # Fixed mode, for holding a client against the server's own record (bench/accuracy.py,
    # tests/truth.py): per request, keep its arrival and when each content write went out
    # (loop time: CLOCK_MONOTONIC, the clock of perf_counter in every process of a Linux
    # host); GET /stats lists them under `writes`, keyed by the request's `user`, or else by
    # the first word of its prompt (infercost's synthetic prompts begin with their number,
    # counted from 0 in each level); a later request under a key already taken is recorded
    # as `key#2`, then `key#3`, ...
    record_writes: bool = False
    # Reasoning models: the first this many tokens of every chat answer are reasoning text
    # (at most all but one: an answer keeps at least one token of content), sent in the delta
    # field `reasoning_field`; usage counts them in completion_tokens_details.reasoning_tokens
    # when `reasoning_usage` (the OpenAI API does; vLLM, SGLang and llama.cpp do not).
    reasoning_tokens: int = 0
    reasoning_field: ReasoningField = "reasoning"
    reasoning_usage: bool = True
    # llama.cpp's --reasoning-format (a request's `reasoning_format` wins): "none" leaves the
    # reasoning in content between <think> and </think>, as the model wrote it; "auto" and
    # "deepseek" put it in reasoning_content. Other engines ignore it.
    reasoning_format: Literal["auto", "deepseek", "none"] = "auto"
    # More model names served beside `model`, each at its own fixed-mode speed:
    # "name:ttft_ms:itl_ms" comma-separated (several adapters of one base on one endpoint).
    served_models: str = ""
    # Requests with `tools` (tool_choice not "none") are answered with one tool call, to the
    # tools offered in turn, whose arguments fit its schema; with a json_schema
    # response_format, with JSON that fits it. These shares of them (exactly, counted as they
    # come) are cut one character short instead: invalid JSON.
    tool_call_invalid_share: float = 0.0
    structured_invalid_share: float = 0.0
    # Fixed mode: the gap between the tokens of an answer to a json_schema response_format
    # (an engine's guided decoding masks every step's logits, so its steps are slower); None:
    # itl_ms, as any other answer.
    structured_itl_ms: float | None = None
    # Image parts: each costs one prompt token per image_patch_px x image_patch_px square
    # (28: Qwen2-VL's merged patches) and, in fixed mode, image_prefill_ms more before the
    # first token; usage reports them in prompt_tokens_details.image_tokens when image_usage.
    image_patch_px: int = 28
    image_prefill_ms: float = 20.0
    image_usage: bool = True

    @classmethod
    def for_engine(cls, engine: SimEngine, **overrides: Any) -> SimConfig:
        """A config with `engine`'s profile of behaviours; `overrides` win over the profile."""
        if engine not in ENGINE_PROFILES:
            raise ValueError(f"engine must be one of {', '.join(ENGINE_PROFILES)}, got {engine!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown SimConfig fields: {', '.join(unknown)}")
        return cls(**{"engine": engine, **ENGINE_PROFILES[engine], **overrides})

    @classmethod
    def serving(cls, speeds: Mapping[str, tuple[float, float]], **overrides: Any) -> SimConfig:
        """One endpoint serving several models, each at its (TTFT ms, ITL ms): the first is
        its own `model`, the others `served_models` (as `--served-models` takes them)."""
        (model, (ttft_ms, itl_ms)), *others = speeds.items()
        served = ",".join(f"{name}:{ttft:g}:{itl:g}" for name, (ttft, itl) in others)
        return cls(model=model, ttft_ms=ttft_ms, itl_ms=itl_ms, served_models=served, **overrides)

    def __post_init__(self) -> None:
        if self.mode not in ("fixed", "gpu"):
            raise ValueError(f"mode must be 'fixed' or 'gpu', got {self.mode!r}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        for name, value in (
            ("ttft_ms", self.ttft_ms),
            ("itl_ms", self.itl_ms),
            ("embed_token_ms", self.embed_token_ms),
        ):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not 1 <= self.max_tokens_default <= MAX_MODEL_LEN:
            raise ValueError(
                f"max_tokens_default must be in 1..{MAX_MODEL_LEN}, got {self.max_tokens_default}"
            )
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be in 0..1, got {self.error_rate}")
        if not self.model:
            raise ValueError("model must be a non-empty name")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.burst < 1:
            raise ValueError(f"burst must be >= 1, got {self.burst}")
        self._check_engine_fields()
        self._check_gpu_fields()
        if self.mode == "gpu":
            self._check_gpu_fits()

    def _check_engine_fields(self) -> None:
        choices: tuple[tuple[str, object, tuple[object, ...]], ...] = (
            ("engine", self.engine, get_args(SimEngine)),
            ("role_chunk", self.role_chunk, get_args(RoleChunk)),
            ("usage", self.usage, get_args(UsageStyle)),
            ("stream_end", self.stream_end, get_args(StreamEnd)),
            ("finish_reason_default", self.finish_reason_default, get_args(FinishReason)),
            ("tokenize", self.tokenize, get_args(TokenizeFlavor)),
            ("metrics", self.metrics, get_args(MetricsFlavor)),
            ("overload_status", self.overload_status, (429, 503)),
            ("reasoning_field", self.reasoning_field, get_args(ReasoningField)),
        )
        for name, value, allowed in choices:
            if value not in allowed:
                names = ", ".join(map(str, allowed))
                raise ValueError(f"{name} must be one of {names}, got {value!r}")
        if self.fault_after_tokens is not None and self.fault_after_tokens < 0:
            raise ValueError(f"fault_after_tokens must be >= 0, got {self.fault_after_tokens}")
        if self.prefix_cache_tokens < 1:
            raise ValueError(f"prefix_cache_tokens must be >= 1, got {self.prefix_cache_tokens}")
        if self.prefix_cache_block < 1:
            raise ValueError(f"prefix_cache_block must be >= 1, got {self.prefix_cache_block}")
        if self.max_queue is not None:
            if self.max_queue < 0:
                raise ValueError(f"max_queue must be >= 0, got {self.max_queue}")
            if self.mode == "fixed" and self.max_concurrency is None:
                raise ValueError(
                    "max_queue needs max_concurrency in fixed mode: without a limit nothing waits"
                )
        if self.retry_after_s < 0:
            raise ValueError(f"retry_after_s must be >= 0, got {self.retry_after_s}")
        if self.model in served_model_speeds(self.served_models):
            raise ValueError(f"served_models: {self.model!r} is already the main model")
        self._check_feature_fields()

    def _check_feature_fields(self) -> None:
        """The switches of request features: reasoning, served models, invalid shares."""
        for name in ("tool_call_invalid_share", "structured_invalid_share"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be in 0..1, got {share}")
        itl = self.structured_itl_ms
        if itl is not None and not (math.isfinite(itl) and itl >= 0):
            raise ValueError(f"structured_itl_ms must be a finite number >= 0, got {itl}")
        if self.reasoning_tokens < 0:
            raise ValueError(f"reasoning_tokens must be >= 0, got {self.reasoning_tokens}")
        if self.image_patch_px < 1:
            raise ValueError(f"image_patch_px must be >= 1, got {self.image_patch_px}")
        if not (math.isfinite(self.image_prefill_ms) and self.image_prefill_ms >= 0):
            raise ValueError(f"image_prefill_ms must be >= 0, got {self.image_prefill_ms}")
        if self.eos_after_tokens is not None and self.eos_after_tokens < 1:
            raise ValueError(f"eos_after_tokens must be >= 1, got {self.eos_after_tokens}")

    def _check_gpu_fields(self) -> None:
        gpu_spec(self.gpu)  # a known name, in either mode
        if self.gpu_count < 1:
            raise ValueError(f"gpu_count must be >= 1, got {self.gpu_count}")
        if not (math.isfinite(self.params_b) and self.params_b > 0):
            raise ValueError(f"params_b must be a number > 0, got {self.params_b}")
        if self.precision not in get_args(SimPrecision):
            raise ValueError(f"precision must be 'bf16' or 'fp8', got {self.precision!r}")
        if self.kv_bytes_per_token is not None and self.kv_bytes_per_token < 1:
            raise ValueError(f"kv_bytes_per_token must be >= 1, got {self.kv_bytes_per_token}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if not 0.0 < self.efficiency <= 1.0:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency}")
        if not (math.isfinite(self.step_overhead_ms) and self.step_overhead_ms >= 0):
            raise ValueError(f"step_overhead_ms must be >= 0, got {self.step_overhead_ms}")
        if self.prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1, got {self.prefill_chunk}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )

    def _check_gpu_fits(self) -> None:
        spec = gpu_spec(self.gpu)
        if self.max_concurrency is not None:
            raise ValueError("max_concurrency is for fixed mode; in gpu mode use max_batch")
        if self.precision == "fp8" and spec.fp8_tflops is None:
            raise ValueError(f"{spec.name} has no FP8 compute: use precision 'bf16'")
        usable_gb = spec.memory_gb * self.gpu_count * self.gpu_memory_utilization
        weights_gb = self.params_b * BYTES_PER_PARAM[self.precision]
        if weights_gb >= usable_gb:
            raise ValueError(
                f"the weights of a {self.params_b:g}B model in {self.precision} take "
                f"{weights_gb:g} GB, but only {usable_gb:g} GB of {self.gpu_count} x "
                f"{spec.name} is usable for weights and KV cache: raise gpu_count, use "
                "fp8 or a smaller model"
            )

    @property
    def kv_bytes(self) -> int:
        """KV-cache bytes per token: the explicit kv_bytes_per_token or the derived default."""
        if self.kv_bytes_per_token is not None:
            return self.kv_bytes_per_token
        return default_kv_bytes_per_token(self.params_b, self.precision)

    def to_json(self) -> str:
        """Serialize for handing to a child process (see sim.process)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> SimConfig:
        """Inverse of `to_json`; validation runs again in __post_init__."""
        return cls(**json.loads(raw))

    def describe(self) -> str:
        """The parenthesised part of the startup line, e.g. `fixed, ttft 50 ms, itl 10 ms`."""
        if self.mode == "gpu":
            return (
                f"gpu, {self.gpu_count} x {self.gpu}, {self.params_b:g}B {self.precision}, "
                f"kv {self.kv_bytes} B/token, efficiency {self.efficiency:g}, "
                f"max batch {self.max_batch}, step overhead {self.step_overhead_ms:g} ms, "
                f"prefill chunk {self.prefill_chunk}"
            ) + self._describe_engine()
        text = f"{self.mode}, ttft {self.ttft_ms:g} ms, itl {self.itl_ms:g} ms"
        if self.max_concurrency is not None:
            text += f", max concurrency {self.max_concurrency}"
        if self.burst > 1:
            text += f", burst {self.burst}"
        return text + self._describe_engine()

    def _describe_engine(self) -> str:
        """`, engine llamacpp` and any behaviour that is not the default one."""
        if self.engine == "default" and all(
            getattr(self, name) == value for name, value in _BEHAVIOUR_DEFAULTS.items()
        ):
            return ""
        text = f", engine {self.engine}"
        if self.prefix_cache:
            text += f", prefix cache {self.prefix_cache_tokens} tokens"
        if self.stream_end != "done":
            text += f", stream end {self.stream_end}"
        if self.max_queue is not None:
            text += f", max queue {self.max_queue} ({self.overload_status})"
        if self.sse_multiline_crlf:
            text += ", multi-line data with CRLF"
        if self.reasoning_tokens:
            text += f", {self.reasoning_tokens} reasoning tokens in {self.reasoning_field}"
        if self.structured_itl_ms is not None:
            text += f", itl {self.structured_itl_ms:g} ms for JSON answers"
        if self.served_models:
            text += f", also serving {', '.join(served_model_speeds(self.served_models))}"
        return text


# What each --engine sets; every field can still be given on its own. Sources: the captured
# llama-server streams in shared/fixtures/llama-server; vLLM's and SGLang's OpenAI servers
# (role chunk on the first engine output, usage chunk when include_usage, vLLM's
# continuous_usage_stats and 16-token prefix-cache blocks); TGI's router (429 "Model is
# overloaded", no role-only chunk). "finish" usage is what some engines (older TGI) send.
ENGINE_PROFILES: Final[dict[str, dict[str, Any]]] = {
    "default": {},
    "llamacpp": {
        "close_after_response": True,
        "role_chunk": "separate",
        "usage": "requested",
        "finish_reason_default": "stop",
        "prefix_cache": True,
        "prefix_cache_block": 1,
        "timings": True,
        "tokenize": "llamacpp",
        "metrics": "llamacpp",
        "overload_status": 503,
        # --reasoning-format deepseek (its default, "auto"): reasoning_content, not in usage.
        "reasoning_field": "reasoning_content",
        "reasoning_usage": False,
    },
    "vllm": {
        "role_chunk": "separate",
        "usage": "requested",
        "finish_reason_default": "stop",
        "prefix_cache": True,
        "prefix_cache_block": 16,
        "tokenize": "vllm",
        "metrics": "vllm",
        "reasoning_field": "reasoning_content",
        "reasoning_usage": False,
    },
    "sglang": {
        "role_chunk": "separate",
        "usage": "requested",
        "finish_reason_default": "stop",
        "prefix_cache": True,
        "prefix_cache_block": 1,
        "tokenize": "sglang",
        "metrics": "sglang",
        "reasoning_field": "reasoning_content",
        "reasoning_usage": False,
    },
    "transformers": {
        # Hugging Face `transformers serve` (src/transformers/cli/serving): 422 "Unexpected
        # fields in the request" for any field beyond the OpenAI ones and generation_config,
        # whose min_new_tokens forces a length; usage with finish_reason on the last chunk
        # whatever stream_options says; no [DONE]; no tokenize or metrics route.
        "role_chunk": "separate",
        "usage": "finish",
        "stream_end": "no_done",
        "finish_reason_default": "stop",
        "tokenize": "none",
        "metrics": "none",
        "strict_fields": True,
        "generation_config": True,
        "eos_after_tokens": 3,
    },
    "tgi": {
        # router/src/chat.rs: no role-only chunk (the role rides in every content delta, which
        # the simulator leaves out); usage in its own `choices: []` chunk when asked.
        "role_chunk": "none",
        "usage": "requested",
        "finish_reason_default": "stop",
        "prefix_cache": True,
        "prefix_cache_block": 1,
        "tokenize": "tgi",
        "metrics": "tgi",
        "overload_status": 429,
    },
}

# The behaviour fields at their defaults (what `describe` leaves out).
_BEHAVIOUR_DEFAULTS: Final[dict[str, Any]] = {
    "close_after_response": False,
    "role_chunk": "arrival",
    "usage": "requested",
    "stream_end": "done",
    "fault_after_tokens": None,
    "finish_reason_default": "length",
    "prefix_cache": False,
    "prefix_cache_tokens": 1_000_000,
    "prefix_cache_block": 1,
    "timings": False,
    "tokenize": "default",
    "metrics": "default",
    "max_queue": None,
    "overload_status": 429,
    "retry_after_s": 1,
    "strict_fields": False,
    "generation_config": False,
    "eos_after_tokens": None,
    "sse_multiline_crlf": False,
    "reasoning_tokens": 0,
    "reasoning_field": "reasoning",
    "reasoning_usage": True,
    "reasoning_format": "auto",
    "served_models": "",
    "tool_call_invalid_share": 0.0,
    "structured_invalid_share": 0.0,
    "structured_itl_ms": None,
    "image_patch_px": 28,
    "image_prefill_ms": 20.0,
    "image_usage": True,
}
