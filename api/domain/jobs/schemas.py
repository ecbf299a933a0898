"""Request and response shapes for jobs, runs and raw samples (CONTRACT.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from api.domain.history.schemas import Change
from infercost.limits import MAX_RATE, MAX_TOKENS, MIN_RATE
from infercost.prices.pricing import PriceSource
from infercost.sharding import MAX_SHARDS
from infercost.sweep import MAX_LEVELS
from infercost.telemetry.summary import Telemetry

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
        Literal["concurrency", "rate", "burst", "sweep"],
        msgspec.Meta(
            description="concurrency: levels are users in a closed loop; rate: levels are "
            "requests/s in an open loop; burst: levels are requests all sent at once "
            "(an unbounded rate); sweep: levels chosen by infercost",
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
    # Worker processes that run each level together, starting at one agreed instant; their
    # samples merge into one run (README, "Shards"). A concurrency level needs >= shards users.
    shards: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=MAX_SHARDS)],
        msgspec.Meta(
            description="Worker processes that run each level together, starting at one agreed "
            "instant; their samples merge into one run",
            examples=[1],
        ),
    ] = 1


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


class JobCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/jobs. `force`: submit even though the endpoint's last preflight check
    failed (otherwise 409 with the check's reason); not stored with the job."""

    endpoint_id: Annotated[
        uuid.UUID,
        msgspec.Meta(
            description="The endpoint to benchmark (POST /v1/endpoints returns its id)",
            examples=["3f2b8c1d-5e6a-4b7c-8d9e-0f1a2b3c4d5e"],
        ),
    ]
    workload: Annotated[
        Workload,
        msgspec.Meta(
            description="What each request asks for: prompt and output lengths, sampling, "
            "streaming",
            examples=[{"input_tokens": {"mean": 512, "std": 64}, "output_tokens": {"mean": 128}}],
        ),
    ]
    load: Annotated[
        Load,
        msgspec.Meta(
            description="The load plan: levels, how long each lasts, warm-up",
            examples=[{"mode": "concurrency", "levels": [1, 8, 32], "requests_per_level": 200}],
        ),
    ]
    slo: Annotated[
        Slo | None,
        msgspec.Meta(
            description="Service-level objective each run is judged against; absent: the preset's,"
            " or none",
            examples=[{"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}}],
        ),
    ] = None
    force: Annotated[
        bool,
        msgspec.Meta(
            description="Submit even though the endpoint's last preflight check failed (otherwise "
            "409 with the check's reason); not stored",
            examples=[False],
        ),
    ] = False


class Progress(msgspec.Struct):
    """Requests done out of all requests the job will send (warm-up included).

    A level of fixed duration counts rate x duration_s until it starts (then its schedule's
    exact count); a concurrency level of fixed duration counts the requests done so far until
    it ends. When a job succeeds, done equals total.
    """

    done: int
    total: int


class QueueEstimate(msgspec.Struct):
    """Where a queued or running job stands and when it should start and end.

    Jobs of every team wait on one queue and run one at a time per worker, in the order
    they were submitted. Lengths come from the plan where it fixes them (rates, durations)
    and otherwise from the endpoint's pace in its latest run; `basis` says which, and why
    an estimate is missing (null). Estimates assume as many workers as jobs running now.
    """

    position: Annotated[
        int | None,
        msgspec.Meta(
            description="1 when it starts next; how many queued jobs are ahead of it, plus "
            "one. Null once it runs",
            examples=[2],
        ),
    ]
    jobs_running: Annotated[
        int, msgspec.Meta(description="Jobs running now, all teams", examples=[1])
    ]
    estimated_start_at: Annotated[
        datetime | None,
        msgspec.Meta(description="When it should start (UTC); its start once it runs"),
    ]
    estimated_end_at: Annotated[
        datetime | None, msgspec.Meta(description="When it should end (UTC)")
    ]
    basis: Annotated[
        str,
        msgspec.Meta(
            description="What the estimate rests on, or why there is none",
            examples=["1 queued ahead, 1 running, 1 worker (as many as jobs running now)"],
        ),
    ]


class Distribution(msgspec.Struct):
    """count, mean, std, min, percentiles (linear interpolation) and max."""

    count: Annotated[int, msgspec.Meta(description="Values summarised", examples=[200])]
    mean: Annotated[
        float | None,
        msgspec.Meta(
            description="Mean, in the figure's unit (ms for latencies, tokens/s for speeds)",
            examples=[212.4],
        ),
    ]
    std: Annotated[
        float | None,
        msgspec.Meta(description="Standard deviation, in the figure's unit", examples=[18.9]),
    ]
    min: Annotated[
        float | None,
        msgspec.Meta(description="Smallest value, in the figure's unit", examples=[180.2]),
    ]
    p50: Annotated[
        float | None,
        msgspec.Meta(
            description="Median (linear interpolation), in the figure's unit", examples=[208.0]
        ),
    ]
    p90: Annotated[
        float | None,
        msgspec.Meta(description="90th percentile, in the figure's unit", examples=[236.5]),
    ]
    p95: Annotated[
        float | None,
        msgspec.Meta(description="95th percentile, in the figure's unit", examples=[248.1]),
    ]
    p99: Annotated[
        float | None,
        msgspec.Meta(description="99th percentile, in the figure's unit", examples=[270.3]),
    ]
    p999: Annotated[
        float | None,
        msgspec.Meta(description="99.9th percentile, in the figure's unit", examples=[281.7]),
    ]
    max: Annotated[
        float | None,
        msgspec.Meta(description="Largest value, in the figure's unit", examples=[283.0]),
    ]


class ServerTimingsBlock(msgspec.Struct):
    """The engine's own per-request timings (README, "The server's own timings"), summarised
    over the measured, successful requests that carried them, beside the client's figures.

    `source`: llamacpp (its `timings` object) or tgi (its response headers). `prefill_ms`:
    the server's prompt processing time (cached tokens excluded); `tpot_ms`: its time per
    output token; `queue_ms`: time in its queue (TGI). `ttft_gap_ms` and `tpot_gap_ms` are
    client minus server, per request: network, waiting in front of the engine, tokenisation
    and template, client overhead. `output_tokens_agree`: share of requests whose output
    token count equals the server's. `flagged` with `notes` when a gap is large.
    """

    source: Annotated[
        str,
        msgspec.Meta(
            description="Where the timings came from: llamacpp (its timings object) or tgi (its "
            "response headers)",
            examples=["llamacpp"],
        ),
    ]
    requests: Annotated[
        int,
        msgspec.Meta(
            description="Measured, successful requests that carried the server's timings",
            examples=[200],
        ),
    ]
    prefill_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="The server's prompt processing time per request, in ms (cached tokens "
            "excluded)",
            examples=[{"count": 200, "p50": 31.2}],
        ),
    ]
    tpot_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="The server's time per output token, in ms",
            examples=[{"count": 200, "p50": 9.8}],
        ),
    ]
    queue_ms: Annotated[
        Distribution | None,
        msgspec.Meta(description="Time in the server's queue, in ms (TGI only)", examples=[None]),
    ]
    ttft_gap_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Client TTFT minus server prefill per request, in ms: network, waiting in "
            "front of the engine, tokenisation, client overhead",
            examples=[{"count": 200, "p50": 4.1}],
        ),
    ]
    tpot_gap_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Client TPOT minus server TPOT per request, in ms",
            examples=[{"count": 200, "p50": 0.3}],
        ),
    ]
    output_tokens_agree: Annotated[
        float | None,
        msgspec.Meta(
            description="Share (0 to 1) of requests whose output token count equals the server's",
            examples=[1.0],
        ),
    ]
    flagged: Annotated[
        bool,
        msgspec.Meta(
            description="Whether a gap is large enough to question the client's figures (see "
            "notes)",
            examples=[False],
        ),
    ]
    notes: Annotated[
        list[str],
        msgspec.Meta(description="What a large gap means, a sentence each", examples=[[]]),
    ]


