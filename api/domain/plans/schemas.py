"""What a job asks for: the workload each request sends, the load plan and the SLO, as
requests give them (the plan's request vocabulary; infercost.jobs.plan is the resolved form)."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

import msgspec

from infercost.jobs.plan import Feature
from infercost.jobs.sweep import MAX_LEVELS
from infercost.limits import MAX_RATE, MAX_TOKENS, MIN_RATE
from infercost.shards.split import MAX_SHARDS
from infercost.workload.models import MAX_MODELS

TokenCount = Annotated[float, msgspec.Meta(gt=0, le=MAX_TOKENS)]
SloLimit = Annotated[float, msgspec.Meta(gt=0)]


class Lengths(msgspec.Struct, forbid_unknown_fields=True):
    """A token-length distribution, drawn per request, rounded and clipped to [min, max]
    (never below 1).

    `normal` (the default): `mean` and optional `std` (0 or absent: every length is the
    mean). `uniform`: every whole number from `min` to `max` equally likely (both required,
    no mean or std). `lognormal`: `mean` and `std` (> 0) of the lengths themselves, not of
    their logarithms: a long right tail, as real prompt and answer lengths have.
    """

    distribution: Annotated[
        Literal["normal", "uniform", "lognormal"],
        msgspec.Meta(
            description="How lengths are drawn: normal (mean, std), uniform (every whole number "
            "from min to max) or lognormal (mean, std of the lengths; a long right "
            "tail)",
            examples=["normal"],
        ),
    ] = "normal"
    mean: Annotated[
        TokenCount | None,
        msgspec.Meta(description="Mean length, in tokens (normal, lognormal)", examples=[512]),
    ] = None
    std: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=1_000_000)] | None,
        msgspec.Meta(
            description="Standard deviation of the length, in tokens; 0 or absent: every length is"
            " the mean",
            examples=[64],
        ),
    ] = None
    min: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)] | None,
        msgspec.Meta(
            description="Shortest length, in tokens (lengths drawn below are clipped to it; "
            "required for uniform)",
            examples=[16],
        ),
    ] = None
    max: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)] | None,
        msgspec.Meta(
            description="Longest length, in tokens (lengths drawn above are clipped to it; "
            "required for uniform)",
            examples=[2048],
        ),
    ] = None

    def __post_init__(self) -> None:
        # Raised here, msgspec reports it at this object's path (a 400 naming the field).
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        if self.distribution == "uniform":
            if self.min is None or self.max is None:
                raise ValueError(
                    "a uniform distribution needs min and max (every whole number between "
                    "them is equally likely)"
                )
            if self.mean is not None or self.std is not None:
                raise ValueError(
                    "a uniform distribution takes min and max only: leave out mean and std "
                    "(its mean is (min + max) / 2)"
                )
            return
        if self.mean is None:
            raise ValueError(f"a {self.distribution} distribution needs mean")
        if self.distribution == "lognormal" and not self.std:
            raise ValueError(
                "a lognormal distribution needs std > 0 (the spread of the lengths); "
                "for a fixed length give mean alone"
            )


class Sessions(msgspec.Struct, forbid_unknown_fields=True):
    """Multi-turn conversations (README, "Multi-turn sessions"): each closed-loop user
    replays a conversation of `turns` turns; every turn sends the whole history (earlier
    user messages and the model's actual answers) plus a new user message. Every
    conversation starts with the same system prompt of about `system_prompt_tokens`
    tokens, so an engine's prefix cache can reuse it."""

    turns: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=64)],
        msgspec.Meta(
            description="Turns in each conversation (1 to 64); every turn resends the whole "
            "history",
            examples=[4],
        ),
    ]
    system_prompt_tokens: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=1_000_000)],
        msgspec.Meta(
            description="Length of the system prompt every conversation starts with, in tokens "
            "(the same text, so a prefix cache can reuse it)",
            examples=[256],
        ),
    ] = 0


class Prefix(msgspec.Struct, forbid_unknown_fields=True):
    """Shared prefixes (README, "Shared prefixes"): `count` distinct prefixes of about
    `tokens` tokens; request seq uses prefix seq mod count, then a part of its own."""

    count: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=10_000)],
        msgspec.Meta(
            description="Number of distinct shared prefixes; request n uses prefix n mod count",
            examples=[4],
        ),
    ]
    tokens: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=1_000_000)],
        msgspec.Meta(
            description="Length of each shared prefix, in tokens (part of input_tokens)",
            examples=[1024],
        ),
    ]


