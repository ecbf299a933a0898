"""The run vocabulary: a run's summary and its blocks, a sweep's levels, raw samples and their
CSV columns. Jobs, estimates, comparisons, exports and reports read runs in these shapes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from api.domain.history.schemas import Change
from infercost.endpoints.pricing import PriceSource
from infercost.telemetry.summary import Telemetry


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
    short, client_bound, client_paused, rate_not_held, concurrency_not_held, errors,
    prompt_cache) and what it means and what to do."""

    code: Annotated[
        str,
        msgspec.Meta(
            description="few_requests, short, client_bound, client_paused, rate_not_held, "
            "concurrency_not_held, errors or prompt_cache; a level skipped as capacity "
            "evidence may also say burst (requests sent at once), concurrency_capped "
            "(requests waited for load.max_concurrency) or, for an estimate's served_model, "
            "per_model_intervals (a trace replay of several models)",
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


class ReasoningBlock(msgspec.Struct):
    """Reasoning and answer tokens apart (workload.features "reasoning", or a model that
    reasoned), over the measured, successful requests. Reasoning tokens are usage's
    completion_tokens_details.reasoning_tokens where the server counts them (`source`
    usage), else the events of reasoning text before the answer (`source` events); answer
    tokens are the rest of the output. The rates split output_tokens_per_s by the share."""

    requests_with_reasoning: Annotated[
        int, msgspec.Meta(description="Requests that sent any reasoning", examples=[200])
    ]
    reasoning_tokens: Annotated[
        Distribution,
        msgspec.Meta(description="Reasoning tokens per request", examples=[{"p50": 96.0}]),
    ]
    answer_tokens: Annotated[
        Distribution,
        msgspec.Meta(
            description="Answer tokens per request (content and tool calls)",
            examples=[{"p50": 32.0}],
        ),
    ]
    reasoning_share: Annotated[
        float | None,
        msgspec.Meta(description="Reasoning tokens / output tokens (0 to 1)", examples=[0.75]),
    ]
    reasoning_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="output_tokens_per_s x reasoning_share, in tokens/s", examples=[3000.0]
        ),
    ]
    answer_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="output_tokens_per_s - reasoning_tokens_per_s, in tokens/s",
            examples=[1000.0],
        ),
    ]
    source: Annotated[
        str | None,
        msgspec.Meta(
            description="Where reasoning counts came from: usage, events or mixed; null when no "
            "request reasoned",
            examples=["usage"],
        ),
    ]


class ModelCost(msgspec.Struct):
    """One model's part of the run's cost: the run's USD per hour split by the tokens (input
    and output) each model used in the measured window."""

    usd_per_hour: Annotated[
        float | None,
        msgspec.Meta(
            description="The run's usd_per_hour x this model's token_share", examples=[1.75]
        ),
    ]
    per_million_output_tokens_usd: Annotated[
        float | None,
        msgspec.Meta(
            description="usd_per_hour / (its output tokens/s x 3600) x 1e6", examples=[0.24]
        ),
    ]
    per_million_total_tokens_usd: Annotated[
        float | None,
        msgspec.Meta(
            description="usd_per_hour / (its input and output tokens/s x 3600) x 1e6",
            examples=[0.06],
        ),
    ]


