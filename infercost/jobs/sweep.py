"""Sweeps (`load.mode` "sweep"): which levels to measure and when to stop, as pure functions.

A sweep measures one synchronous level (one user, closed loop), one throughput level
(closed loop at `load.max_concurrency`), then `load.rate_levels` request rates evenly
spaced strictly between the two levels' measured requests/s (open loop, the job's
`arrival`). It stops early when the SLO fails at two consecutive rate levels, or when a
level's error rate is above `load.max_error_rate`. The worker drives the levels
(workers/runner/sweep.py); everything it decides is decided here, so it can be tested alone.

Levels last `load.duration_s` (infercost.jobs.plan.DEFAULT_SWEEP_DURATION_S unless the plan
gives a duration or a request count): a count that lasts one second at high load supports no
percentile. A level whose adequacy verdict (infercost.figures.metrics.adequacy_block) says it
was too short or had too few requests is measured again once, longer (lengthened_duration);
two rate levels in a row that the client could not drive (client-bound, rate or concurrency
not held) stop the sweep as `inadequate`, since higher rates would be worse; and a sweep with
any level still inadequate at its end stops as `inadequate`, never `completed`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infercost.figures.metrics import (
    ADEQUATE_MIN_DURATION_S,
    ADEQUATE_MIN_REQUESTS,
    ADEQUATE_MIN_TELEMETRY_INTERVALS,
)

SweepKind = Literal["synchronous", "throughput", "rate"]
StopReason = Literal[
    "completed",
    "slo_failed_twice",
    "error_rate",
    "no_rate_range",
    "inadequate",
    "cancelled",
    "failed",
]

#: Levels one job may measure (as for a plan that lists its levels).
MAX_LEVELS = 64
#: Adequacy reasons that a longer level cures ...
LENGTHENABLE = frozenset({"few_requests", "short"})
#: ... and those that mean the client, not the server, set the pace: a longer or higher level
#: only repeats them, so the sweep stops.
CLIENT_SIDE = frozenset({"client_bound", "rate_not_held", "concurrency_not_held"})
#: A lengthened level lasts at most this many times the first try (and at most
#: MAX_LENGTHENED_S): a sweep never silently turns into a far longer job than was asked for.
MAX_LENGTHEN_FACTOR = 4.0
MAX_LENGTHENED_S = 600.0
#: Headroom over the bare minimum, so a level a little slower on its second try still
#: clears the bar.
LENGTHEN_MARGIN = 1.25


def sweep_rates(sync_rps: float, throughput_rps: float, count: int) -> list[float]:
    """`count` request rates evenly spaced strictly between the synchronous and the
    throughput level's requests/s: sync + i x (throughput - sync) / (count + 1) for
    i = 1..count. Empty when the throughput level served no more than the synchronous one
    (then there is no range to measure)."""
    if count < 1 or not throughput_rps > sync_rps or not sync_rps >= 0:
        return []
    step = (throughput_rps - sync_rps) / (count + 1)
    rates = [sync_rps + i * step for i in range(1, count + 1)]
    # Floating point never puts a rate on (or past) an end, however close the two are.
    return [r for r in rates if sync_rps < r < throughput_rps]


@dataclass(frozen=True, slots=True)
class LevelOutcome:
    """What a sweep needs to know of one measured level.

    index: its position in the job; kind: synchronous, throughput or rate; level: users
    (concurrency) or requests/s (rate); error_rate: failed / measured requests (None when
    none were measured); slo_passed: the run's SLO verdict (None without an SLO);
    inadequate: the codes of its adequacy reasons (empty when adequate or unknown).
    """

    index: int
    kind: SweepKind
    level: float
    error_rate: float | None
    slo_passed: bool | None
    inadequate: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Stop:
    """Why a sweep stopped, as a reason code and a sentence for a person."""

    reason: StopReason
    detail: str


def describe(outcome: LevelOutcome) -> str:
    """'level 3 (rate 4.2 requests/s)' or 'level 1 (throughput, 64 users)'."""
    if outcome.kind == "rate":
        return f"level {outcome.index} (rate {outcome.level:.3g} requests/s)"
    users = "1 user" if outcome.level == 1 else f"{outcome.level:g} users"
    return f"level {outcome.index} ({outcome.kind}, {users})"


def stop_after(outcomes: Sequence[LevelOutcome], max_error_rate: float) -> Stop | None:
    """Whether a sweep stops after the last of `outcomes` (the levels measured so far, in
    order); None to go on.

    `error_rate` when the last level's error rate is above max_error_rate (any level: at
    the throughput level it says the endpoint sheds load before it saturates);
    `slo_failed_twice` when the last two levels are rate levels that both failed the SLO
    (the synchronous and throughput levels never count: the throughput level is expected
    to fail it). Without an SLO no level fails it.
    """
    if not outcomes:
        return None
    last = outcomes[-1]
    if last.error_rate is not None and last.error_rate > max_error_rate:
        return Stop(
            "error_rate",
            f"{describe(last)}: {last.error_rate:.1%} of requests failed, above "
            f"load.max_error_rate {max_error_rate:g}, so the sweep stopped there",
        )
    if len(outcomes) >= 2:
        before = outcomes[-2]
        if (
            before.kind == "rate"
            and last.kind == "rate"
            and before.slo_passed is False
            and last.slo_passed is False
        ):
            return Stop(
                "slo_failed_twice",
                f"the SLO failed at two rate levels in a row ({before.level:.3g} and "
                f"{last.level:.3g} requests/s), so higher rates were not measured",
            )
    return None


def level_why(
    kind: SweepKind,
    *,
    users: int = 1,
    position: int = 0,
    count: int = 0,
    sync_rps: float = 0.0,
    throughput_rps: float = 0.0,
) -> str:
    """The sentence a sweep's level carries to say why it was measured."""
    if kind == "synchronous":
        return (
            "one request at a time (closed loop, 1 user): the latency floor and the lowest "
            "request rate"
        )
    if kind == "throughput":
        return (
            f"closed loop at load.max_concurrency ({users} users): the most requests/s the "
            "endpoint serves"
        )
    return (
        f"rate {position} of {count}: {position}/{count + 1} of the way from the synchronous "
        f"level's {sync_rps:.3g} to the throughput level's {throughput_rps:.3g} requests/s"
    )


