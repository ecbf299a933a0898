"""Request and response shapes for registered endpoints (docs/cli-and-api.md, Endpoint)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from infercost.hardware.catalog import Precision
from infercost.prices.models import PricingModel

EndpointName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][\w.\-]*$")
]
Url = Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
Api = Literal["openai-chat", "openai-completions", "openai-embeddings"]
Tags = dict[str, str]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Positive = Annotated[float, msgspec.Meta(gt=0)]
GpuCount = Annotated[int, msgspec.Meta(ge=1, le=4096)]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class EndpointCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/endpoints. `api_key` is write-only; `base_url` ends before /chat/completions.

    Its hourly price is `usd_per_hour` when given; otherwise the price book entry for its
    `provider`, `hardware` and `pricing_model` (default on-demand), times `gpu_count`. A
    hosted API is priced per token instead: `usd_per_million_input_tokens` and
    `usd_per_million_output_tokens`, both, and no hourly price.

    `params_b`, `precision` and `kv_bytes_per_token` are the model's facts; with `hardware`
    they give the roofline bounds and each run's efficiency (docs/figures.md, Physical limits).
    """

    name: Annotated[
        EndpointName,
        msgspec.Meta(
            description="Your name for the deployment: letters, digits, '.', '_' or '-', unique in"
            " your team; commands accept it in place of the id",
            examples=["vllm-llama8b-h200"],
        ),
    ]
    base_url: Annotated[
        Url,
        msgspec.Meta(
            description="The OpenAI-compatible base URL, ending before /chat/completions (usually "
            "with /v1)",
            examples=["http://192.0.2.10:8000/v1"],
        ),
    ]
    model: Annotated[
        Text,
        msgspec.Meta(
            description="The model name sent in each request, as the server serves it",
            examples=["meta-llama/Llama-3.1-8B-Instruct"],
        ),
    ]
    api: Annotated[
        Api,
        msgspec.Meta(
            description="Which OpenAI route the benchmark calls: openai-chat (/chat/completions), "
            "openai-completions (/completions) or openai-embeddings (/embeddings)",
            examples=["openai-chat"],
        ),
    ] = "openai-chat"
    engine: Annotated[
        Text | None,
        msgspec.Meta(
            description="The serving engine (vllm, sglang, tgi, llama.cpp, transformers, ...): "
            "picks its tokenizer route, telemetry mapping and how exact lengths are asked",
            examples=["vllm"],
        ),
    ] = None
    engine_version: Annotated[
        Text | None,
        msgspec.Meta(
            description="The engine's version, kept with every run for comparisons",
            examples=["0.6.3"],
        ),
    ] = None
    hardware: Annotated[
        Text | None,
        msgspec.Meta(
            description="The GPU SKU, as named in GET /v1/hardware (exact name, any case)",
            examples=["H200-SXM"],
        ),
    ] = None
    gpu_count: Annotated[
        GpuCount,
        msgspec.Meta(
            description="GPUs serving this endpoint (1 to 4096); multiplies the price book's per-"
            "GPU price",
            examples=[1],
        ),
    ] = 1
    usd_per_hour: Annotated[
        NonNegative | None,
        msgspec.Meta(
            description="The whole deployment's price, in USD per hour; absent: from the price "
            "book",
            examples=[3.5],
        ),
    ] = None
    provider: Annotated[
        Text | None,
        msgspec.Meta(
            description="The price book's provider whose entry prices this endpoint",
            examples=["acme-cloud"],
        ),
    ] = None
    pricing_model: Annotated[
        PricingModel | None,
        msgspec.Meta(
            description="The price book's pricing model: on-demand (default), reserved or spot",
            examples=["on-demand"],
        ),
    ] = None
    usd_per_million_input_tokens: Annotated[
        NonNegative | None,
        msgspec.Meta(
            description="A hosted API's price of prompt tokens, in USD per million tokens (with "
            "usd_per_million_output_tokens, instead of an hourly price)",
            examples=[0.15],
        ),
    ] = None
    usd_per_million_output_tokens: Annotated[
        NonNegative | None,
        msgspec.Meta(
            description="A hosted API's price of output tokens, in USD per million tokens",
            examples=[0.6],
        ),
    ] = None
    params_b: Annotated[
        Positive | None,
        msgspec.Meta(
            description="The model's parameters, in billions (for the roofline bounds and "
            "efficiency)",
            examples=[8.0],
        ),
    ] = None
    precision: Annotated[
        Precision | None,
        msgspec.Meta(
            description="The weights' precision (for the roofline bounds)", examples=["bf16"]
        ),
    ] = None
    kv_bytes_per_token: Annotated[
        Positive | None,
        msgspec.Meta(
            description="KV-cache bytes each token of context takes (for the roofline bounds), in "
            "bytes",
            examples=[131072.0],
        ),
    ] = None
    api_key: Annotated[
        Url | None,
        msgspec.Meta(
            description="The key sent to the endpoint as `Authorization: Bearer`; write-only, "
            "never returned",
            examples=["sk-..."],
        ),
    ] = None
    metrics_urls: Annotated[
        list[Url],
        msgspec.Meta(
            description="Prometheus URLs scraped during each run (engine and GPU exporters)",
            examples=[["http://192.0.2.10:8000/metrics"]],
        ),
    ] = []
    tags: Annotated[
        Tags,
        msgspec.Meta(
            description="Free-form labels, kept with the endpoint",
            examples=[{"team": "search", "region": "eu-west"}],
        ),
    ] = {}