class AdequacyReason(msgspec.Struct):
    """One reason a level's evidence does not support its figures: `code` (few_requests,
    short, client_bound, rate_not_held, concurrency_not_held, errors, prompt_cache) and what
    it means and what to do."""

    code: Annotated[
        str,
        msgspec.Meta(
            description="few_requests, short, client_bound, rate_not_held, concurrency_not_held, "
            "errors or prompt_cache; a level skipped as capacity evidence may also say burst "
            "(requests sent at once) or concurrency_capped (requests waited for "
            "load.max_concurrency)",
            examples=["few_requests"],
        ),
    ]
    detail: Annotated[
        str,
        msgspec.Meta(
            description="What it means and what to do",
            examples=[
                "only 12 measured requests: p99 needs at least 100; raise requests_per_level"
            ],
        ),
    ]


class Adequacy(msgspec.Struct):
    """Whether the level's evidence supports the figures it reports (README, "Adequacy"):
    enough requests for its percentiles, long enough for telemetry, not client-bound, few
    errors, prefill not served from the prefix cache. Capacity and estimates use adequate
    levels only."""

    ok: Annotated[
        bool,
        msgspec.Meta(
            description="Whether the level's evidence supports its figures (capacity and estimates"
            " use adequate levels only)",
            examples=[True],
        ),
    ]
    reasons: Annotated[
        list[AdequacyReason], msgspec.Meta(description="Why not, when ok is false", examples=[[]])
    ]


class CacheBlock(msgspec.Struct):
    """Prompt tokens the server served from its prefix cache, over the measured, successful
    requests that reported it (usage.prompt_tokens_details.cached_tokens, or the engine's
    own count). A high `share` makes TTFT incomparable with uncached runs."""

    requests: Annotated[
        int,
        msgspec.Meta(
            description="Measured, successful requests that reported cached tokens", examples=[200]
        ),
    ]
    requests_with_hits: Annotated[
        int,
        msgspec.Meta(
            description="Of those, requests with at least one cached prompt token", examples=[12]
        ),
    ]
    prompt_tokens: Annotated[
        int, msgspec.Meta(description="Their prompt tokens, in tokens", examples=[102400])
    ]
    cached_prompt_tokens: Annotated[
        int,
        msgspec.Meta(
            description="Their prompt tokens served from the prefix cache, in tokens",
            examples=[3072],
        ),
    ]
    share: Annotated[
        float | None,
        msgspec.Meta(
            description="cached_prompt_tokens / prompt_tokens (0 to 1); high values make TTFT "
            "incomparable with uncached runs",
            examples=[0.03],
        ),
    ]