class ModelShare(msgspec.Struct, forbid_unknown_fields=True):
    """One model or adapter served by the endpoint, and its weight among workload.models."""

    name: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=256,
            description="The model name requests ask for (the body's `model`)",
            examples=["llama-3.1-8b-lora-support"],
        ),
    ]
    weight: Annotated[
        float,
        msgspec.Meta(
            gt=0,
            le=1e6,
            description="Its share of the requests: weight / the sum of the weights",
            examples=[3.0],
        ),
    ] = 1.0


class Images(msgspec.Struct, forbid_unknown_fields=True):
    """The images each request of the `image` feature carries, made locally: PNG files of
    this size, a different one per request."""

    count: Annotated[
        int, msgspec.Meta(ge=1, le=16, description="Images per request", examples=[1])
    ] = 1
    width: Annotated[
        int, msgspec.Meta(ge=16, le=4096, description="Width in pixels", examples=[512])
    ] = 512
    height: Annotated[
        int, msgspec.Meta(ge=16, le=4096, description="Height in pixels", examples=[512])
    ] = 512


class Workload(msgspec.Struct, forbid_unknown_fields=True):
    """What each request asks for: prompt and output lengths, sampling, streaming.

    Synthetic prompts need `input_tokens` and `output_tokens`. With `dataset_id` the prompts
    come from that dataset (POST /v1/datasets), sent in an order the seed shuffles, cycling;
    each item's own max_tokens sets its output length, else `output_tokens` does.
    `sessions` makes each closed-loop user hold a multi-turn conversation (with a dataset,
    its conversations are replayed turn by turn; without one, `input_tokens` is the length
    of each new user message). `prefix` makes synthetic prompts share prefixes on purpose:
    `count` distinct prefixes of about `tokens` tokens, each prompt one of them followed by a
    unique rest (`input_tokens` is still the whole prompt's length), so the engine's prefix
    cache is measured rather than avoided.

    Every level draws its own prompts (and its own dataset order) from the seed. Without a
    `seed` each job draws a fresh one (returned in the job's workload): a rerun then sends
    prompts an engine's prefix cache has not seen, and giving that seed repeats a job exactly.
    """

    input_tokens: Annotated[
        Lengths | None,
        msgspec.Meta(
            description="Prompt length per request, in tokens (synthetic prompts; with sessions, "
            "each new user message)",
            examples=[{"mean": 512, "std": 64}],
        ),
    ] = None
    output_tokens: Annotated[
        Lengths | None,
        msgspec.Meta(
            description="Output length per request, in tokens (sent as max_tokens)",
            examples=[{"mean": 128}],
        ),
    ] = None
    dataset_id: Annotated[
        uuid.UUID | None,
        msgspec.Meta(
            description="A dataset (POST /v1/datasets) to take prompts from instead of synthetic "
            "ones",
            examples=["0b6f7a52-3c1e-4d2a-9f0e-6a1b2c3d4e5f"],
        ),
    ] = None
    # A workload preset (GET /v1/presets): its lengths fill input_tokens and output_tokens
    # left out, and its SLO applies when the job gives none.
    preset: Annotated[
        str | None,
        msgspec.Meta(
            description="A workload preset (GET /v1/presets) whose lengths fill input_tokens and "
            "output_tokens left out, and whose SLO applies when the job gives none",
            examples=["interactive-chatbot"],
        ),
    ] = None
    sessions: Annotated[
        Sessions | None,
        msgspec.Meta(
            description="Multi-turn conversations: each closed-loop user replays a conversation",
            examples=[{"turns": 4, "system_prompt_tokens": 256}],
        ),
    ] = None
    prefix: Annotated[
        Prefix | None,
        msgspec.Meta(
            description="Shared prompt prefixes, so the engine's prefix cache is measured rather "
            "than avoided",
            examples=[{"count": 4, "tokens": 1024}],
        ),
    ] = None
    ignore_eos: Annotated[
        bool,
        msgspec.Meta(
            description="Ask the server to keep generating past end-of-sequence, so every answer "
            "has its requested length",
            examples=[True],
        ),
    ] = True
    stream: Annotated[
        bool,
        msgspec.Meta(
            description="Stream the answers (server-sent events); false measures only end-to-end "
            "latency",
            examples=[True],
        ),
    ] = True
    temperature: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=2)] | None,
        msgspec.Meta(
            description="Sampling temperature sent with each request (0 to 2); absent: the "
            "server's default",
            examples=[0.0],
        ),
    ] = None
    seed: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] | None,
        msgspec.Meta(
            description="Seed of the prompts and their order; absent: a fresh one per job "
            "(returned in the job), so reruns do not hit a warm prefix cache",
            examples=[42],
        ),
    ] = None
    features: Annotated[
        list[Feature],
        msgspec.Meta(
            description="What requests carry beyond a prompt, combined: reasoning (reasoning "
            "tokens counted apart from answer tokens, with their own first-token time and "
            "rate), tools (tool definitions and tool_choice required; the share of calls valid "
            "against their schema), structured (response_format with a JSON schema; the share "
            "of answers valid against it), image (chat with image parts made locally at "
            "workload.images' size; image tokens where usage reports them); empty: plain "
            "requests",
            examples=[["reasoning"]],
        ),
    ] = []
    models: Annotated[
        Annotated[list[ModelShare], msgspec.Meta(max_length=MAX_MODELS)] | None,
        msgspec.Meta(
            description="Models or adapters on the endpoint to spread requests over: each "
            "request asks for one drawn by weight (seeded, so a rerun sends each request to the "
            "same model); every run then has per-model figures. Absent: every request asks for "
            "the endpoint's model",
            examples=[[{"name": "base", "weight": 3}, {"name": "lora-a", "weight": 1}]],
        ),
    ] = None
    images: Annotated[
        Images | None,
        msgspec.Meta(
            description="With the image feature: images per request and their size (absent: "
            "one of 512 x 512)",
            examples=[{"count": 1, "width": 512, "height": 512}],
        ),
    ] = None