class ModelFigures(msgspec.Struct):
    """One model's figures in a run spread over several (workload.models): its measured
    requests, latencies, and rates over the run's own window, so each count and rate of the
    models adds up to the run's."""

    model: Annotated[str, msgspec.Meta(description="The model name", examples=["lora-a"])]
    requests: Annotated[
        RequestCounts,
        msgspec.Meta(
            description="Its measured requests and failures by class",
            examples=[{"total": 50, "succeeded": 50, "failed": 0, "errors": {}}],
        ),
    ]
    ttft_ms: Annotated[
        Distribution, msgspec.Meta(description="Its time to first token, in ms", examples=[{}])
    ]
    tpot_ms: Annotated[
        Distribution, msgspec.Meta(description="Its time per output token, in ms", examples=[{}])
    ]
    e2e_ms: Annotated[
        Distribution, msgspec.Meta(description="Its end-to-end latency, in ms", examples=[{}])
    ]
    output_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Its output tokens in the run's window / duration", examples=[1.0]
        ),
    ]
    input_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Its prompt tokens in the run's window / duration", examples=[1.0]
        ),
    ]
    requests_per_s: Annotated[
        float | None,
        msgspec.Meta(description="Its successful requests / the run's duration", examples=[1.0]),
    ]
    error_rate: Annotated[
        float | None, msgspec.Meta(description="Its failed / measured requests", examples=[0.0])
    ]
    token_share: Annotated[
        float | None,
        msgspec.Meta(
            description="Its input and output tokens in the window / all of the run's (0 to 1)",
            examples=[0.5],
        ),
    ]
    cost: Annotated[
        ModelCost | None,
        msgspec.Meta(description="Its part of the run's cost", examples=[None]),
    ] = None


class ToolsBlock(msgspec.Struct):
    """Tool calls judged (workload.features tools), over the measured, successful requests: a
    call is valid when it names one of the request's tools and its arguments parse as JSON
    and match that tool's parameters schema."""

    requests: Annotated[int, msgspec.Meta(description="Answers judged", examples=[200])]
    calls: Annotated[int, msgspec.Meta(description="Tool calls they made", examples=[200])]
    valid_calls: Annotated[int, msgspec.Meta(description="Of those, valid", examples=[196])]
    valid_share: Annotated[
        float | None,
        msgspec.Meta(description="valid_calls / calls (0 to 1)", examples=[0.98]),
    ]
    requests_without_call: Annotated[
        int, msgspec.Meta(description="Answers with no tool call", examples=[0])
    ]
    invalid: Annotated[
        dict[str, int],
        msgspec.Meta(
            description="Invalid calls by reason: cut_short, not_json, schema, unknown_tool",
            examples=[{"not_json": 4}],
        ),
    ]


class PlainRatios(msgspec.Struct):
    """This structured run's figure / its plain twin's (docs/figures.md, "Structured output
    against plain"): above 1, guided decoding made latency longer (or, for tokens/s, output
    faster); null where either figure is unknown or the plain one is 0."""

    ttft_p50: Annotated[
        float | None, msgspec.Meta(description="TTFT p50, structured / plain", examples=[1.05])
    ]
    tpot_p50: Annotated[
        float | None, msgspec.Meta(description="TPOT p50, structured / plain", examples=[1.3])
    ]
    e2e_p50: Annotated[
        float | None, msgspec.Meta(description="E2E p50, structured / plain", examples=[1.28])
    ]
    output_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(description="Output tokens/s, structured / plain", examples=[0.78]),
    ]


class PlainTwin(msgspec.Struct):
    """The plain twin of a structured run: the newest succeeded, not client-bound run on the
    same endpoint, mode and level whose workload fingerprint is this run's workload without
    the structured feature; its own figures, as its summary shows them, and the ratios."""

    run_id: Annotated[uuid.UUID, msgspec.Meta(description="The plain run")]
    job_id: Annotated[uuid.UUID, msgspec.Meta(description="Its job")]
    finished_at: Annotated[datetime, msgspec.Meta(description="When it finished")]
    ttft_p50_ms: Annotated[float | None, msgspec.Meta(examples=[48.0])]
    ttft_p95_ms: Annotated[float | None, msgspec.Meta(examples=[61.0])]
    tpot_p50_ms: Annotated[float | None, msgspec.Meta(examples=[8.1])]
    tpot_p95_ms: Annotated[float | None, msgspec.Meta(examples=[8.6])]
    e2e_p50_ms: Annotated[float | None, msgspec.Meta(examples=[430.0])]
    e2e_p95_ms: Annotated[float | None, msgspec.Meta(examples=[470.0])]
    output_tokens_per_s: Annotated[float | None, msgspec.Meta(examples=[410.0])]
    ratios: Annotated[PlainRatios, msgspec.Meta(description="This run's figure / the plain run's")]