class PromptTokenizer(msgspec.Struct):
    """How a level's synthetic prompts were built to their drawn lengths, said as it starts.

    `form`: the endpoint's tokenizer request that counted them (e.g. "llamacpp:/tokenize
    content", "vllm:/tokenize messages"), null when none answered consistently. `exact`:
    whether prompts could be built to exactly the token count the server reports.
    `template_tokens`: the chat template's tokens, measured from the server's usage where
    the form counts raw text only. `note`: what that means, in a sentence.
    """

    form: Annotated[
        str | None,
        msgspec.Meta(
            description="The endpoint's tokenizer request that counted the prompts; null when none"
            " answered consistently",
            examples=["vllm:/tokenize messages"],
        ),
    ]
    exact: Annotated[
        bool,
        msgspec.Meta(
            description="Whether prompts were built to exactly the token count the server reports",
            examples=[True],
        ),
    ]
    template_tokens: Annotated[
        int | None,
        msgspec.Meta(
            description="The chat template's tokens, in tokens, measured from usage where the form"
            " counts raw text only",
            examples=[7],
        ),
    ]
    note: Annotated[
        str,
        msgspec.Meta(
            description="What that means, in a sentence", examples=["prompt lengths are exact"]
        ),
    ]


class RequestCounts(msgspec.Struct):
    """Measured requests (warm-up excluded) and failures by error class."""

    total: Annotated[
        int, msgspec.Meta(description="Measured requests (warm-up excluded)", examples=[200])
    ]
    succeeded: Annotated[
        int, msgspec.Meta(description="Measured requests that succeeded", examples=[199])
    ]
    failed: Annotated[int, msgspec.Meta(description="Measured requests that failed", examples=[1])]
    errors: Annotated[
        dict[str, int],
        msgspec.Meta(
            description="Failed requests by error class (connect, timeout, http_4xx, http_5xx, "
            "stream_broken, protocol, empty)",
            examples=[{"timeout": 1}],
        ),
    ]


class Cost(msgspec.Struct):
    """Price and cost per unit; `reason` explains any null.

    `price_source` says where `usd_per_hour` came from: `run` (the snapshot stored when the
    run was measured), `endpoint` (its usd_per_hour), `price_book` (the entry in effect at
    `priced_at` x gpu_count) or `explicit` (the query's usd_per_hour). `priced_at` is the
    time whose price was used; null for an explicit price or when none was found.
    """

    usd_per_hour: Annotated[
        float | None,
        msgspec.Meta(description="The deployment's price, in USD per hour", examples=[3.5]),
    ]
    per_million_output_tokens_usd: Annotated[
        float | None,
        msgspec.Meta(
            description="USD per million output tokens: usd_per_hour / (output tokens/s x 3600) x "
            "1e6",
            examples=[0.87],
        ),
    ]
    per_million_total_tokens_usd: Annotated[
        float | None,
        msgspec.Meta(description="USD per million tokens, prompt and output", examples=[0.22]),
    ]
    per_thousand_requests_usd: Annotated[
        float | None,
        msgspec.Meta(description="USD per thousand successful requests", examples=[0.11]),
    ]
    at_slo_per_million_output_tokens_usd: Annotated[
        float | None,
        msgspec.Meta(
            description="USD per million output tokens counting only requests that met the SLO "
            "(goodput)",
            examples=[0.95],
        ),
    ]
    reason: Annotated[
        str | None, msgspec.Meta(description="Why a cost figure is null", examples=[None])
    ] = None
    priced_at: Annotated[
        datetime | None,
        msgspec.Meta(
            description="The time whose price was used (RFC 3339)",
            examples=["2026-12-01T10:00:00Z"],
        ),
    ] = None
    price_source: Annotated[
        PriceSource | None,
        msgspec.Meta(
            description="Where usd_per_hour came from: run, endpoint, price_book or explicit",
            examples=["price_book"],
        ),
    ] = None
    pricing: Annotated[
        Literal["per_hour", "per_token"],
        msgspec.Meta(
            description="per_hour (a deployment) or per_token (a hosted API)", examples=["per_hour"]
        ),
    ] = "per_hour"
    input_usd_per_million_tokens: Annotated[
        float | None,
        msgspec.Meta(
            description="A hosted API's price of prompt tokens, in USD per million tokens",
            examples=[None],
        ),
    ] = None
    output_usd_per_million_tokens: Annotated[
        float | None,
        msgspec.Meta(
            description="A hosted API's price of output tokens, in USD per million tokens",
            examples=[None],
        ),
    ] = None
    blended_usd_per_million_tokens: Annotated[
        float | None,
        msgspec.Meta(
            description="A hosted API's blended price, (3 x input + 1 x output) / 4, in USD per "
            "million tokens",
            examples=[None],
        ),
    ] = None
    per_million_input_tokens_usd: Annotated[
        float | None,
        msgspec.Meta(
            description="USD per million prompt tokens: usd_per_hour / (input tokens/s x 3600) x "
            "1e6; the cost per token of an embeddings endpoint",
            examples=[0.02],
        ),
    ] = None


