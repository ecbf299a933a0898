"""Request and response shapes for registered endpoints (CONTRACT.md, Endpoint)."""

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
Api = Literal["openai-chat", "openai-completions"]
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
    they give the roofline bounds and each run's efficiency (METRICS.md, Physical limits).
    """

    name: EndpointName
    base_url: Url
    model: Text
    api: Api = "openai-chat"
    engine: Text | None = None
    engine_version: Text | None = None
    hardware: Text | None = None
    gpu_count: GpuCount = 1
    usd_per_hour: NonNegative | None = None
    provider: Text | None = None
    pricing_model: PricingModel | None = None
    usd_per_million_input_tokens: NonNegative | None = None
    usd_per_million_output_tokens: NonNegative | None = None
    params_b: Positive | None = None
    precision: Precision | None = None
    kv_bytes_per_token: Positive | None = None
    api_key: Url | None = None
    metrics_urls: list[Url] = []
    tags: Tags = {}


class EndpointUpdate(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """PATCH /v1/endpoints/{id}: fields left out stay as they are; null clears a field."""

    name: EndpointName | msgspec.UnsetType = msgspec.UNSET
    base_url: Url | msgspec.UnsetType = msgspec.UNSET
    model: Text | msgspec.UnsetType = msgspec.UNSET
    api: Api | msgspec.UnsetType = msgspec.UNSET
    engine: Text | msgspec.UnsetType | None = msgspec.UNSET
    engine_version: Text | msgspec.UnsetType | None = msgspec.UNSET
    hardware: Text | msgspec.UnsetType | None = msgspec.UNSET
    gpu_count: GpuCount | msgspec.UnsetType = msgspec.UNSET
    usd_per_hour: NonNegative | msgspec.UnsetType | None = msgspec.UNSET
    provider: Text | msgspec.UnsetType | None = msgspec.UNSET
    pricing_model: PricingModel | msgspec.UnsetType | None = msgspec.UNSET
    usd_per_million_input_tokens: NonNegative | msgspec.UnsetType | None = msgspec.UNSET
    usd_per_million_output_tokens: NonNegative | msgspec.UnsetType | None = msgspec.UNSET
    params_b: Positive | msgspec.UnsetType | None = msgspec.UNSET
    precision: Precision | msgspec.UnsetType | None = msgspec.UNSET
    kv_bytes_per_token: Positive | msgspec.UnsetType | None = msgspec.UNSET
    api_key: Url | msgspec.UnsetType | None = msgspec.UNSET
    metrics_urls: list[Url] | msgspec.UnsetType = msgspec.UNSET
    tags: Tags | msgspec.UnsetType = msgspec.UNSET


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
