"""The rules across a plan's fields that its schema alone cannot state, as pure functions.

Each rule takes a resolved plan (infercost/jobs/plan.py) and the server's limits and raises
InvalidInput, naming the field and what to change, when the plan breaks it; the API answers
that as a 422. `check_plan` runs them in the order the API has always reported them (the
first broken rule is the one answered); `check_for_embeddings` runs once the endpoint is
known. A new field or mode brings its rule here and a line in RULES.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infercost.engines.catalog import ENGINES, engine_of
from infercost.errors import InvalidInput
from infercost.jobs.plan import Plan
from infercost.settings import Settings

#: The most requests one level may schedule (the bound on requests_per_level, too).
MAX_REQUESTS_PER_LEVEL = 1_000_000


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What this server lets one job ask for (settings: INFERCOST_MAX_*)."""

    max_concurrency: int
    max_requests_per_job: int
    max_job_duration_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ServerLimits:
        return cls(
            max_concurrency=settings.max_concurrency,
            max_requests_per_job=settings.max_requests_per_job,
            max_job_duration_s=settings.max_job_duration_s,
        )


def _per_shard(shards: int) -> str:
    return f" per shard ({shards} shards)" if shards > 1 else ""


def job_size(plan: Plan, limits: ServerLimits) -> None:
    """A plan that sends more requests or runs longer than one job may can never run as sent
    (INFERCOST_MAX_REQUESTS_PER_JOB, INFERCOST_MAX_JOB_DURATION_S)."""
    load = plan.load
    size = load.size()
    cap = limits.max_requests_per_job
    if size.requests > cap:
        raise InvalidInput(
            "load",
            f"this plan sends about {size.requests:,} requests (warm-up included), over "
            f"this server's limit of {cap:,} per job (INFERCOST_MAX_REQUESTS_PER_JOB): "
            "use fewer levels or fewer requests per level",
        )
    limit_s = limits.max_job_duration_s
    if size.seconds > limit_s:
        note = (
            f" ({size.uncounted} concurrency levels of a request count not included: "
            "their duration depends on the server)"
            if size.uncounted and load.mode == "concurrency"
            else ""
        )
        raise InvalidInput(
            "load",
            f"this plan runs for about {size.seconds / 3600:,.1f} h ({size.seconds:,.0f} s, "
            f"warm-up and cool-down included){note}, over this server's limit of "
            f"{limit_s / 3600:g} h per job (INFERCOST_MAX_JOB_DURATION_S={limit_s:g}): "
            "shorten the levels, raise the rates or split the job",
        )


def count_or_duration(plan: Plan, limits: ServerLimits) -> None:
    """A level lasts a number of requests or a number of seconds, not both."""
    if plan.load.duration_s is not None and plan.load.requests_per_level is not None:
        raise InvalidInput(
            "load.duration_s", "give load.requests_per_level or load.duration_s, not both"
        )


def warmup_count_or_seconds(plan: Plan, limits: ServerLimits) -> None:
    """A level warms up for a number of requests or a number of seconds, not both."""
    if plan.load.warmup_s is not None and plan.load.warmup_requests:
        raise InvalidInput(
            "load.warmup_s",
            "give load.warmup_requests (a count) or load.warmup_s (seconds), not both",
        )


#: Load fields that only a trace replay takes.
TRACE_FIELDS = ("traffic_id", "time_scale", "window", "interval_s")


def trace_fields(plan: Plan, limits: ServerLimits) -> None:
    """A replay sends a trace as it was recorded: the log gives its requests, their times
    and their lengths, so a trace plan takes none of the fields that make them up, and no
    other mode takes a trace's fields."""
    load = plan.load
    if load.mode != "trace":
        for name in TRACE_FIELDS:
            if getattr(load, name) is not None:
                raise InvalidInput(
                    f"load.{name}",
                    f"applies only to load.mode 'trace' (a replay of a traffic log): leave "
                    f"{name} out, or set mode to 'trace'",
                )
        return
    if load.traffic_id is None:
        raise InvalidInput(
            "load.traffic_id",
            "a trace replay needs traffic_id: a traffic log of your team (POST /v1/traffic "
            "imports one, GET /v1/traffic lists them)",
        )
    for name in ("levels", "duration_s", "warmup_s", "rate_levels", "max_error_rate"):
        if getattr(load, name) is not None:
            raise InvalidInput(
                f"load.{name}",
                "a trace replay sends the window's requests at the trace's own times: leave "
                f"{name} out (load.window chooses the part, load.time_scale the speed)",
            )
    if load.warmup_requests:
        raise InvalidInput(
            "load.warmup_requests",
            "a trace replay measures every request of its window: leave warmup_requests "
            "out (start the window later to skip the trace's first requests)",
        )
    if load.arrival != "constant" or load.burstiness != 1.0:
        raise InvalidInput(
            "load.arrival",
            "a trace brings its own arrival times: leave arrival and burstiness out",
        )
    if load.shards != 1:
        raise InvalidInput(
            "load.shards",
            "a trace replay runs in one worker process, so a session's requests keep their "
            "order: leave shards out",
        )
    workload = plan.workload
    for name in ("input_tokens", "output_tokens", "dataset_id", "sessions", "prefix"):
        if getattr(workload, name) is not None:
            raise InvalidInput(
                f"workload.{name}",
                "the trace gives each request's input and output lengths, its shared prefix "
                f"blocks and its session: leave {name} out of a trace replay's workload",
            )