class ShardHealth(msgspec.Struct):
    """One shard of a sharded level: its worker process, requests sent, CPU use, and how
    far its first send was from the earliest shard's (`start_offset_ms`, one clock)."""

    shard: Annotated[int, msgspec.Meta(description="The shard's index, from 0", examples=[0])]
    worker: Annotated[
        str | None,
        msgspec.Meta(
            description="The worker process that ran it (host:pid)",
            examples=["gpu-node-1:4242"],
        ),
    ]
    requests: Annotated[int, msgspec.Meta(description="Requests it sent", examples=[100])]
    cpu_util: Annotated[
        float | None,
        msgspec.Meta(
            description="Its CPU use over the level (1.0 = one core busy)", examples=[0.35]
        ),
    ]
    start_offset_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="Its first send after the earliest shard's, in ms (one clock)",
            examples=[0.4],
        ),
    ]
    # How late the shard woke for the agreed instant, and sent against the level's schedule
    # (t_send - t_sched over its requests).
    start_lag_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="How late it woke for the agreed start instant, in ms", examples=[0.2]
        ),
    ] = None
    send_late_p50_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="Median lateness of its sends against the level's schedule (t_send - "
            "t_sched), in ms",
            examples=[0.1],
        ),
    ] = None
    send_late_p99_ms: Annotated[
        float | None,
        msgspec.Meta(description="99th percentile of that lateness, in ms", examples=[0.9]),
    ] = None
    send_late_max_ms: Annotated[
        float | None, msgspec.Meta(description="Largest lateness, in ms", examples=[2.1])
    ] = None


class ClientHealth(msgspec.Struct):
    """Whether the load generator, not the server, set the pace.

    `concurrency_held` applies to concurrency levels; `send_rate` (measured sends per second)
    and `rate_held` to rate levels (METRICS.md, client health). Null where they do not apply.
    """

    queue_delay_p99_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="99th percentile of the delay between a request's scheduled and actual "
            "send, in ms (waits for a load.max_concurrency slot included: send_late_p99_ms is "
            "the client's own part)",
            examples=[0.8],
        ),
    ]
    cpu_util: Annotated[
        float | None,
        msgspec.Meta(
            description="The load generator's CPU use over the level (1.0 = one core busy; "
            "sharded: the busiest shard's)",
            examples=[0.35],
        ),
    ]
    inflight_mean: Annotated[
        float | None,
        msgspec.Meta(
            description="Mean requests in flight as the client counted them", examples=[7.9]
        ),
    ]
    concurrency_held: Annotated[
        bool | None,
        msgspec.Meta(
            description="Concurrency levels: whether the requested users were kept busy",
            examples=[True],
        ),
    ]
    send_rate: Annotated[
        float | None,
        msgspec.Meta(
            description="Rate levels: measured sends per second, in requests/s", examples=[None]
        ),
    ] = None
    rate_held: Annotated[
        bool | None,
        msgspec.Meta(
            description="Rate levels: whether the requested rate was sent", examples=[None]
        ),
    ] = None
    # The client's own lateness: queue delay less waits for a load.max_concurrency slot.
    send_late_p99_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="99th percentile of the client's own lateness in sending: queue delay "
            "less any wait for a load.max_concurrency slot, in ms (over 10 ms: client-bound); "
            "equal to queue_delay_p99_ms without a cap",
            examples=[0.8],
        ),
    ] = None
    # With load.shards > 1: cpu_util is the busiest shard's, and each shard is listed.
    shards: Annotated[
        list[ShardHealth] | None,
        msgspec.Meta(description="With load.shards > 1: each shard's health", examples=[None]),
    ] = None
    # The reading side (workers/loadgen/health.py): age of response bytes when parsed, how
    # long a ready callback waited for the event loop, the busiest second's CPU share, and
    # requests re-sent after a kept-alive connection turned out closed. Null for sharded
    # levels and runs stored before these were measured.
    read_lag_p50_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="Median age of response bytes when the client parsed them, in ms",
            examples=[0.2],
        ),
    ] = None
    read_lag_p99_ms: Annotated[
        float | None, msgspec.Meta(description="99th percentile of that age, in ms", examples=[1.1])
    ] = None
    read_lag_max_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="Largest age of response bytes when parsed, in ms", examples=[3.0]
        ),
    ] = None
    loop_lag_p50_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="Median wait of a ready callback for the client's event loop, in ms",
            examples=[0.05],
        ),
    ] = None
    loop_lag_p99_ms: Annotated[
        float | None,
        msgspec.Meta(description="99th percentile of that wait, in ms", examples=[0.6]),
    ] = None
    loop_lag_max_ms: Annotated[
        float | None,
        msgspec.Meta(description="Largest wait for the event loop, in ms", examples=[2.0]),
    ] = None
    cpu_util_peak: Annotated[
        float | None,
        msgspec.Meta(
            description="The busiest second's CPU share of the load generator (1.0 = one core)",
            examples=[0.6],
        ),
    ] = None
    resent: Annotated[
        int | None,
        msgspec.Meta(
            description="Requests sent again after a kept-alive connection turned out closed",
            examples=[0],
        ),
    ] = None
    # Figures the client's own lateness spoils: requests_per_s and output_tokens_per_s when
    # it sent late, ttft_ms, itl_ms, tpot_ms and e2e_ms when it read late.
    spoils: Annotated[
        list[str] | None,
        msgspec.Meta(
            description="Figures the client's own lateness spoils (rates when it sent late, "
            "latencies when it read late)",
            examples=[[]],
        ),
    ] = None