class TraceWindow(msgspec.Struct, forbid_unknown_fields=True):
    """The part of a traffic log a replay sends, in the trace's own seconds after its first
    request (never the wall-clock seconds of a level)."""

    start_s: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=31_622_400)],
        msgspec.Meta(
            description="Where the window starts, in seconds after the trace's first request",
            examples=[0.0],
        ),
    ] = 0.0
    duration_s: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=31_622_400)] | None,
        msgspec.Meta(
            description="How much of the trace it holds, in the trace's seconds; absent: to "
            "the trace's end",
            examples=[600.0],
        ),
    ] = None


class Load(msgspec.Struct, forbid_unknown_fields=True):
    """The load plan: levels, how long each lasts, and warm-up.

    `mode` "concurrency" is a closed loop: each level is a number of users (a whole number),
    each sending its next request when the previous one ends. "rate" is an open loop: each
    level is requests per second, sent at the times an `arrival` process schedules whatever
    the server does; `burstiness` is the gamma shape k (inter-arrival coefficient of variation
    1/sqrt(k); k = 1 is Poisson). A level sends `requests_per_level` requests (100 when
    neither is given) or runs for `duration_s` seconds: a rate level schedules its requests
    over duration_s, concurrency users start no new request after it. The first
    `warmup_requests` of each level, or (instead) every request sent in its first
    `warmup_s` seconds, are stored but left out of every figure; with warmup_s the
    measured part (requests_per_level or duration_s) comes after those seconds.
    `cooldown_s` pauses that long after each level before the next one starts.

    A rate level may cap its requests in flight with `max_concurrency` (vLLM's
    `--max-concurrency` beside `--request-rate`): a request due while that many are out
    waits for one to end, in order, and is sent then; its wait is part of its queue delay
    (t_send - t_sched) but not of the client's own lateness, and the run's `concurrency_cap`
    block says whether the cap was reached and how many requests waited, for how long.

    "burst" sends every request of a level at once (vLLM's `--request-rate inf`): each level
    is a number of requests, all due at the level's start (connections opened beforehand),
    so the level shows how the server absorbs and drains them. It takes no
    requests_per_level, duration_s or warm-up (a burst has no steady state); it may take
    `max_concurrency` (then at most that many are in flight, the rest queued from the
    start). Its runs have mode "burst" and level = the requests sent at once; they are never
    evidence of a sustainable rate (capacity and estimates leave them out).

    "trace" replays a stored traffic log (POST /v1/traffic): `traffic_id` names it, `window`
    the part to send (the trace's own seconds), `time_scale` how much faster than recorded
    (10: ten trace seconds a second). Each request of the window is due (t_i - t_0 -
    start_s) / time_scale after the level starts, open loop, with its own input and output
    lengths; requests that share prefix blocks share prompt text, and a session's requests
    grow one conversation's prompt. It takes no levels, counts, durations or warm-up; it
    may take `max_concurrency`. Its one run reports replay fidelity and the SLO per
    `interval_s` of trace time (default 60) in its `replay` block.

    "sweep" chooses its own levels (give no `levels`): one synchronous level (1 user), one
    throughput level (`max_concurrency` users, default 64, at most the server's limit), then
    `rate_levels` (default 5) request rates evenly spaced strictly between the two levels'
    measured requests/s, sent by the `arrival` process (constant unless given). With an
    `slo` it stops after two consecutive rate levels fail it; any level whose error rate is
    above `max_error_rate` (default 0.05) stops it too. Its levels last `duration_s` (30 s
    when the plan gives neither a duration nor a count); a level too short or too thin for
    its percentiles is measured once more, longer, and a sweep never says `completed` over
    inadequate levels. The job's `sweep` block says what was chosen and why it stopped.
    """

    mode: Annotated[
        Literal["concurrency", "rate", "burst", "sweep", "trace"],
        msgspec.Meta(
            description="concurrency: levels are users in a closed loop; rate: levels are "
            "requests/s in an open loop; burst: levels are requests all sent at once "
            "(an unbounded rate); sweep: levels chosen by infercost; trace: a stored "
            "traffic log replayed at its own times",
            examples=["concurrency"],
        ),
    ]
    # Required for concurrency and rate, never given for a sweep.
    levels: Annotated[
        # Users, or requests/s: at least MIN_RATE (a slower rate's schedule overflows).
        Annotated[
            list[Annotated[float, msgspec.Meta(ge=MIN_RATE, le=MAX_RATE)]],
            msgspec.Meta(min_length=1, max_length=MAX_LEVELS),
        ]
        | None,
        msgspec.Meta(
            description="The load levels, in users (concurrency), requests/s (rate) or "
            "requests sent at once (burst), 0.001 to 100,000; required for those modes, never "
            "given for a sweep",
            examples=[[1, 8, 32]],
        ),
    ] = None
    requests_per_level: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None,
        msgspec.Meta(
            description="Requests each level sends, warm-up included (100 when neither this nor "
            "duration_s is given)",
            examples=[200],
        ),
    ] = None
    duration_s: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=86_400)] | None,
        msgspec.Meta(
            description="How long each level runs, in seconds (instead of requests_per_level)",
            examples=[60.0],
        ),
    ] = None
    warmup_requests: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=100_000)],
        msgspec.Meta(
            description="The first requests of each level that are stored but left out of every "
            "figure",
            examples=[8],
        ),
    ] = 0
    warmup_s: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=3_600)] | None,
        msgspec.Meta(
            description="Seconds at the start of each level whose requests are left out of every "
            "figure (instead of warmup_requests)",
            examples=[10.0],
        ),
    ] = None
    cooldown_s: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=3_600)],
        msgspec.Meta(
            description="Pause after each level before the next starts, in seconds", examples=[0.0]
        ),
    ] = 0.0
    # Unset: poisson, or constant for a sweep (stored resolved).
    arrival: Annotated[
        Literal["constant", "poisson", "gamma"] | None,
        msgspec.Meta(
            description="Arrival process of a rate level: constant, poisson or gamma; absent: "
            "poisson (constant for a sweep)",
            examples=["poisson"],
        ),
    ] = None
    burstiness: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=1000)],
        msgspec.Meta(
            description="Gamma arrivals' shape k: inter-arrival coefficient of variation "
            "1/sqrt(k); 1 is Poisson",
            examples=[1.0],
        ),
    ] = 1.0
    timeout_s: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=3600)],
        msgspec.Meta(
            description="Per-request timeout, in seconds; a request past it counts as an error",
            examples=[300.0],
        ),
    ] = 300.0
    # How often the endpoint's metrics_urls are scraped during each level.
    telemetry_interval_s: Annotated[
        Annotated[float, msgspec.Meta(ge=0.1, le=60)],
        msgspec.Meta(
            description="How often the endpoint's metrics_urls are scraped during a level, in "
            "seconds",
            examples=[1.0],
        ),
    ] = 1.0
    # Sweep only; stored resolved (5, min(64, the server's limit), 0.05) for a sweep.
    # A sweep also measures its synchronous and throughput levels.
    rate_levels: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=MAX_LEVELS - 2)] | None,
        msgspec.Meta(
            description="Sweep only: request rates measured between the synchronous and the "
            "throughput level (default 5)",
            examples=[5],
        ),
    ] = None
    max_concurrency: Annotated[
        Annotated[int, msgspec.Meta(ge=1)] | None,
        msgspec.Meta(
            description="Rate and burst: the most requests in flight at once; a request due "
            "while that many are out waits for one to end (its wait counts as queue delay, "
            "not as client lateness). Sweep: users of the throughput level (default 64). At "
            "most the server's limit; not for concurrency levels (their users are the cap)",
            examples=[16],
        ),
    ] = None
    max_error_rate: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=1)] | None,
        msgspec.Meta(
            description="Sweep only: a level whose error rate is above this share (0 to 1) stops "
            "the sweep (default 0.05)",
            examples=[0.05],
        ),
    ] = None
    traffic_id: Annotated[
        uuid.UUID | None,
        msgspec.Meta(
            description="Trace only: the traffic log to replay (POST /v1/traffic returns its id)",
            examples=["6c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"],
        ),
    ] = None
    time_scale: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=10_000)] | None,
        msgspec.Meta(
            description="Trace only: how much faster than recorded the trace is sent (10: ten "
            "trace seconds each second); default 1",
            examples=[10.0],
        ),
    ] = None
    window: Annotated[
        TraceWindow | None,
        msgspec.Meta(
            description="Trace only: the part of the trace to send, in its own seconds; "
            "absent: all of it",
            examples=[{"start_s": 0, "duration_s": 600}],
        ),
    ] = None
    interval_s: Annotated[
        Annotated[float, msgspec.Meta(ge=1, le=86_400)] | None,
        msgspec.Meta(
            description="Trace only: the interval, in trace seconds, its SLO attainment and "
            "load points are given per (default 60)",
            examples=[60.0],
        ),
    ] = None
    # Worker processes that run each level together, starting at one agreed instant; their
    # samples merge into one run (README, "Shards"). A concurrency level needs >= shards users.
    # "auto": each level takes as many as its expected event rate needs (docs/jobs.md).
    shards: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=MAX_SHARDS)] | Literal["auto"] | None,
        msgspec.Meta(
            description="Worker processes that run each level together, starting at one agreed "
            "instant; their samples merge into one run. 'auto' (the default where the plan "
            "allows splitting: no sessions, no max_concurrency) gives each level as many as "
            "its expected event rate needs, up to the workers free, and the run says how many "
            "and why",
            examples=["auto"],
        ),
    ] = None


