"""The job plan: what a job sends and how, one typed value from the API to every reader.

The API resolves a request into a `Plan` once (`resolve_plan`: the preset, every default), runs
the cross-field rules on it (infercost/jobs/rules.py) and stores its encoding (`Plan.encode`:
the job row's `workload`, `load` and `slo` JSONB columns, every key present). Everything that
reads a stored plan (the worker, the queue estimate, reports, estimates, the CLI) decodes it
here (`decode_plan`, `decode_load`, or `read_plan` where a row may hold none) and reads typed
fields: defaults are filled in this module and nowhere else, and a plan's size is counted by
one method (`LoadPlan.size`, over `LoadPlan.level_size`).

The structs have no defaults of their own. Rows stored before a field existed lack its key;
`upgrade` (the one upgrade function, run by every decode) fills those from `LEGACY_LOAD` and
`LEGACY_WORKLOAD`, the values the API (and the worker of that time) applied then. Those are
history, not defaults: they never change when a default below does.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

import msgspec

from infercost.jobs.arrivals import Arrival

Mode = Literal["concurrency", "rate", "burst", "sweep", "trace"]
#: What requests carry beyond a prompt (workload.features); they combine.
Feature = Literal["reasoning", "tools", "structured", "image"]
FEATURES: tuple[str, ...] = ("reasoning", "tools", "structured", "image")
#: Worker processes per level: a number, or "auto" (each level as many as it needs).
Shards = int | Literal["auto"]

#: A trace replay's time_scale and interval (trace seconds) when the plan does not say.
DEFAULT_TIME_SCALE = 1.0
DEFAULT_TRACE_INTERVAL_S = 60.0

#: Requests per level when a plan gives neither requests_per_level nor duration_s.
DEFAULT_REQUESTS_PER_LEVEL = 100
#: Seconds per level when a sweep gives neither duration_s nor requests_per_level (as
#: GuideLLM does): long enough for hundreds of requests at any but the slowest level, where a
#: count would last a second at high load and support no percentile.
DEFAULT_SWEEP_DURATION_S = 30.0
#: Rate levels between a sweep's synchronous and throughput level when it does not say.
DEFAULT_RATE_LEVELS = 5
#: Users of a sweep's throughput level when it does not say (capped by the server's limit).
DEFAULT_MAX_CONCURRENCY = 64
#: A sweep level whose error rate is above this stops the sweep, when the plan does not say.
DEFAULT_MAX_ERROR_RATE = 0.05


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

    @property
    def central(self) -> float | None:
        """The typical length: the mean, else the midpoint of min and max (a uniform one)."""
        if self.mean is not None:
            return float(self.mean)
        if self.min is not None and self.max is not None:
            return (self.min + self.max) / 2
        return None


class SessionsSpec(msgspec.Struct, frozen=True):
    """Multi-turn sessions: turns per conversation and the shared system prompt's tokens."""

    turns: int
    system_prompt_tokens: int = 0


class PrefixSpec(msgspec.Struct, frozen=True):
    """Shared prefixes: how many distinct ones, and their length in tokens."""

    count: int
    tokens: int


class ModelWeight(msgspec.Struct, frozen=True):
    """One model (or adapter) of workload.models and its share of the requests."""

    name: str
    weight: float


class ImageSpec(msgspec.Struct, frozen=True):
    """Images of each request of the `image` feature: how many, and their size in pixels."""

    count: int = 1
    width: int = 512
    height: int = 512


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
    features: list[Feature]
    models: list[ModelWeight] | None
    images: ImageSpec | None

    def has(self, feature: str) -> bool:
        """Whether the workload asks for `feature` (workload.features)."""
        return feature in self.features


class WindowPlan(msgspec.Struct, frozen=True):
    """The part of a trace a replay sends: [start_s, start_s + duration_s) in the trace's
    own seconds after its first request (docs/figures.md, "replay"). A stored plan always has
    duration_s; None only in a request before the API resolved it to the trace's end."""

    start_s: float
    duration_s: float | None