class ConcurrencyCap(msgspec.Struct):
    """A level run under load.max_concurrency: whether its requests in flight reached the
    cap, and how many measured requests waited for a slot and for how long. Those waits
    are part of queue_delay_ms (the plan's, not the client's lateness: client.send_late_p99_ms
    leaves them out, so they never make a run client-bound); latencies count from the send."""

    max_concurrency: Annotated[
        int, msgspec.Meta(description="The cap: load.max_concurrency", examples=[16])
    ]
    reached: Annotated[
        bool,
        msgspec.Meta(
            description="Whether the requests in flight reached the cap at some point",
            examples=[True],
        ),
    ]
    inflight_max: Annotated[
        int,
        msgspec.Meta(
            description="The most requests in flight at once, send to end, as the client "
            "counted them (warm-up included)",
            examples=[16],
        ),
    ]
    waited: Annotated[
        int,
        msgspec.Meta(description="Measured requests that waited for a slot", examples=[120]),
    ]
    waited_share: Annotated[
        float | None,
        msgspec.Meta(
            description="Share (0 to 1) of measured requests that waited for a slot",
            examples=[0.6],
        ),
    ]
    wait_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="How long those that waited waited for a slot, in ms",
            examples=[{"count": 120, "mean": 310.0, "max": 802.5}],
        ),
    ]


class Efficiency(msgspec.Struct):
    """A run against the roofline bounds of its hardware and model (METRICS.md, Physical
    limits), present when the endpoint gives hardware and params_b.

    Bounds in tokens/s: one stream's decode speed; output throughput at the run's own mean
    concurrency and context; output throughput no batch can beat. Fractions: `decode` =
    median per-user speed / decode bound, `throughput` = output tokens/s / bound at the
    run's concurrency, `peak` = output tokens/s / peak bound.
    """

    decode_bound_tokens_per_s: Annotated[
        float,
        msgspec.Meta(
            description="Roofline bound on one stream's decode speed, in tokens/s", examples=[610.0]
        ),
    ]
    throughput_bound_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Roofline bound on output throughput at the run's mean concurrency and "
            "context, in tokens/s",
            examples=[4200.0],
        ),
    ]
    peak_throughput_bound_tokens_per_s: Annotated[
        float,
        msgspec.Meta(
            description="Output throughput no batch can beat on this hardware, in tokens/s",
            examples=[21000.0],
        ),
    ]
    decode: Annotated[
        float | None,
        msgspec.Meta(description="Median per-user speed / decode bound (0 to 1)", examples=[0.16]),
    ]
    throughput: Annotated[
        float | None,
        msgspec.Meta(
            description="Output tokens/s / the bound at the run's concurrency (0 to 1)",
            examples=[0.44],
        ),
    ]
    peak: Annotated[
        float | None,
        msgspec.Meta(description="Output tokens/s / the peak bound (0 to 1)", examples=[0.09]),
    ]


class LiveFigures(msgspec.Struct):
    """A running level's figures so far, rewritten by the worker about twice a second and
    gone once the level ends (its summary then holds the final figures), for progress bars.

    `done` and `planned` count the level's requests, warm-up included (`planned` null while
    unknown: a concurrency level of fixed duration); `errors` the failed ones so far;
    `elapsed_s` the time since the level started. `ttft_ms_p50` and `output_tokens_per_s`
    are over the measured requests finished so far, defined as in the summary. A sharded
    level (load.shards > 1) reports only `done`, `planned` and `elapsed_s` while it runs:
    its `errors` and figures are null until its shards' samples are merged.
    """

    done: Annotated[
        int,
        msgspec.Meta(
            description="Requests of the level finished so far, warm-up included", examples=[120]
        ),
    ]
    planned: Annotated[
        int | None,
        msgspec.Meta(
            description="Requests the level will send, warm-up included; null while unknown",
            examples=[208],
        ),
    ]
    errors: Annotated[int | None, msgspec.Meta(description="Failed requests so far", examples=[0])]
    elapsed_s: Annotated[
        float, msgspec.Meta(description="Seconds since the level started", examples=[14.2])
    ]
    ttft_ms_p50: Annotated[
        float | None,
        msgspec.Meta(description="Median time to first token so far, in ms", examples=[210.5]),
    ]
    output_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(description="Output tokens per second so far, in tokens/s", examples=[1830.0]),
    ]


class Definitions(msgspec.Struct):
    """A run's figures recomputed from its raw samples as another tool defines them
    (`?definitions=vllm|guidellm|aiperf`; README, "Other tools' definitions").

    `tpot_ms` and `itl_ms` are the tool's figures of those names (`metric_names` gives the
    tool's own name), with its percentile method; `reported_stats` lists the statistics
    the tool itself prints. `differences` says in sentences how each differs from
    infercost's definition, `sources` where the definitions were read.
    """

    tool: str
    tpot_ms: Distribution
    itl_ms: Distribution
    output_tokens_per_s: float | None
    requests_per_s: float | None
    duration_s: float | None
    metric_names: dict[str, str]
    reported_stats: list[str]
    differences: list[str]
    sources: list[str]


