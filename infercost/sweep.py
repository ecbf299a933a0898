"""Sweeps (`load.mode` "sweep"): which levels to measure and when to stop, as pure functions.

A sweep measures one synchronous level (one user, closed loop), one throughput level
(closed loop at `load.max_concurrency`), then `load.rate_levels` request rates evenly
spaced strictly between the two levels' measured requests/s (open loop, the job's
`arrival`). It stops early when the SLO fails at two consecutive rate levels, or when a
level's error rate is above `load.max_error_rate`. The worker drives the levels
(workers/sweep.py); everything it decides is decided here, so it can be tested alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infercost.arrivals import planned_requests

SweepKind = Literal["synchronous", "throughput", "rate"]
StopReason = Literal[
    "completed", "slo_failed_twice", "error_rate", "no_rate_range", "cancelled", "failed"
]

#: Rate levels between the synchronous and the throughput level when a plan does not say.
DEFAULT_RATE_LEVELS = 5
#: Users of the throughput level when a plan does not say (capped by the server's limit).
DEFAULT_MAX_CONCURRENCY = 64
#: A level whose error rate is above this stops the sweep, when a plan does not say.
DEFAULT_MAX_ERROR_RATE = 0.05
#: Levels one job may measure (as for a plan that lists its levels).
MAX_LEVELS = 64


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


def sweep_planned_requests(load: Mapping[str, Any]) -> int:
    """Requests a stored sweep plan is expected to send before it starts, warm-up included:
    2 + rate_levels levels of requests_per_level each; 0 for levels of fixed duration,
    whose counts are known only once their rates are chosen (or, at concurrency, once they
    end)."""
    per_level = planned_requests({**load, "mode": "concurrency"}, 1)
    return (2 + int(load["rate_levels"])) * per_level


@dataclass(frozen=True, slots=True)
class LevelOutcome:
    """What a sweep needs to know of one measured level.

    index: its position in the job; kind: synchronous, throughput or rate; level: users
    (concurrency) or requests/s (rate); error_rate: failed / measured requests (None when
    none were measured); slo_passed: the run's SLO verdict (None without an SLO).
    """

    index: int
    kind: SweepKind
    level: float
    error_rate: float | None
    slo_passed: bool | None


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