def no_range_detail(sync_rps: float, throughput_rps: float) -> str:
    """The detail of a sweep with no rate between its two closed-loop levels."""
    return (
        f"the throughput level served {throughput_rps:.3g} requests/s, no more than the "
        f"synchronous level's {sync_rps:.3g}, so there was no request rate between them to "
        "measure; the endpoint does not gain from concurrency"
    )


def adequacy_codes(adequacy: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The reason codes of a run's adequacy block; empty when adequate or unknown."""
    if not adequacy or adequacy.get("ok", True):
        return ()
    return tuple(str(r["code"]) for r in adequacy.get("reasons") or ())


def minimum_window_s(telemetry_interval_s: float | None) -> float:
    """The shortest measured window an adequate level may have (as adequacy_block asks)."""
    if not telemetry_interval_s:
        return ADEQUATE_MIN_DURATION_S
    return max(ADEQUATE_MIN_DURATION_S, ADEQUATE_MIN_TELEMETRY_INTERVALS * telemetry_interval_s)


def lengthened_duration(
    codes: Sequence[str],
    *,
    window_s: float | None,
    succeeded: int,
    planned_s: float | None,
    telemetry_interval_s: float | None = None,
) -> float | None:
    """Seconds to measure a level again for, or None when lengthening would not help.

    Only a level that was inadequate for being short or thin (LENGTHENABLE) and not for a
    client-side reason is lengthened. The new duration is what both bars need with
    LENGTHEN_MARGIN (ADEQUATE_MIN_REQUESTS at the requests/s it served, the minimum window),
    at least twice the first try's length (`planned_s`, else its measured window), and at
    most MAX_LENGTHEN_FACTOR times it and MAX_LENGTHENED_S.
    """
    if not codes or not LENGTHENABLE.intersection(codes) or CLIENT_SIDE.intersection(codes):
        return None
    if window_s is None or window_s <= 0 or succeeded <= 0:
        return None
    base = planned_s if planned_s else window_s
    need = minimum_window_s(telemetry_interval_s)
    need = max(need, ADEQUATE_MIN_REQUESTS * window_s / succeeded)
    seconds = max(need * LENGTHEN_MARGIN, 2.0 * base)
    return min(seconds, MAX_LENGTHEN_FACTOR * base, MAX_LENGTHENED_S)


def client_side_stop(outcomes: Sequence[LevelOutcome]) -> Stop | None:
    """Stop `inadequate` when the last two levels are rate levels the client could not drive
    (CLIENT_SIDE reasons): their requests/s measured the load generator, and higher rates
    would only be worse. One such level alone does not stop it (a loaded moment)."""
    if len(outcomes) < 2:
        return None
    before, last = outcomes[-2], outcomes[-1]
    bound = [
        o for o in (before, last) if o.kind == "rate" and CLIENT_SIDE.intersection(o.inadequate)
    ]
    if len(bound) < 2:
        return None
    codes = sorted({c for o in bound for c in o.inadequate if c in CLIENT_SIDE})
    return Stop(
        "inadequate",
        f"{describe(before)} and {describe(last)} were inadequate ({', '.join(codes)}): the "
        "load generator, not the endpoint, set their pace, so higher rates would measure the "
        "client; use load.shards, or fewer rate levels",
    )


def final_stop(outcomes: Sequence[LevelOutcome]) -> Stop:
    """How a sweep that measured every planned level ends: `completed` when every level was
    adequate, else `inadequate`, naming the levels and their reasons."""
    thin = [o for o in outcomes if o.inadequate]
    if not thin:
        return Stop(
            "completed",
            f"all {len(outcomes)} levels were measured and adequate: no early stop applied",
        )
    named = "; ".join(f"{describe(o)}: {', '.join(o.inadequate)}" for o in thin)
    return Stop(
        "inadequate",
        f"all levels were measured, but {len(thin)} of {len(outcomes)} stayed inadequate after "
        f"one longer try ({named}); give a longer load.duration_s",
    )


def inadequate_note(outcomes: Sequence[LevelOutcome]) -> str:
    """A sentence to append to an early stop's detail when levels were inadequate ('' if
    none were)."""
    thin = [describe(o) for o in outcomes if o.inadequate]
    if not thin:
        return ""
    return f"; inadequate evidence at {', '.join(thin)}"