class RunSummary(msgspec.Struct):
    """One load level's figures over its measured window (METRICS.md)."""

    id: Annotated[
        uuid.UUID,
        msgspec.Meta(description="The run's id", examples=["5d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"]),
    ]
    job_id: Annotated[
        uuid.UUID,
        msgspec.Meta(
            description="The job it belongs to", examples=["8b58da70-87c4-4a5e-9d3a-1f0e2b3c4d5e"]
        ),
    ]
    level: Annotated[
        float,
        msgspec.Meta(
            description="The load level: users (concurrency), requests/s (rate) or requests "
            "sent at once (burst)",
            examples=[8.0],
        ),
    ]
    mode: Annotated[
        str,
        msgspec.Meta(description="concurrency, rate or burst", examples=["concurrency"]),
    ]
    status: Annotated[
        str,
        msgspec.Meta(description="queued, running, succeeded or failed", examples=["succeeded"]),
    ]
    started_at: Annotated[
        datetime | None,
        msgspec.Meta(
            description="When the level started (RFC 3339)", examples=["2026-12-01T10:00:00Z"]
        ),
    ]
    finished_at: Annotated[
        datetime | None,
        msgspec.Meta(
            description="When the level ended (RFC 3339)", examples=["2026-12-01T10:01:02Z"]
        ),
    ]
    requests: Annotated[
        RequestCounts,
        msgspec.Meta(
            description="Measured requests and failures by class",
            examples=[{"total": 200, "succeeded": 200, "failed": 0, "errors": {}}],
        ),
    ]
    duration_s: Annotated[
        float | None,
        msgspec.Meta(
            description="The measured window, in seconds: last end minus first send of the "
            "measured requests",
            examples=[61.8],
        ),
    ]
    # usage, tokenizer or events (or mixed): where n_out came from (METRICS.md).
    count_source: Annotated[
        str | None,
        msgspec.Meta(
            description="Where output token counts came from: usage, tokenizer, events or mixed",
            examples=["usage"],
        ),
    ]
    # exact, approximate or mixed: whether prompts had exactly their drawn token count.
    prompt_lengths: Annotated[
        str | None,
        msgspec.Meta(
            description="exact, approximate or mixed: whether prompts had exactly their drawn "
            "token count",
            examples=["exact"],
        ),
    ]
    ttft_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Time to first token, in ms",
            examples=[{"count": 200, "p50": 208.0, "p95": 248.1}],
        ),
    ]
    # Time to first visible content (reasoning excluded); equals ttft_ms without reasoning.
    ttfo_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Time to first visible output (reasoning excluded), in ms; equals ttft_ms "
            "without reasoning",
            examples=[{"count": 200, "p50": 208.0}],
        ),
    ]
    tpot_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Time per output token after the first, per request, in ms",
            examples=[{"count": 200, "p50": 10.2}],
        ),
    ]
    itl_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Inter-token latency: gaps between streamed tokens, pooled, in ms",
            examples=[{"count": 25400, "p50": 10.0}],
        ),
    ]
    e2e_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="End-to-end latency per request, in ms",
            examples=[{"count": 200, "p50": 1510.0}],
        ),
    ]
    queue_delay_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Client-side delay between a request's scheduled and actual send, in ms",
            examples=[{"count": 200, "p99": 0.8}],
        ),
    ]
    per_user_tokens_per_s: Annotated[
        Distribution,
        msgspec.Meta(
            description="Output speed each user saw, per request, in tokens/s",
            examples=[{"count": 200, "p50": 98.0}],
        ),
    ]
    output_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Output tokens per second over the measured window, in tokens/s",
            examples=[1830.0],
        ),
    ]
    input_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Prompt tokens per second over the measured window, in tokens/s",
            examples=[7320.0],
        ),
    ]
    total_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Prompt and output tokens per second, in tokens/s", examples=[9150.0]
        ),
    ]
    requests_per_s: Annotated[
        float | None,
        msgspec.Meta(description="Successful requests per second, in requests/s", examples=[14.3]),
    ]
    mean_concurrency: Annotated[
        float | None,
        msgspec.Meta(
            description="Mean requests in flight (Little's law: sum of E2E / duration)",
            examples=[7.9],
        ),
    ]
    error_rate: Annotated[
        float | None,
        msgspec.Meta(description="Failed / all measured requests (0 to 1)", examples=[0.0]),
    ]
    goodput_rps: Annotated[
        float | None,
        msgspec.Meta(
            description="Requests meeting the SLO per second, in requests/s", examples=[14.1]
        ),
    ]
    slo_attainment: Annotated[
        float | None,
        msgspec.Meta(
            description="Share (0 to 1) of measured requests meeting the SLO; errors count as "
            "misses",
            examples=[0.985],
        ),
    ]
    slo_passed: Annotated[
        bool | None,
        msgspec.Meta(
            description="Whether every stated SLO statistic holds over the run; null without an "
            "SLO",
            examples=[True],
        ),
    ]
    client_bound: Annotated[
        bool | None,
        msgspec.Meta(
            description="True when the load generator, not the server, limited the run (queue "
            "delay p99 > 10 ms, or the load not held)",
            examples=[False],
        ),
    ]
    client: Annotated[
        ClientHealth | None,
        msgspec.Meta(
            description="The load generator's own health during the level", examples=[None]
        ),
    ]
    telemetry: Annotated[
        Telemetry,
        msgspec.Meta(
            description="Server and GPU figures scraped from the endpoint's metrics_urls",
            examples=[{}],
        ),
    ]
    cost: Annotated[
        Cost,
        msgspec.Meta(
            description="Price and cost per unit (USD)",
            examples=[{"usd_per_hour": 3.5, "per_million_output_tokens_usd": 0.53}],
        ),
    ]
    efficiency: Annotated[
        Efficiency | None,
        msgspec.Meta(
            description="Measured throughput against the hardware's roofline bounds",
            examples=[None],
        ),
    ] = None
    # Which tokenizer form built the level's prompts, or that none worked (then
    # prompt_lengths is approximate); null for dataset and session prompts.
    prompt_tokenizer: Annotated[
        PromptTokenizer | None,
        msgspec.Meta(
            description="How synthetic prompts were built to their lengths; null for dataset and "
            "session prompts",
            examples=[None],
        ),
    ] = None
    # The engine's own timings beside the client's; null where the engine reports none.
    server_timings: Annotated[
        ServerTimingsBlock | None,
        msgspec.Meta(
            description="The engine's own timings beside the client's; null where the engine "
            "reports none",
            examples=[None],
        ),
    ] = None
    # Prompt tokens served from the prefix cache; null where the server did not say.
    cache: Annotated[
        CacheBlock | None,
        msgspec.Meta(
            description="Prompt tokens served from the prefix cache; null where the server did not"
            " say",
            examples=[None],
        ),
    ] = None
    # Whether the evidence supports the figures; null for runs measured before adequacy.
    adequacy: Annotated[
        Adequacy | None,
        msgspec.Meta(
            description="Whether the evidence supports the figures; null for runs measured before "
            "adequacy",
            examples=[{"ok": True, "reasons": []}],
        ),
    ] = None
    # A level with load.max_concurrency: whether the cap was reached and how often requests
    # waited for a slot; null without a cap.
    concurrency_cap: Annotated[
        ConcurrencyCap | None,
        msgspec.Meta(
            description="Levels with load.max_concurrency: whether the cap was reached and how "
            "often requests waited for a slot; null without a cap",
            examples=[None],
        ),
    ] = None
    # Figures that do not exist for this kind of run, with why (embeddings: the streaming
    # figures and output throughput); null when every figure applies.
    not_measured: Annotated[
        dict[str, str] | None,
        msgspec.Meta(
            description="Figures that are null because this kind of run has none, each with "
            "the reason (an openai-embeddings endpoint: ttft_ms, ttfo_ms, tpot_ms, itl_ms, "
            "per_user_tokens_per_s, output_tokens_per_s); null when every figure applies",
            examples=[None],
        ),
    ] = None
    # Equal on runs that sent the same kind of requests (README, "Workload fingerprints").
    workload_fingerprint: Annotated[
        str | None,
        msgspec.Meta(
            description="Equal on runs that sent the same kind of requests",
            examples=["5f0c1e2d9a7b3c41"],
        ),
    ] = None
    # While the level runs: its figures so far (null once it ends).
    live: Annotated[
        LiveFigures | None,
        msgspec.Meta(
            description="While the level runs, its figures so far; null once it ends",
            examples=[None],
        ),
    ] = None
    # Against the previous comparable run (README, "History and regressions"): decided when
    # the job ends; null before that, for failed runs and runs measured before history.
    change: Annotated[
        Change | None,
        msgspec.Meta(
            description="Against the previous comparable run: decided when the job ends",
            examples=[None],
        ),
    ] = None
    # Only with ?definitions=: the figures under that tool's definitions.
    definitions: Annotated[
        Definitions | None,
        msgspec.Meta(
            description="Only with ?definitions=: the figures under that tool's definitions",
            examples=[None],
        ),
    ] = None
    # Why a failed level failed when its requests cannot say (its worker died mid-level,
    # its samples could not be stored); null otherwise.
    error: Annotated[
        str | None,
        msgspec.Meta(
            description="Why a failed level failed when its requests cannot say", examples=[None]
        ),
    ] = None