class SloLimits(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Limits on one figure at chosen statistics (ms), e.g. {"p95": 500}."""

    mean: Annotated[
        SloLimit | None, msgspec.Meta(description="Limit on the mean, in ms", examples=[300.0])
    ] = None
    p50: Annotated[
        SloLimit | None, msgspec.Meta(description="Limit on the median, in ms", examples=[200.0])
    ] = None
    p90: Annotated[
        SloLimit | None,
        msgspec.Meta(description="Limit on the 90th percentile, in ms", examples=[400.0]),
    ] = None
    p95: Annotated[
        SloLimit | None,
        msgspec.Meta(description="Limit on the 95th percentile, in ms", examples=[500.0]),
    ] = None
    p99: Annotated[
        SloLimit | None,
        msgspec.Meta(description="Limit on the 99th percentile, in ms", examples=[800.0]),
    ] = None
    p999: Annotated[
        SloLimit | None,
        msgspec.Meta(description="Limit on the 99.9th percentile, in ms", examples=[1500.0]),
    ] = None
    max: Annotated[
        SloLimit | None,
        msgspec.Meta(description="Limit on the slowest request, in ms", examples=[3000.0]),
    ] = None


class Slo(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Service-level objective: a request meets it when its own TTFT, TPOT and E2E are within
    the loosest limit given for each; a run passes when every stated statistic holds."""

    ttft_ms: Annotated[
        SloLimits | None,
        msgspec.Meta(description="Limits on time to first token, in ms", examples=[{"p95": 500}]),
    ] = None
    tpot_ms: Annotated[
        SloLimits | None,
        msgspec.Meta(
            description="Limits on time per output token after the first, in ms",
            examples=[{"p95": 50}],
        ),
    ] = None
    itl_ms: Annotated[
        SloLimits | None,
        msgspec.Meta(
            description="Limits on inter-token latency (gaps between streamed tokens), in ms",
            examples=[{"p99": 100}],
        ),
    ] = None
    e2e_ms: Annotated[
        SloLimits | None,
        msgspec.Meta(
            description="Limits on end-to-end request latency, in ms", examples=[{"p95": 8000}]
        ),
    ] = None
