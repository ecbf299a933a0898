"""How many worker processes a level takes with `load.shards: "auto"`, and why.

One process reads a level's events on one event loop. Past a share of one core its loop
queues reads and the stamps it takes grow late (bench/loadgen.py, bench/wire_ttft.py), so a
level is split until each process's share of its expected events stays within a budget:

- the budget of a process: CPU_SHARE_LIMIT of one core, over the CPU it spends per event
  received (`Budget`): measured from this worker process's own earlier levels of requests
  about as long (CPU seconds over content events, request overheads included, so only
  levels whose requests carried within a factor of 2 as many events count:
  workers/loadgen/health.py ReadCost), else DEFAULT_CPU_US_PER_EVENT;
- the level's expected events per second (`expected_events`): a rate level's requests/s
  times its requests' output tokens; a concurrency (or burst) level's users times one
  stream's event rate, measured on the job's previous level (output tokens/s over its mean
  concurrency), else assumed to be DEFAULT_STREAM_EVENTS_PER_S;
- shards needed = ceil(expected / budget), then at most the worker processes free to take
  one (this one included), MAX_SHARDS and, for concurrency, the level's users. A level
  whose needs are not met is flagged client-bound before it starts (`Decision.client_bound`).

What must stay in one process is never split: multi-turn sessions (a conversation's next
turn waits for its answer) and a cap on requests in flight (load.max_concurrency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from infercost.shards.split import MAX_SHARDS

#: The share of one core a process may spend reading a level's events.
CPU_SHARE_LIMIT: Final = 0.5
#: CPU per received event of a process that has measured none: bench/loadgen.py measured
#: 2.6 to 3.7 us a token at 256 streams of 256 tokens, and up to 40 us at 64-token requests
#: on a loaded machine (request overheads weigh more there), so a figure between.
DEFAULT_CPU_US_PER_EVENT: Final = 10.0
#: One stream's events per second when no level of the job was measured yet (10 ms apart).
DEFAULT_STREAM_EVENTS_PER_S: Final = 100.0
#: Output tokens of a request when neither the plan nor a measured level says (datasets).
DEFAULT_OUTPUT_TOKENS: Final = 256.0


@dataclass(frozen=True, slots=True)
class Budget:
    """The events per second one process may read: CPU_SHARE_LIMIT over its CPU per event."""

    cpu_us_per_event: float
    measured: bool

    @property
    def events_per_s(self) -> float:
        """Events per second within CPU_SHARE_LIMIT of one core."""
        return CPU_SHARE_LIMIT / (self.cpu_us_per_event * 1e-6)


def expected_events(
    mode: str,
    level: float,
    *,
    output_tokens: float | None,
    stream_events_per_s: float | None,
) -> tuple[float, str]:
    """A level's expected events per second, and how it was reckoned."""
    if mode == "rate":
        tokens = output_tokens or DEFAULT_OUTPUT_TOKENS
        said = "the plan's" if output_tokens else "assumed"
        return level * tokens, f"{level:g} requests/s x {tokens:g} output tokens ({said})"
    rate = stream_events_per_s or DEFAULT_STREAM_EVENTS_PER_S
    said = "measured on the previous level" if stream_events_per_s else "assumed"
    return level * rate, f"{level:g} streams x {rate:.0f} events/s each ({said})"


@dataclass(frozen=True, slots=True)
class Decision:
    """How many shards a level takes and why (the run's `client.sharding`)."""

    shards: int
    needed: int
    reason: str
    expected_events_per_s: float
    basis: str
    budget: Budget
    workers_free: int | None

    @property
    def client_bound(self) -> bool:
        """Whether the level needs more processes than it got: flagged before it starts."""
        return self.needed > self.shards

    def block(self) -> dict[str, Any]:
        """The stored and returned shape."""
        return {
            "shards": self.shards,
            "needed": self.needed,
            "reason": self.reason,
            "expected_events_per_s": round(self.expected_events_per_s, 1),
            "expected_from": self.basis,
            "budget_events_per_s": round(self.budget.events_per_s, 1),
            "cpu_us_per_event": round(self.budget.cpu_us_per_event, 3),
            "cpu_measured": self.budget.measured,
            "cpu_share_limit": CPU_SHARE_LIMIT,
            "workers_free": self.workers_free,
            "client_bound": self.client_bound,
        }


def decide(
    mode: str,
    level: float,
    *,
    expected: tuple[float, str],
    budget: Budget,
    workers_free: int | None,
    together: str | None = None,
) -> Decision:
    """The shards of a level expecting `expected` events/s with a process's `budget`, when
    `workers_free` processes (this one included) could take one; `together` names what keeps
    the level in one process (it then takes one, flagged when it needs more)."""
    events, basis = expected
    needed = max(1, math.ceil(events / budget.events_per_s))
    per_process = f"{budget.events_per_s:,.0f} events/s per process"
    if together is not None:
        shards = 1
        reason = f"{together} stay in one process"
    elif needed == 1:
        shards = 1
        reason = f"{events:,.0f} expected events/s fit one process ({per_process})"
    else:
        shards = min(needed, MAX_SHARDS, workers_free or 1)
        if mode != "rate":
            shards = min(shards, max(1, int(level)))
        reason = f"{events:,.0f} expected events/s need {needed} processes ({per_process})"
        if shards < needed:
            reason += f"; {shards} free to take a shard"
    if shards < needed and together is not None:
        reason += f", but {events:,.0f} expected events/s need {needed} ({per_process})"
    return Decision(shards, needed, reason, events, basis, budget, workers_free)