class SkippedLevel(msgspec.Struct):
    """A level left out of capacity (and estimates) as evidence: its run, level and mode, and
    why (adequacy reasons: inadequate, or client-bound)."""

    run_id: uuid.UUID
    level: float
    mode: str
    reasons: list[AdequacyReason]


class CapacityAtSlo(msgspec.Struct, omit_defaults=False):
    """The highest load that meets the job's SLO (METRICS.md, cost at SLO), from adequate,
    not client-bound levels only; `skipped` names the others and why.

    Interpolated between the last passing and the first failing level (`between`) when both
    were measured; `lower_bound` when every level passed (the true capacity is higher).
    The true capacity lies in [`requests_per_s_low`, `requests_per_s_high`]: the bracketing
    levels' requests/s (high null when no level failed). `reason` says why there is none.
    """

    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    level: float | None = None
    interpolated: bool | None = None
    between: list[float] | None = None
    lower_bound: bool | None = None
    client_bound: bool | None = None
    run_ids: list[uuid.UUID] = []
    usd_per_hour: float | None = None
    per_million_output_tokens_usd: float | None = None
    reason: str | None = None
    requests_per_s_low: float | None = None
    requests_per_s_high: float | None = None
    skipped: list[SkippedLevel] = []


class SweepLevel(msgspec.Struct):
    """One level a sweep chose: `kind` synchronous, throughput or rate; `mode` and `level`
    as its run has them (users for concurrency, requests/s for rate); `why` it was chosen.
    The figures the sweep decided on (requests/s, error rate, SLO verdict) and its run are
    null while it runs."""

    index: int
    kind: Literal["synchronous", "throughput", "rate"]
    mode: Literal["concurrency", "rate"]
    level: float
    why: str
    run_id: uuid.UUID | None = None
    requests_per_s: float | None = None
    error_rate: float | None = None
    slo_passed: bool | None = None
    # Whether the run's evidence was adequate, and the codes of why not (run adequacy);
    # a level too short or too thin is measured again once for `duration_s` seconds: that
    # try names the first in `lengthened_from`, the first names it in `superseded_by`.
    adequate: bool | None = None
    inadequate: list[str] = []
    duration_s: float | None = None
    lengthened_from: int | None = None
    superseded_by: int | None = None