def sweep_fields(plan: Plan, limits: ServerLimits) -> None:
    """A sweep chooses its own levels; the sweep's own fields apply to nothing else, and
    every other mode needs its levels."""
    load = plan.load
    if load.mode == "trace":
        return
    if load.mode == "sweep":
        if load.levels is not None:
            raise InvalidInput(
                "load.levels",
                "a sweep chooses its own levels: leave load.levels out (load.rate_levels "
                "sets how many request rates it measures, load.max_concurrency the users "
                "of its throughput level)",
            )
        if load.max_concurrency is not None and load.max_concurrency > limits.max_concurrency:
            raise InvalidInput(
                "load.max_concurrency",
                f"{load.max_concurrency} exceeds this server's limit of "
                f"{limits.max_concurrency} concurrent requests (INFERCOST_MAX_CONCURRENCY)",
            )
        return
    if load.levels is None:
        unit = {"concurrency": "users", "burst": "requests sent at once"}.get(
            load.mode, "requests/s"
        )
        raise InvalidInput(
            "load.levels",
            f"mode '{load.mode}' needs levels ({unit}, e.g. [1, 8, 32]); or use mode 'sweep' "
            "to have them chosen",
        )
    # max_concurrency also caps rate and burst levels (concurrency_cap).
    given = [name for name in ("rate_levels", "max_error_rate") if getattr(load, name) is not None]
    if given:
        raise InvalidInput(
            f"load.{given[0]}",
            f"applies only to mode 'sweep' (this plan has '{load.mode}'); leave it out",
        )


def concurrency_cap(plan: Plan, limits: ServerLimits) -> None:
    """load.max_concurrency caps a rate or burst level's requests in flight (a sweep's is its
    throughput users): at most this server's limit, held in one process."""
    load = plan.load
    cap = load.max_concurrency
    if cap is None or load.mode == "sweep":
        return
    if load.mode == "concurrency":
        raise InvalidInput(
            "load.max_concurrency",
            "a concurrency level's users are already its cap on requests in flight: leave "
            "max_concurrency out, or use mode 'rate' (requests/s) with max_concurrency",
        )
    if cap > limits.max_concurrency:
        raise InvalidInput(
            "load.max_concurrency",
            f"{cap} exceeds this server's limit of {limits.max_concurrency} concurrent "
            "requests (INFERCOST_MAX_CONCURRENCY); lower it",
        )
    if load.fixed_shards > 1:
        raise InvalidInput(
            "load.max_concurrency",
            "a cap on requests in flight is kept by one worker process: leave load.shards "
            "out (or 1), or leave max_concurrency out",
        )