@dataclass(frozen=True, slots=True)
class LevelSize:
    """One level as its plan sizes it before it runs.

    count: the requests its schedule holds, warm-up requests included (warm-up seconds not);
    None for a concurrency level of a duration, whose count only its end tells.
    scheduled_s: how long its schedule lasts, warm-up seconds not included; None where the
    server's pace decides (a concurrency level of a count, a burst).
    """

    count: float | None
    scheduled_s: float | None

    @property
    def planned(self) -> int:
        """Requests progress counts for it until it starts: its count (at least one), 0 when
        unknown. A rate level of a duration is replaced by its schedule's own count then."""
        return 0 if self.count is None else max(1, round(self.count))


@dataclass(frozen=True, slots=True)
class PlanSize:
    """What a whole plan asks for, as far as it can be known before it runs.

    planned: requests progress counts before the job starts (its progress total).
    requests: requests it is expected to send, warm-up (requests and seconds) included.
    seconds: seconds the plan itself fixes, warm-up and cool-down included.
    uncounted: levels left out of `seconds` (concurrency levels of a count, bursts: how long
    they take depends on the server) or of `requests` (concurrency levels of a duration).
    """

    planned: int
    requests: int
    seconds: float
    uncounted: int


class LoadPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The load plan (the job's `load` column), every field resolved: a sweep's rate_levels,
    max_concurrency and max_error_rate are set, and requests_per_level is set unless
    duration_s is (or the mode is burst, whose levels are their own counts)."""

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
    shards: Shards
    # Trace replay (mode "trace"): the log, how much faster than recorded it is sent, the
    # window of it and the interval (trace seconds) its figures are given per. A trace's
    # requests_per_level is the window's count, set by the API when it resolves the plan.
    traffic_id: uuid.UUID | None
    time_scale: float | None
    window: WindowPlan | None
    interval_s: float | None

    @property
    def fixed_shards(self) -> int:
        """The shards every level is held to before it runs: the number given, 1 for "auto"
        (a level decides at its start whether to take more; the rules hold it to one
        process's limits)."""
        return 1 if self.shards == "auto" else self.shards

    def level_size(self, level: float, mode: Mode | None = None) -> LevelSize:
        """The size of one level of this plan measured in `mode` (default: the plan's; a
        sweep measures its levels at concurrency and at rates)."""
        mode = mode or self.mode
        if mode == "trace":
            # The window's requests, sent over the window compressed by time_scale.
            window, scale = self.window, self.time_scale or DEFAULT_TIME_SCALE
            length = None if window is None else window.duration_s
            seconds = None if length is None else length / scale
            return LevelSize(count=self.requests_per_level, scheduled_s=seconds)
        if mode == "burst":
            # That many requests at once: how long they take depends on the server.
            return LevelSize(count=level, scheduled_s=None)
        if self.duration_s is not None:
            count = level * self.duration_s if mode == "rate" else None
            return LevelSize(count=count, scheduled_s=self.duration_s)
        if self.requests_per_level is None:
            raise ValueError("a plan of neither requests_per_level nor duration_s")
        count = self.requests_per_level + self.warmup_requests
        return LevelSize(count=count, scheduled_s=count / level if mode == "rate" else None)

    def size(self) -> PlanSize:
        """The size of the whole plan: its levels' sizes, warm-up and cool-down added."""
        warmup_s = self.warmup_s or 0.0
        if self.mode == "trace":
            level = self.level_size(0.0)
            return PlanSize(level.planned, round(level.count or 0), level.scheduled_s or 0.0, 0)
        if self.mode == "sweep":
            if self.rate_levels is None:
                raise ValueError("a sweep plan without rate_levels")
            # Its rates are chosen as it runs: every level is sized as its synchronous one.
            count = 2 + self.rate_levels
            level = self.level_size(1.0, "concurrency")
            if level.scheduled_s is None:
                # Levels of a request count at rates yet unknown: the plan fixes none of its
                # time (nor, so, its cool-downs': the queue estimate leaves it untold too).
                return PlanSize(count * level.planned, count * level.planned, 0.0, count)
            seconds = count * (level.scheduled_s + warmup_s + self.cooldown_s)
            return PlanSize(0, 0, seconds, count)
        planned = 0
        requests = 0.0
        seconds = 0.0
        uncounted = 0
        for value in self.levels or []:
            level = self.level_size(value)
            planned += level.planned
            seconds += self.cooldown_s
            if level.count is not None:
                requests += level.count
                if self.mode == "rate":
                    requests += value * warmup_s
            if level.scheduled_s is not None:
                seconds += level.scheduled_s + warmup_s
            if level.count is None or level.scheduled_s is None:
                uncounted += 1
        return PlanSize(planned, round(requests), seconds, uncounted)

    def for_duration(self, duration_s: float) -> LoadPlan:
        """The same plan with levels that last `duration_s` whatever their count."""
        return msgspec.structs.replace(self, duration_s=duration_s, requests_per_level=None)


#: Slo limits by figure and statistic, in ms ({"ttft_ms": {"p95": 500}}).
SloPlan = dict[str, dict[str, float]]


class StoredPlan(TypedDict):
    """A plan as a job row (or a schedule's template) stores it: three JSON objects."""

    workload: dict[str, Any]
    load: dict[str, Any]
    slo: dict[str, Any] | None


class Plan(msgspec.Struct, frozen=True):
    """A job's resolved plan."""

    workload: WorkloadPlan
    load: LoadPlan
    slo: SloPlan | None

    def encode(self, *, seed: bool = True) -> StoredPlan:
        """The plan as its row stores it. Whole-number levels are stored as integers. Without
        `seed` the workload's seed is stored as null: a schedule's template, of which each
        job draws its own (`seeded`)."""
        workload: dict[str, Any] = msgspec.to_builtins(self.workload)
        if not seed:
            workload["seed"] = None
        load: dict[str, Any] = msgspec.to_builtins(self.load)
        if self.load.levels is not None:
            load["levels"] = [int(x) if x.is_integer() else x for x in self.load.levels]
        slo = None if self.slo is None else msgspec.to_builtins(self.slo)
        return StoredPlan(workload=workload, load=load, slo=slo)


def resolve_load(request: Mapping[str, Any], *, max_concurrency: int) -> LoadPlan:
    """A request's load plan (every field of the API's schema, as JSON values) with the
    defaults that depend on its mode filled in: the arrival process (constant for a sweep and
    a burst, whose requests are all due at 0; poisson otherwise), a sweep's rate levels,
    users (at most `max_concurrency`, the server's limit), error rate and level duration,
    requests_per_level when neither a count nor a duration is given, and shards "auto"
    unless a cap on requests in flight keeps the level in one process."""
    load = dict(request)
    mode = load["mode"]
    if mode == "trace":
        # One process keeps a session's requests in order (and a cap on requests in flight).
        load["shards"] = load.get("shards") or 1
        load["arrival"] = load.get("arrival") or "constant"
        if load.get("time_scale") is None:
            load["time_scale"] = DEFAULT_TIME_SCALE
        if load.get("interval_s") is None:
            load["interval_s"] = DEFAULT_TRACE_INTERVAL_S
        return msgspec.convert(load, LoadPlan)
    if load.get("shards") is None:
        # Split where it helps, unless a cap on requests in flight must stay in one process
        # (resolve_plan keeps sessions in one too).
        load["shards"] = 1 if load.get("max_concurrency") is not None else "auto"
    if load["arrival"] is None:
        load["arrival"] = "constant" if mode in ("sweep", "burst") else "poisson"
    neither = load["requests_per_level"] is None and load["duration_s"] is None
    if mode == "sweep":
        if load["rate_levels"] is None:
            load["rate_levels"] = DEFAULT_RATE_LEVELS
        if load["max_concurrency"] is None:
            load["max_concurrency"] = min(DEFAULT_MAX_CONCURRENCY, max_concurrency)
        if load["max_error_rate"] is None:
            load["max_error_rate"] = DEFAULT_MAX_ERROR_RATE
        if neither:
            load["duration_s"] = DEFAULT_SWEEP_DURATION_S
    elif mode != "burst" and neither:
        load["requests_per_level"] = DEFAULT_REQUESTS_PER_LEVEL
    return msgspec.convert(load, LoadPlan)


class Preset(Protocol):
    """What a plan takes from the workload preset it names (infercost.planning.presets)."""

    @property
    def input_tokens(self) -> Mapping[str, int]: ...
    @property
    def output_tokens(self) -> Mapping[str, int]: ...
    def default_slo(self) -> dict[str, dict[str, float]]: ...


def resolve_plan(
    workload: Mapping[str, Any],
    load: Mapping[str, Any],
    slo: Mapping[str, Any] | None,
    *,
    preset: Preset | None,
    max_concurrency: int,
    seed: int,
) -> Plan:
    """A job request's plan (its three parts as JSON values, every field of the API's
    schemas present) with every default resolved: the lengths of `preset` (the one the
    workload names) where the workload gives none (input lengths only for synthetic
    prompts) and its SLO where the job gives none, `seed` where the workload names none,
    and the load plan's (`resolve_load`)."""
    resolved = dict(workload)
    # A trace gives each request its lengths: a preset lends a replay its SLO only.
    if preset is not None and load.get("mode") == "trace":
        if slo is None:
            slo = preset.default_slo()
    elif preset is not None:
        if resolved["dataset_id"] is None and resolved["input_tokens"] is None:
            resolved["input_tokens"] = dict(preset.input_tokens)
        if resolved["output_tokens"] is None:
            resolved["output_tokens"] = dict(preset.output_tokens)
        if slo is None:
            slo = preset.default_slo()
    if resolved["seed"] is None:
        resolved["seed"] = seed
    load = dict(load)
    if load.get("shards") is None and resolved.get("sessions") is not None:
        load["shards"] = 1  # a conversation's turns stay in one process
    return Plan(
        workload=msgspec.convert(resolved, WorkloadPlan),
        load=resolve_load(load, max_concurrency=max_concurrency),
        slo=None if slo is None else msgspec.convert(slo, SloPlan),
    )


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
    "traffic_id": None,
    "time_scale": None,
    "window": None,
    "interval_s": None,
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
    "features": [],
    "models": None,
    "images": None,
}


def _filled(stored: Mapping[str, Any], legacy: Mapping[str, Any]) -> dict[str, Any]:
    filled = dict(legacy)
    for key, value in stored.items():
        if value is not None or legacy.get(key) is None:
            filled[key] = value
    return filled


def upgrade(
    workload: Mapping[str, Any], load: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stored workload and load plan in the current shape: keys that older rows lack (or
    hold null) take the values applied when those rows were written (LEGACY_WORKLOAD,
    LEGACY_LOAD), and a plan that gave neither requests_per_level nor duration_s gets the
    count the API counted its progress with. A row the current API wrote comes back as is."""
    upgraded = _filled(load, LEGACY_LOAD)
    neither = upgraded["requests_per_level"] is None and upgraded["duration_s"] is None
    if neither and upgraded.get("mode") not in ("burst", "trace"):
        upgraded["requests_per_level"] = DEFAULT_REQUESTS_PER_LEVEL
    return _filled(workload, LEGACY_WORKLOAD), upgraded


def decode_plan(
    workload: Mapping[str, Any], load: Mapping[str, Any], slo: Mapping[str, Any] | None
) -> Plan:
    """A stored job's plan, typed, whatever version of the API stored it (`upgrade`).
    msgspec.ValidationError when it does not fit."""
    workload, load = upgrade(workload, load)
    return msgspec.convert({"workload": workload, "load": load, "slo": slo}, Plan)


def decode_load(load: Mapping[str, Any]) -> LoadPlan:
    """A stored load plan alone, typed (as `decode_plan`): for readers that need no more,
    such as the queue estimate and the CLI's job listing."""
    return msgspec.convert(upgrade({}, load)[1], LoadPlan)


def read_plan(
    workload: Mapping[str, Any], load: Mapping[str, Any], slo: Mapping[str, Any] | None
) -> Plan | None:
    """A stored plan for reading (reports, estimates, a job's read): None where the row holds
    none that decodes, which only a row written outside the API can. A worker decodes with
    `decode_plan` and fails such a job with its error."""
    try:
        return decode_plan(workload, load, slo)
    except msgspec.ValidationError:
        return None


def read_load(load: Mapping[str, Any]) -> LoadPlan | None:
    """`decode_load`, or None where the stored load plan does not decode (see read_plan)."""
    try:
        return decode_load(load)
    except msgspec.ValidationError:
        return None


def seeded(workload: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """A stored workload with `seed` where it holds none: a schedule's template (its plan
    encoded without a seed) made into one job's, so each job draws prompts of its own."""
    given = workload.get("seed")
    return {**workload, "seed": seed if given is None else given}