class Sweep(msgspec.Struct):
    """What a sweep (load.mode "sweep") measured and why it stopped.

    `planned_levels` = 2 + load.rate_levels. `stopped` is null while it runs, then
    `completed` (every planned level, each adequate), `inadequate` (a level the client could
    not drive, or levels still too short or thin after one longer try), `slo_failed_twice`
    (two rate levels in a row failed the SLO), `error_rate` (a level's error rate above
    load.max_error_rate), `no_rate_range` (the throughput level served no more requests/s
    than the synchronous one), `cancelled` or `failed`; `detail` says it in a sentence.
    """

    planned_levels: int
    levels: list[SweepLevel]
    stopped: (
        Literal[
            "completed",
            "inadequate",
            "slo_failed_twice",
            "error_rate",
            "no_rate_range",
            "cancelled",
            "failed",
        ]
        | None
    ) = None
    detail: str | None = None


class JobListItem(msgspec.Struct):
    """A job in a listing: its load plan (mode, levels) but not its runs; read the job for
    them."""

    id: uuid.UUID
    endpoint_id: uuid.UUID
    status: str
    progress: Progress
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    load: dict[str, Any]


class JobRead(JobListItem):
    """A job, its configuration, its progress and its runs so far."""

    workload: dict[str, Any]
    slo: dict[str, Any] | None
    runs: list[RunSummary]
    capacity_at_slo: CapacityAtSlo | None = None
    # What its runs' workload_fingerprint is (README, "Workload fingerprints").
    workload_fingerprint: str | None = None
    # Sweeps only (load.mode "sweep"): the levels chosen and why it stopped.
    sweep: Sweep | None = None
    # Queued and running jobs only: place in the queue, expected start and end.
    queue: QueueEstimate | None = None


class Sample(msgspec.Struct):
    """One request's raw timings: t_sched and t_send in seconds from the run's start."""

    seq: int
    warmup: bool
    t_sched: float
    t_send: float
    ttfb_ms: float | None
    ttft_ms: float | None
    e2e_ms: float | None
    n_in: int | None
    n_out: int
    count_source: str
    status: int | None
    error_class: str | None
    error: str | None
    chunk_times_ms: list[float]
    # Time to the first visible content, reasoning excluded (= ttft_ms without reasoning).
    ttfo_ms: float | None = None
    # Tokens each content event carried, when the server said (continuous usage).
    chunk_tokens: list[int] | None = None
    # The drawn prompt length, and "exact" when the prompt had exactly that many tokens
    # (checked with the endpoint's tokenizer route) or "approximate".
    n_in_target: int | None = None
    prompt_length: str | None = None
    # Prompt tokens the server served from its prefix cache, when it said.
    cached_tokens: int | None = None
    # The engine's own timings of this request, where it reports them (llamacpp: its
    # `timings`; tgi: its headers): prefill time, time per output token, time queued,
    # output tokens, and prompt tokens it actually prefilled (cached ones excluded).
    server_source: str | None = None
    server_prefill_ms: float | None = None
    server_tpot_ms: float | None = None
    server_queue_ms: float | None = None
    server_n_out: int | None = None
    server_n_prefilled: int | None = None
    # How long it waited for a slot under load.max_concurrency (part of t_send - t_sched,
    # asked for by the plan); null without a cap.
    cap_wait_ms: float | None = None


class SamplePage(msgspec.Struct):
    """A page of samples; pass `next_after` as `after` for the next page (null at the end)."""

    items: list[Sample]
    next_after: int | None


#: Columns of the CSV export, in order (CONTRACT.md, Raw samples).
CSV_COLUMNS = (
    "seq",
    "warmup",
    "t_sched",
    "t_send",
    "ttfb_ms",
    "ttft_ms",
    "e2e_ms",
    "n_in",
    "n_out",
    "count_source",
    "status",
    "error_class",
    "ttfo_ms",
    "n_in_target",
    "prompt_length",
    "cached_tokens",
    "server_source",
    "server_prefill_ms",
    "server_tpot_ms",
    "server_queue_ms",
    "server_n_out",
    "server_n_prefilled",
    "cap_wait_ms",
)