class EndpointUpdate(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """PATCH /v1/endpoints/{id}: fields left out stay as they are; null clears a field."""

    name: Annotated[
        EndpointName | msgspec.UnsetType,
        msgspec.Meta(
            description="Your name for the deployment: letters, digits, '.', '_' or '-', unique in"
            " your team; commands accept it in place of the id; left out: unchanged",
            examples=["vllm-llama8b-h200"],
        ),
    ] = msgspec.UNSET
    base_url: Annotated[
        Url | msgspec.UnsetType,
        msgspec.Meta(
            description="The OpenAI-compatible base URL, ending before /chat/completions (usually "
            "with /v1); left out: unchanged",
            examples=["http://192.0.2.10:8000/v1"],
        ),
    ] = msgspec.UNSET
    model: Annotated[
        Text | msgspec.UnsetType,
        msgspec.Meta(
            description="The model name sent in each request, as the server serves it; left out: "
            "unchanged",
            examples=["meta-llama/Llama-3.1-8B-Instruct"],
        ),
    ] = msgspec.UNSET
    api: Annotated[
        Api | msgspec.UnsetType,
        msgspec.Meta(
            description="Which OpenAI route the benchmark calls: openai-chat (/chat/completions), "
            "openai-completions (/completions) or openai-embeddings (/embeddings); left out: "
            "unchanged",
            examples=["openai-chat"],
        ),
    ] = msgspec.UNSET
    engine: Annotated[
        Text | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The serving engine (vllm, sglang, tgi, llama.cpp, transformers, ...): "
            "picks its tokenizer route, telemetry mapping and how exact lengths are asked; "
            "left out: unchanged",
            examples=["vllm"],
        ),
    ] = msgspec.UNSET
    engine_version: Annotated[
        Text | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The engine's version, kept with every run for comparisons; left out: "
            "unchanged",
            examples=["0.6.3"],
        ),
    ] = msgspec.UNSET
    hardware: Annotated[
        Text | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The GPU SKU, as named in GET /v1/hardware (exact name, any case); left "
            "out: unchanged",
            examples=["H200-SXM"],
        ),
    ] = msgspec.UNSET
    gpu_count: Annotated[
        GpuCount | msgspec.UnsetType,
        msgspec.Meta(
            description="GPUs serving this endpoint (1 to 4096); multiplies the price book's per-"
            "GPU price; left out: unchanged",
            examples=[1],
        ),
    ] = msgspec.UNSET
    usd_per_hour: Annotated[
        NonNegative | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The whole deployment's price, in USD per hour; absent: from the price "
            "book; left out: unchanged",
            examples=[3.5],
        ),
    ] = msgspec.UNSET
    provider: Annotated[
        Text | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The price book's provider whose entry prices this endpoint; left out: "
            "unchanged",
            examples=["acme-cloud"],
        ),
    ] = msgspec.UNSET
    pricing_model: Annotated[
        PricingModel | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The price book's pricing model: on-demand (default), reserved or spot; "
            "left out: unchanged",
            examples=["on-demand"],
        ),
    ] = msgspec.UNSET
    usd_per_million_input_tokens: Annotated[
        NonNegative | msgspec.UnsetType | None,
        msgspec.Meta(
            description="A hosted API's price of prompt tokens, in USD per million tokens (with "
            "usd_per_million_output_tokens, instead of an hourly price); left out: "
            "unchanged",
            examples=[0.15],
        ),
    ] = msgspec.UNSET
    usd_per_million_output_tokens: Annotated[
        NonNegative | msgspec.UnsetType | None,
        msgspec.Meta(
            description="A hosted API's price of output tokens, in USD per million tokens; left "
            "out: unchanged",
            examples=[0.6],
        ),
    ] = msgspec.UNSET
    params_b: Annotated[
        Positive | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The model's parameters, in billions (for the roofline bounds and "
            "efficiency); left out: unchanged",
            examples=[8.0],
        ),
    ] = msgspec.UNSET
    precision: Annotated[
        Precision | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The weights' precision (for the roofline bounds); left out: unchanged",
            examples=["bf16"],
        ),
    ] = msgspec.UNSET
    kv_bytes_per_token: Annotated[
        Positive | msgspec.UnsetType | None,
        msgspec.Meta(
            description="KV-cache bytes each token of context takes (for the roofline bounds), in "
            "bytes; left out: unchanged",
            examples=[131072.0],
        ),
    ] = msgspec.UNSET
    api_key: Annotated[
        Url | msgspec.UnsetType | None,
        msgspec.Meta(
            description="The key sent to the endpoint as `Authorization: Bearer`; write-only, "
            "never returned; left out: unchanged",
            examples=["sk-..."],
        ),
    ] = msgspec.UNSET
    metrics_urls: Annotated[
        list[Url] | msgspec.UnsetType,
        msgspec.Meta(
            description="Prometheus URLs scraped during each run (engine and GPU exporters); left "
            "out: unchanged",
            examples=[["http://192.0.2.10:8000/metrics"]],
        ),
    ] = msgspec.UNSET
    tags: Annotated[
        Tags | msgspec.UnsetType,
        msgspec.Meta(
            description="Free-form labels, kept with the endpoint; left out: unchanged",
            examples=[{"team": "search", "region": "eu-west"}],
        ),
    ] = msgspec.UNSET