class StructuredBlock(msgspec.Struct):
    """Structured answers judged (workload.features structured): valid when the answer parses
    as JSON and matches the schema its request asked for in response_format; and the same
    lengths measured without it (`plain`), so what guided decoding costs shows."""

    answers: Annotated[int, msgspec.Meta(description="Answers judged", examples=[200])]
    valid: Annotated[int, msgspec.Meta(description="Of those, valid", examples=[200])]
    valid_share: Annotated[
        float | None, msgspec.Meta(description="valid / answers (0 to 1)", examples=[1.0])
    ]
    invalid: Annotated[
        dict[str, int],
        msgspec.Meta(
            description="Invalid answers by reason: cut_short, not_json, schema", examples=[{}]
        ),
    ]
    plain: Annotated[
        PlainTwin | None,
        msgspec.Meta(
            description="The plain twin: the newest succeeded, not client-bound run on the same "
            "endpoint, mode and level of this workload without structured; its figures and "
            "the ratios structured / plain. Null: none measured yet (plain_reason says what "
            "to run)",
            examples=[None],
        ),
    ] = None
    plain_reason: Annotated[
        str | None,
        msgspec.Meta(
            description="Why plain is null, and the job to run to fill it",
            examples=[None],
        ),
    ] = None


class ImageBlock(msgspec.Struct):
    """Requests with images (workload.features image), over the measured, successful ones:
    images sent, their prompt tokens where usage reported them, and TTFT (which holds the
    images' prefill)."""

    requests: Annotated[int, msgspec.Meta(description="Requests with images", examples=[200])]
    images: Annotated[int, msgspec.Meta(description="Images they carried", examples=[200])]
    requests_reporting_tokens: Annotated[
        int,
        msgspec.Meta(
            description="Of those, requests whose usage reported image tokens", examples=[200]
        ),
    ]
    image_tokens: Annotated[
        Distribution,
        msgspec.Meta(description="Image tokens per request, where reported", examples=[{}]),
    ]
    image_token_share: Annotated[
        float | None,
        msgspec.Meta(
            description="Image tokens / prompt tokens of the requests that reported them",
            examples=[0.8],
        ),
    ]
    ttft_ms: Annotated[
        Distribution,
        msgspec.Meta(description="TTFT of the requests with images, in ms", examples=[{}]),
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
    per_million_answer_tokens_usd: Annotated[
        float | None,
        msgspec.Meta(
            description="USD per million answer tokens (reasoning excluded): usd_per_hour / "
            "(answer tokens/s x 3600) x 1e6; null unless the run counted reasoning apart",
            examples=[None],
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
    # Its process's reading health (the run's client block has the worst of any shard's).
    loop_lag_p99_ms: Annotated[
        float | None,
        msgspec.Meta(description="99th percentile of its event-loop lag, in ms", examples=[0.6]),
    ] = None
    loop_stall_max_ms: Annotated[
        float | None,
        msgspec.Meta(description="The longest its loop stood still, in ms", examples=[4.0]),
    ] = None
    paused_ms: Annotated[
        float | None,
        msgspec.Meta(description="Time its loop stood still, in ms", examples=[12.0]),
    ] = None
    pause_exposure: Annotated[
        float | None,
        msgspec.Meta(
            description="Share of its events whose stamps could be over pause_bound_ms late",
            examples=[0.0004],
        ),
    ] = None


class Sharding(msgspec.Struct):
    """How many worker processes a level took under `load.shards: "auto"`, and why: its
    expected events per second against one process's budget (CPU_SHARE_LIMIT of a core over
    the CPU it spends per event, measured on its earlier levels or assumed), up to the worker
    processes free (infercost/shards/auto.py). Decided before the level ran."""

    shards: Annotated[int, msgspec.Meta(description="Processes it ran on", examples=[2])]
    needed: Annotated[
        int, msgspec.Meta(description="Processes its expected events needed", examples=[2])
    ]
    reason: Annotated[
        str,
        msgspec.Meta(
            description="Why, in a sentence",
            examples=["51,200 expected events/s need 2 processes (50,000 events/s per process)"],
        ),
    ]
    expected_events_per_s: Annotated[
        float,
        msgspec.Meta(description="Events per second it was expected to bring", examples=[51200.0]),
    ]
    expected_from: Annotated[
        str,
        msgspec.Meta(
            description="How that was reckoned",
            examples=["200 requests/s x 256 output tokens (the plan's)"],
        ),
    ]
    budget_events_per_s: Annotated[
        float,
        msgspec.Meta(description="Events per second one process may read", examples=[50000.0]),
    ]
    cpu_us_per_event: Annotated[
        float,
        msgspec.Meta(
            description="CPU per received event the budget rests on, in us", examples=[10.0]
        ),
    ]
    cpu_measured: Annotated[
        bool,
        msgspec.Meta(
            description="Whether that CPU figure was measured on this worker's earlier levels "
            "(false: assumed)",
            examples=[True],
        ),
    ]
    cpu_share_limit: Annotated[
        float,
        msgspec.Meta(description="The share of one core a process may spend", examples=[0.5]),
    ]
    workers_free: Annotated[
        int | None,
        msgspec.Meta(
            description="Worker processes free to take a shard, this one included (null: not "
            "asked, one was enough)",
            examples=[2],
        ),
    ]
    client_bound: Annotated[
        bool,
        msgspec.Meta(
            description="It needed more processes than it got: client-bound before it ran",
            examples=[False],
        ),
    ]


class GcPauses(msgspec.Struct):
    """The garbage collector's passes in the load generator's process over the level, each
    timed by the collector's own callbacks, by generation (0, 1, 2)."""

    collections: Annotated[
        list[int],
        msgspec.Meta(description="Passes of generations 0, 1 and 2", examples=[[412, 37, 2]]),
    ]
    paused_ms: Annotated[
        list[float],
        msgspec.Meta(
            description="Time those passes held the process, by generation, in ms",
            examples=[[20.5, 6.1, 9.8]],
        ),
    ]
    max_ms: Annotated[
        float, msgspec.Meta(description="The longest single pass, in ms", examples=[5.2])
    ]


class ClientHealth(msgspec.Struct):
    """Whether the load generator, not the server, set the pace.

    `concurrency_held` applies to concurrency levels; `send_rate` (measured sends per second)
    and `rate_held` to rate levels (docs/figures.md, client health). Null where they do not apply.
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
    # requests re-sent after a kept-alive connection turned out closed. A sharded level's are
    # the worst of any shard's (re-sends and collections summed); null for runs stored before
    # these were measured.
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
    # Pauses measured from inside the process (workers/loadgen/health.py): the loop's own
    # ticks, the collector's passes, and how much of the level they could have spoilt.
    loop_stall_p99_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="99th percentile of how late the event loop's own tick ran (every 2 "
            "ms): what held the loop, a garbage collection included, in ms",
            examples=[1.1],
        ),
    ] = None
    loop_stall_max_ms: Annotated[
        float | None,
        msgspec.Meta(description="The longest the loop stood still, in ms", examples=[4.0]),
    ] = None
    paused_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="Time the loop stood still over the level (ticks over 2 ms late, "
            "summed), in ms",
            examples=[12.0],
        ),
    ] = None
    gc: Annotated[
        GcPauses | None,
        msgspec.Meta(description="The garbage collector's passes over the level", examples=[None]),
    ] = None
    pause_bound_ms: Annotated[
        float | None,
        msgspec.Meta(
            description="How late a stamp may be before a pause spoils it, in ms", examples=[5.0]
        ),
    ] = None
    pause_exposure: Annotated[
        float | None,
        msgspec.Meta(
            description="Share (0 to 1) of the level's events stamped during or just after a "
            "pause of the loop or the collector longer than pause_bound_ms, so they could be "
            "more than that late; over pause_exposure_limit the level is client-bound "
            "(client_paused)",
            examples=[0.0004],
        ),
    ] = None
    pause_exposure_limit: Annotated[
        float | None,
        msgspec.Meta(
            description="The pause_exposure above which this level counts as client-bound: "
            "0.01 unless the worker's INFERCOST_PAUSE_EXPOSURE_LIMIT said otherwise",
            examples=[0.01],
        ),
    ] = None
    sharding: Annotated[
        Sharding | None,
        msgspec.Meta(
            description='Under load.shards "auto": how many processes the level took and why',
            examples=[None],
        ),
    ] = None
    capacity_short: Annotated[
        str | None,
        msgspec.Meta(
            description="Why the level got fewer load-generating processes than it needed "
            "(decided before it ran; it is client-bound)",
            examples=[None],
        ),
    ] = None
    # Figures the client's own lateness spoils: requests_per_s and output_tokens_per_s when
    # it sent late, ttft_ms, itl_ms, tpot_ms and e2e_ms when it read late or paused.
    spoils: Annotated[
        list[str] | None,
        msgspec.Meta(
            description="Figures the client's own lateness spoils (rates when it sent late, "
            "latencies when it read late)",
            examples=[[]],
        ),
    ] = None


class SendLateness(msgspec.Struct):
    """How late the client sent a replay's requests against the trace's schedule, in ms
    (t_send - t_sched, less any wait for a load.max_concurrency slot)."""

    p50: float | None
    p99: float | None
    max: float | None


class ReplayWindow(msgspec.Struct):
    """The part of the trace replayed, in its own seconds after its first request."""

    start_s: float
    duration_s: float


class ReplayInterval(msgspec.Struct):
    """One interval of trace time (load.interval_s) of a replay: the requests due in it, what
    it achieved over its wall-clock length (interval_s / time_scale) and its SLO
    attainment. `requests_per_s` (successful requests / that length) is the load point
    capacity and estimates take it as; `stats` holds the distributions an SLO may limit."""

    start_s: float
    requests: int
    succeeded: int
    offered_requests_per_s: float | None
    requests_per_s: float | None
    output_tokens_per_s: float | None
    error_rate: float | None
    slo_attainment: float | None
    goodput_rps: float | None
    slo_passed: bool | None
    stats: dict[str, Distribution]


class Replay(msgspec.Struct):
    """A trace replay's own figures (load.mode "trace"): the window and speed, replay
    fidelity (send lateness against the trace's schedule), what time_scale compressed, and
    the SLO attained per interval of trace time."""

    traffic_requests: Annotated[
        int, msgspec.Meta(description="Requests of the trace in the window", examples=[1200])
    ]
    sent: Annotated[int, msgspec.Meta(description="Requests sent", examples=[1200])]
    time_scale: Annotated[
        float, msgspec.Meta(description="How much faster than recorded", examples=[10.0])
    ]
    window: ReplayWindow
    wall_duration_s: Annotated[
        float,
        msgspec.Meta(description="The window's length at time_scale, in seconds", examples=[60.0]),
    ]
    compressed: Annotated[
        str,
        msgspec.Meta(
            description="What time_scale compressed, in words",
            examples=["600 s of the trace sent in 60 s (10x faster than recorded)"],
        ),
    ]
    send_lateness_ms: SendLateness
    interval_s: Annotated[
        float, msgspec.Meta(description="Trace seconds per interval", examples=[60.0])
    ]
    intervals: list[ReplayInterval]


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
    """A run against the roofline bounds of its hardware and model (docs/figures.md, Physical
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
    sharding: Annotated[
        Sharding | None,
        msgspec.Meta(
            description='Under load.shards "auto": the processes it takes and why, from its start',
            examples=[None],
        ),
    ] = None


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


class RunSource(msgspec.Struct):
    """Who measured an imported run (POST /v1/imports) and whose definitions its figures
    follow; null on infercost's own runs. An imported TPOT is the tool's TPOT
    (`metric_names` gives the tool's name of each figure, `differences` how it differs from
    infercost's definition), so comparisons label such runs and never mix them silently."""

    tool: Annotated[
        str,
        msgspec.Meta(description="The tool whose file it came from: vllm, guidellm or aiperf"),
    ]
    tool_version: Annotated[
        str | None, msgspec.Meta(description="The tool's version, where the file says")
    ]
    file: Annotated[str, msgspec.Meta(description="The kind of file it was read from")]
    label: Annotated[
        str | None, msgspec.Meta(description="The benchmark's own label in the file, if any")
    ]
    definitions: Annotated[
        str,
        msgspec.Meta(
            description="Whose definitions the figures follow (the tool's); infercost's own "
            "runs follow infercost's (docs/figures.md)",
            examples=["guidellm"],
        ),
    ]
    metric_names: Annotated[
        dict[str, str],
        msgspec.Meta(description="infercost's name of each figure -> the tool's own name"),
    ]
    differences: Annotated[
        list[str], msgspec.Meta(description="How the tool's definitions differ, a sentence each")
    ]
    sources: Annotated[list[str], msgspec.Meta(description="Where the definitions were read")]
    hardware_in_file: Annotated[
        str | None,
        msgspec.Meta(description="The hardware the file names, as written there (not matched)"),
    ] = None
    per_request: Annotated[
        bool,
        msgspec.Meta(
            description="Whether the file had per-request records (stored as raw samples)"
        ),
    ] = False


class RunSummary(msgspec.Struct):
    """One load level's figures over its measured window (docs/figures.md)."""

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
            description="The load level: users (concurrency), requests/s (rate), requests "
            "sent at once (burst), or the mean requests/s a replay's schedule asks for (trace)",
            examples=[8.0],
        ),
    ]
    mode: Annotated[
        str,
        msgspec.Meta(description="concurrency, rate, burst or trace", examples=["concurrency"]),
    ]
    status: Annotated[
        str,
        msgspec.Meta(
            description="running, succeeded, failed, cancelled, or interrupted (its worker "
            "died mid-level and another run measured the level again: not evidence)",
            examples=["succeeded"],
        ),
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
    # usage, tokenizer or events (or mixed): where n_out came from (docs/figures.md).
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
    ttfr_ms: Annotated[
        Distribution,
        msgspec.Meta(
            description="Time to first reasoning token, in ms, over requests that reasoned "
            "(count 0 when none did)",
            examples=[{"count": 200, "p50": 180.0}],
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
    replay: Annotated[
        Replay | None,
        msgspec.Meta(
            description="A trace replay's run: replay fidelity, what time_scale compressed and "
            "the SLO attained per interval of trace time; null for other runs",
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
    reasoning: Annotated[
        ReasoningBlock | None,
        msgspec.Meta(
            description="Reasoning and answer tokens apart; null unless workload.features has "
            "reasoning or a request reasoned",
            examples=[None],
        ),
    ] = None
    reasoning_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(description="Reasoning tokens per second (see reasoning)", examples=[None]),
    ] = None
    answer_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(description="Answer tokens per second (see reasoning)", examples=[None]),
    ] = None
    models: Annotated[
        list[ModelFigures] | None,
        msgspec.Meta(
            description="Several models on one endpoint (workload.models): each model's figures "
            "and part of the cost; null when every request asked for the endpoint's model",
            examples=[None],
        ),
    ] = None
    tools: Annotated[
        ToolsBlock | None,
        msgspec.Meta(
            description="Tool calls judged valid or not; null unless workload.features has tools",
            examples=[None],
        ),
    ] = None
    tool_calls_valid_share: Annotated[
        float | None,
        msgspec.Meta(description="tools.valid_share, as a column", examples=[None]),
    ] = None
    structured: Annotated[
        StructuredBlock | None,
        msgspec.Meta(
            description="Structured answers judged valid or not; null unless workload.features "
            "has structured",
            examples=[None],
        ),
    ] = None
    structured_valid_share: Annotated[
        float | None,
        msgspec.Meta(description="structured.valid_share, as a column", examples=[None]),
    ] = None
    image: Annotated[
        ImageBlock | None,
        msgspec.Meta(
            description="Requests with images: images, image tokens, TTFT; null unless "
            "workload.features has image",
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
            description="Why a failed level failed when its requests cannot say, and why an "
            "interrupted one was interrupted",
            examples=[None],
        ),
    ] = None
    # A level whose worker died mid-level is measured again once (docs/operations.md, "What
    # survives a failure"): the new run names the interrupted one.
    replaces_run_id: Annotated[
        uuid.UUID | None,
        msgspec.Meta(
            description="The run of this level that its worker's death interrupted and this "
            "run measured again (its status is interrupted; it is never used as evidence); "
            "null when the level was measured once",
            examples=[None],
        ),
    ] = None
    # Imported runs only (POST /v1/imports): the tool that measured it and whose definitions
    # its figures follow; null for infercost's own runs.
    source: Annotated[
        RunSource | None,
        msgspec.Meta(
            description="Imported runs only: the tool that measured it and whose definitions "
            "its figures follow; null for infercost's own",
            examples=[None],
        ),
    ] = None
    # Retention (INFERCOST_SAMPLE_RETENTION_DAYS): when the raw samples were deleted; the
    # figures above stay, reads of the samples say so.
    samples_pruned_at: Annotated[
        datetime | None,
        msgspec.Meta(
            description="When retention deleted this run's raw request and telemetry samples "
            "(its figures stay); null while they are kept",
            examples=[None],
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
    """The highest load that meets the job's SLO (docs/figures.md, cost at SLO), from adequate,
    not client-bound levels only; `skipped` names the others and why.

    Interpolated between the last passing and the first failing level (`between`) when both
    were measured; `lower_bound` when every level passed (the true capacity is higher).
    The true capacity lies in [`requests_per_s_low`, `requests_per_s_high`]: the bracketing
    levels' requests/s (high null when no level failed). `reason` says why there is none.
    `monotone` false: a level at a higher load served fewer requests/s than a lower one (an
    overloaded engine does this; `falls_with_load` names those runs): the capacity is then
    the best passing level, never a point interpolated below it.
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
    monotone: bool | None = None
    falls_with_load: list[uuid.UUID] = []


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
    # Reasoning tokens of the answer (usage's, else its reasoning events) and the time to its
    # first reasoning event; null when it showed no reasoning.
    n_reasoning: int | None = None
    ttfr_ms: float | None = None
    reasoning_source: str | None = None
    # The model it asked for (workload.models); null: the endpoint's.
    model: str | None = None
    # Tool calls made and valid, whether the structured answer was valid, and why not.
    tool_calls: int | None = None
    tool_calls_valid: int | None = None
    structured_valid: bool | None = None
    invalid_reasons: list[str] | None = None
    # Images it carried and their prompt tokens, where usage said.
    images: int | None = None
    image_tokens: int | None = None


class SamplePage(msgspec.Struct):
    """A page of samples; pass `next_after` as `after` for the next page (null at the end).
    A run whose samples retention deleted has none: `samples_pruned_at` and `note` say so."""

    items: list[Sample]
    next_after: int | None
    samples_pruned_at: datetime | None = None
    note: str | None = None


#: Sample fields the CSV export leaves out: the error's own text, and the per-event lists
#: (JSON pages carry them).
CSV_LEFT_OUT = frozenset({"error", "chunk_times_ms", "chunk_tokens", "invalid_reasons"})
#: Columns of the CSV export, in order (docs/jobs.md, samples): the sample's fields.
CSV_COLUMNS: tuple[str, ...] = tuple(
    name for name in Sample.__struct_fields__ if name not in CSV_LEFT_OUT
)