def burst_levels(plan: Plan, limits: ServerLimits) -> None:
    """A burst level is a count of requests sent at once: whole, within the per-level limit,
    and with nothing that assumes a schedule over time."""
    load = plan.load
    if load.mode != "burst":
        return
    for name in ("requests_per_level", "duration_s", "warmup_s"):
        if getattr(load, name) is not None:
            raise InvalidInput(
                f"load.{name}",
                "a burst level is the number of requests sent at once (load.levels), all "
                f"due at its start: leave {name} out",
            )
    if load.warmup_requests:
        raise InvalidInput(
            "load.warmup_requests",
            "a burst sends every request at once, so no request warms the server for the "
            "others: leave warmup_requests out (run a short concurrency job first to warm "
            "the server)",
        )
    if load.arrival != "constant" or load.burstiness != 1.0:
        raise InvalidInput(
            "load.arrival",
            "a burst has no arrival process (every request is due at once): leave arrival "
            "and burstiness out",
        )
    levels = load.levels or []
    fractional = [lvl for lvl in levels if not lvl.is_integer()]
    if fractional:
        raise InvalidInput(
            "load.levels",
            f"{fractional[0]:g} is not a whole number; a burst level is a number of "
            "requests sent at once",
        )
    too_many = [lvl for lvl in levels if lvl > MAX_REQUESTS_PER_LEVEL]
    if too_many:
        raise InvalidInput(
            "load.levels",
            f"{too_many[0]:g} requests at once is over the limit of "
            f"{MAX_REQUESTS_PER_LEVEL:,} per level",
        )
    # All in flight at once unless capped; shards split a level's requests among them.
    in_flight = [
        lvl
        for lvl in levels
        if min(-(-lvl // load.fixed_shards), load.max_concurrency or lvl) > limits.max_concurrency
    ]
    if in_flight:
        raise InvalidInput(
            "load.levels",
            f"{in_flight[0]:g} requests at once exceeds this server's limit of "
            f"{limits.max_concurrency} concurrent requests (INFERCOST_MAX_CONCURRENCY)"
            + _per_shard(load.fixed_shards)
            + "; lower the level, raise load.shards or set load.max_concurrency",
        )


def concurrency_levels(plan: Plan, limits: ServerLimits) -> None:
    """A concurrency level is a whole number of users, at most the server's limit in each
    worker process (shards split a level's users among them)."""
    load = plan.load
    if load.mode != "concurrency":
        return
    levels = load.levels or []
    fractional = [lvl for lvl in levels if not lvl.is_integer()]
    if fractional:
        raise InvalidInput(
            "load.levels",
            f"{fractional[0]:g} is not a whole number; a concurrency level is a number "
            "of users (use mode 'rate' for requests per second)",
        )
    too_high = [lvl for lvl in levels if -(-lvl // load.fixed_shards) > limits.max_concurrency]
    if too_high:
        raise InvalidInput(
            "load.levels",
            f"{too_high[0]:g} exceeds this server's limit of {limits.max_concurrency} "
            "concurrent requests (INFERCOST_MAX_CONCURRENCY)"
            + _per_shard(load.fixed_shards)
            + "; lower the level or raise load.shards",
        )


def burstiness(plan: Plan, limits: ServerLimits) -> None:
    """Burstiness is the shape of gamma arrivals (of a rate plan's levels, or a sweep's)."""
    load = plan.load
    if load.mode not in ("rate", "sweep"):
        return
    if load.burstiness != 1.0 and load.arrival != "gamma":
        raise InvalidInput(
            "load.burstiness",
            f"applies only to arrival 'gamma' (this plan has '{load.arrival}'); "
            "set load.arrival to 'gamma' or leave burstiness out",
        )


def rate_duration(plan: Plan, limits: ServerLimits) -> None:
    """A rate level of a duration schedules at most MAX_REQUESTS_PER_LEVEL requests, and more
    than its warm-up requests."""
    load = plan.load
    if load.mode != "rate" or load.duration_s is None:
        return
    for rate in load.levels or []:
        planned = load.level_size(rate).planned
        if planned > MAX_REQUESTS_PER_LEVEL:
            raise InvalidInput(
                "load.duration_s",
                f"{load.duration_s:g} s at {rate:g} requests/s is about {planned:,} "
                f"requests, over the limit of {MAX_REQUESTS_PER_LEVEL:,} per level",
            )
        if load.warmup_requests >= planned:
            raise InvalidInput(
                "load.warmup_requests",
                f"{load.warmup_requests} warm-up requests fill the whole "
                f"{load.duration_s:g} s level at {rate:g} requests/s "
                f"(about {planned} requests); lower it or raise load.duration_s",
            )


def sessions_mode(plan: Plan, limits: ServerLimits) -> None:
    """A conversation's next turn waits for its answer: only closed-loop users, all in one
    process (each shard would replay the same conversations), do that."""
    if plan.workload.sessions is not None and (
        plan.load.mode != "concurrency" or plan.load.fixed_shards > 1
    ):
        raise InvalidInput(
            "workload.sessions", "multi-turn sessions need load.mode 'concurrency' and one shard"
        )


def prefix_room(plan: Plan, limits: ServerLimits) -> None:
    """A shared prefix belongs to synthetic prompts and must leave room for their own part."""
    workload = plan.workload
    prefix = workload.prefix
    if prefix is None:
        return
    if workload.dataset_id is not None or workload.sessions is not None:
        raise InvalidInput(
            "workload.prefix",
            "shared prefixes apply to synthetic prompts: leave out dataset_id and sessions",
        )
    lengths = workload.input_tokens
    shortest = None if lengths is None else (lengths.min or lengths.mean)
    if shortest is not None and shortest <= prefix.tokens:
        raise InvalidInput(
            "workload.prefix.tokens",
            f"{prefix.tokens} tokens of prefix leave no room in prompts of {shortest:g} "
            "tokens: input_tokens is the whole prompt (prefix included), so make it longer "
            "than the prefix (its min, or its mean when no min is given)",
        )


def distinct_models(plan: Plan, limits: ServerLimits) -> None:
    """workload.models names each model once: a name twice would split one model's figures."""
    models = plan.workload.models
    if models is None:
        return
    if not models:
        raise InvalidInput(
            "workload.models", "give at least one model, or leave models out to send the endpoint's"
        )
    seen: set[str] = set()
    for index, model in enumerate(models):
        if model.name in seen:
            raise InvalidInput(
                f"workload.models[{index}].name",
                f"model {model.name!r} is named twice: give each model once, with its whole weight",
            )
        seen.add(model.name)


def images_with_feature(plan: Plan, limits: ServerLimits) -> None:
    """workload.images sizes the images of the image feature: alone it would send none."""
    workload = plan.workload
    if workload.images is not None and not workload.has("image"):
        raise InvalidInput(
            "workload.images",
            'images are sent only with the image feature: add "image" to workload.features',
        )


Rule = Callable[[Plan, ServerLimits], None]

#: Every rule a plan meets before its endpoint is looked up, in the order they are answered.
RULES: tuple[Rule, ...] = (
    job_size,
    count_or_duration,
    warmup_count_or_seconds,
    trace_fields,
    sweep_fields,
    concurrency_cap,
    burst_levels,
    concurrency_levels,
    burstiness,
    rate_duration,
    sessions_mode,
    prefix_room,
    distinct_models,
    images_with_feature,
)


def check_plan(plan: Plan, limits: ServerLimits) -> None:
    """Run RULES on a resolved plan; the first broken one raises InvalidInput."""
    for rule in RULES:
        rule(plan, limits)


#: Request features only a chat request can carry (tools, a response format, image parts).
CHAT_FEATURES = ("tools", "structured", "image")


def check_features_for_api(plan: Plan, api: str) -> None:
    """Request features the endpoint's API can carry: reasoning goes anywhere text streams;
    tools, structured answers and images need chat requests."""
    if api == "openai-chat":
        return
    for feature in plan.workload.features:
        if feature in CHAT_FEATURES or api == "openai-embeddings":
            raise InvalidInput(
                "workload.features",
                f"the {feature} feature needs chat requests: register the endpoint with api "
                f"openai-chat (this one is {api})",
            )


#: Features whose answers a grammar may fix (a JSON schema's, a forced tool call's).
GRAMMAR_FEATURES = ("structured", "tools")


def grammar_bound(engine: str | None, plan: Plan) -> bool:
    """Whether `engine` cannot end an answer its grammar fixes under this plan: llama.cpp
    constrains a structured answer (or a forced tool call) with a grammar that ends only at
    the end of sequence, which ignore_eos forbids."""
    return engine_of(engine) is ENGINES["llamacpp"] and plan.workload.ignore_eos


def check_features_for_engine(
    plan: Plan, engine: str | None, asked_by_items: Sequence[str] = ()
) -> None:
    """Request features the endpoint's engine can answer as asked (`asked_by_items`: the
    features a dataset's items carry of their own). Under grammar_bound, llama.cpp breaks
    every such stream off with an error ("Unexpected empty grammar stack", captured from a
    real llama-server), so every request of the job would fail."""
    if not grammar_bound(engine, plan):
        return
    asked = [f for f in GRAMMAR_FEATURES if f in plan.workload.features or f in asked_by_items]
    if asked:
        raise InvalidInput(
            "workload.ignore_eos",
            f"llama.cpp ends a {' or '.join(asked)} answer only at its end of sequence, which "
            "ignore_eos (the default, for exact lengths) forbids: it would break every stream "
            'off: send "ignore_eos": false with the job, and its answers end where their JSON '
            "does (compare TPOT, not E2E, with a plain run)",
        )


def check_for_embeddings(plan: Plan) -> None:
    """An embeddings endpoint's job: its requests have no tokens out, so an SLO may limit
    e2e_ms only, and a workload of chat sessions has nothing to send."""
    for name in ("ttft_ms", "tpot_ms", "itl_ms"):
        if plan.slo is not None and name in plan.slo:
            raise InvalidInput(
                f"slo.{name}",
                "an openai-embeddings endpoint streams no tokens: limit e2e_ms instead",
            )
    if plan.workload.sessions is not None:
        raise InvalidInput(
            "workload.sessions", "an openai-embeddings endpoint takes texts, not chat sessions"
        )
