"""The job plan: what a worker runs, as a typed contract between the API and the workers.

The API validates a job and resolves every default once (api/domain/jobs/services.py,
`JobService.plan`); the job row stores that resolved plan (the `workload`, `load` and `slo`
JSONB columns, every key present). A worker decodes it with one `msgspec.convert` into the
structs below (`decode_plan`) and reads typed fields: no default is invented between the
API and the load generator, so none can drift from the API schema's.

The structs have no defaults of their own. Rows stored before a field existed lack its key;
`decode_plan` fills those from `LEGACY_LOAD` and `LEGACY_WORKLOAD`, the values the API (and
the worker of that time) applied then. A row the current API writes never needs them, which
`decode_plan(..., strict=True)` (used by the API on every plan it stores) checks.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from infercost.jobs.arrivals import DEFAULT_REQUESTS_PER_LEVEL, Arrival, planned_requests

Mode = Literal["concurrency", "rate", "burst", "sweep"]


class LengthSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A token-length distribution (infercost.workload.synthetic.draw_lengths)."""

    distribution: Literal["normal", "uniform", "lognormal"] = "normal"
    mean: float | None = None
    std: float | None = None
    min: int | None = None
    max: int | None = None

    def as_mapping(self) -> dict[str, Any]:
        """The spec as draw_lengths takes it."""
        return msgspec.structs.asdict(self)


class SessionsSpec(msgspec.Struct, frozen=True):
    """Multi-turn sessions: turns per conversation and the shared system prompt's tokens."""

    turns: int
    system_prompt_tokens: int = 0


class PrefixSpec(msgspec.Struct, frozen=True):
    """Shared prefixes: how many distinct ones, and their length in tokens."""

    count: int
    tokens: int


class WorkloadPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What each request sends (the job's `workload` column), every field resolved."""

    input_tokens: LengthSpec | None
    output_tokens: LengthSpec | None
    dataset_id: uuid.UUID | None
    preset: str | None
    sessions: SessionsSpec | None
    prefix: PrefixSpec | None
    ignore_eos: bool
    stream: bool
    temperature: float | None
    seed: int


class LoadPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The load plan (the job's `load` column), every field resolved: a sweep's rate_levels,
    max_concurrency and max_error_rate are set, and requests_per_level is set unless
    duration_s is."""

    mode: Mode
    levels: list[float] | None
    requests_per_level: int | None
    duration_s: float | None
    warmup_requests: int
    warmup_s: float | None
    cooldown_s: float
    arrival: Arrival
    burstiness: float
    timeout_s: float
    telemetry_interval_s: float
    rate_levels: int | None
    max_concurrency: int | None
    max_error_rate: float | None
    shards: int

    def planned(self, level: float, mode: Mode | None = None) -> int:
        """Requests one level (in `mode`, default the plan's) is expected to send, warm-up
        included (infercost.jobs.arrivals.planned_requests)."""
        return planned_requests(
            {
                "mode": mode or self.mode,
                "duration_s": self.duration_s,
                "requests_per_level": self.requests_per_level,
                "warmup_requests": self.warmup_requests,
            },
            level,
        )

    def for_duration(self, duration_s: float) -> LoadPlan:
        """The same plan with levels that last `duration_s` whatever their count."""
        return msgspec.structs.replace(self, duration_s=duration_s, requests_per_level=None)


#: Slo limits by figure and statistic, in ms ({"ttft_ms": {"p95": 500}}).
SloPlan = dict[str, dict[str, float]]


class Plan(msgspec.Struct, frozen=True):
    """A job's resolved plan as a worker runs it."""

    workload: WorkloadPlan
    load: LoadPlan
    slo: SloPlan | None


#: Values for load keys a row stored before the key existed lacks: what the API applied
#: (and the worker of that time assumed) then. A null stored where one of these is not null
#: also takes it (the worker of that time read such keys with `or`).
LEGACY_LOAD: Mapping[str, Any] = {
    "levels": None,
    "requests_per_level": None,
    "duration_s": None,
    "warmup_requests": 0,
    "warmup_s": None,
    "cooldown_s": 0.0,
    "arrival": "poisson",
    "burstiness": 1.0,
    "timeout_s": 300.0,
    "telemetry_interval_s": 1.0,
    "rate_levels": None,
    "max_concurrency": None,
    "max_error_rate": None,
    "shards": 1,
}
#: The same for workload keys; a job without a seed drew its prompts from seed 0.
LEGACY_WORKLOAD: Mapping[str, Any] = {
    "input_tokens": None,
    "output_tokens": None,
    "dataset_id": None,
    "preset": None,
    "sessions": None,
    "prefix": None,
    "ignore_eos": True,
    "stream": True,
    "temperature": None,
    "seed": 0,
}


def _filled(stored: Mapping[str, Any], legacy: Mapping[str, Any]) -> dict[str, Any]:
    filled = dict(legacy)
    for key, value in stored.items():
        if value is not None or legacy.get(key) is None:
            filled[key] = value
    return filled


def decode_plan(
    workload: Mapping[str, Any],
    load: Mapping[str, Any],
    slo: Mapping[str, Any] | None,
    *,
    strict: bool = False,
) -> Plan:
    """A stored job's plan, typed. With `strict` (the API checking what it is about to store)
    every key must be there; otherwise a row stored before a key existed gets the value
    applied then (LEGACY_LOAD, LEGACY_WORKLOAD). msgspec.ValidationError when it does not fit."""
    if not strict:
        workload = _filled(workload, LEGACY_WORKLOAD)
        filled = _filled(load, LEGACY_LOAD)
        if filled["requests_per_level"] is None and filled["duration_s"] is None:
            # Neither given: the count the API counted the job's progress with.
            filled["requests_per_level"] = DEFAULT_REQUESTS_PER_LEVEL
        load = filled
    return msgspec.convert({"workload": workload, "load": load, "slo": slo}, Plan)