ProbeStatus = Literal["pass", "warn", "fail", "skip"]


class MetricsUrlCheck(msgspec.Struct):
    """One metrics URL as the check found it: series infercost maps, or why none."""

    url: str
    known_series: int
    error: str | None


class CheckProbe(msgspec.Struct, omit_defaults=True):
    """One probe of a preflight check: `name` (reachable, openai_route, model, streaming,
    stream_usage, tokenizer, engine, metrics), `status` and a sentence saying what was seen
    and what to do. The other fields come with the probe they belong to."""

    name: str
    status: ProbeStatus
    detail: str
    served_models: list[str] | None = None
    suggested_base_url: str | None = None
    suggested_metrics_url: str | None = None
    form: str | None = None
    guess: str | None = None
    version: str | None = None
    evidence: list[str] | None = None
    urls: list[MetricsUrlCheck] | None = None
    # streaming: the request fields the server refused (a job sends them too: set the
    # endpoint's engine, or leave the field out), and the error class a job's request would
    # have (docs/figures.md) when the stream itself failed.
    refused_fields: list[str] | None = None
    error_class: str | None = None


class EndpointCheck(msgspec.Struct):
    """The last preflight check (POST /v1/endpoints/{id}/check). `ok` is false when the
    endpoint is unreachable, has no OpenAI route, does not serve the model or cannot stream:
    jobs are then refused unless they send `"force": true`. Warnings do not refuse."""

    ok: bool
    summary: str
    duration_ms: float
    probes: list[CheckProbe]
    engine: str | None = None
    engine_version: str | None = None
    suggested_base_url: str | None = None
    served_models: list[str] | None = None
    checked_at: datetime | None = None


class EndpointRead(msgspec.Struct):
    """An endpoint as stored; `has_api_key` says whether a credential is set (never shown);
    `pricing_model` is the one its price book lookups use (on-demand unless set)."""

    id: uuid.UUID
    name: str
    base_url: str
    api: str
    model: str
    engine: str | None
    engine_version: str | None
    hardware: str | None
    hardware_id: uuid.UUID | None
    gpu_count: int
    usd_per_hour: float | None
    provider: str | None
    pricing_model: str
    usd_per_million_input_tokens: float | None
    usd_per_million_output_tokens: float | None
    params_b: float | None
    precision: str | None
    kv_bytes_per_token: float | None
    has_api_key: bool
    metrics_urls: list[str]
    tags: Tags
    created_at: datetime
    updated_at: datetime
    # The last preflight check; null until one ran.
    check: EndpointCheck | None = None
    checked_at: datetime | None = None
    # An endpoint that holds results imported from another tool (POST /v1/imports): it was
    # measured elsewhere, so it is never benchmarked or probed.
    external: bool = False
