"""When a schedule runs: its slots, their jitter and its quiet hours, as pure functions.

A slot is a nominal time of the schedule (a cron match in its time zone, or a multiple of
its interval counted from the Unix epoch); the job of a slot is due at the slot plus a
jitter drawn from the schedule id and the slot, so every scheduler replica computes the
same due time and nothing random is stored. Nothing here reads a clock: callers pass `now`.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

#: After downtime, slots older than this are neither run nor recorded as missed (a cron of
#: every minute down for a year would otherwise enumerate half a million of them).
MAX_LOOKBACK = timedelta(days=7)
#: The most slots one call returns (the newest ones).
MAX_SLOTS = 1000


@dataclass(frozen=True, slots=True)
class Timing:
    """What slot computation needs of a schedule (infercost.schedules.models.Schedule has
    the same attributes, so either can be passed)."""

    id: uuid.UUID
    cron: str | None = None
    timezone: str = "UTC"
    interval_s: int | None = None
    jitter_s: int = 0
    quiet_start: time | None = None
    quiet_end: time | None = None


def check_cron(expression: str) -> str | None:
    """None when `expression` is a valid five-field cron expression, else why not."""
    if len(expression.split()) != 5:
        return "a cron expression has five fields: minute hour day-of-month month day-of-week"
    if not croniter.is_valid(expression):
        return f"'{expression}' is not a valid cron expression"
    return None


def check_timezone(name: str) -> str | None:
    """None when `name` is an IANA time zone this machine knows, else why not."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone '{name}': use an IANA name such as 'Europe/Berlin' or 'UTC'"
    return None


def jitter(schedule: Timing, slot: datetime) -> timedelta:
    """The slot's delay, in whole seconds in [0, jitter_s]: a hash of the schedule and the
    slot, so that replicas agree and schedules on the same cron spread out."""
    if schedule.jitter_s <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{schedule.id}:{slot.timestamp():.0f}".encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % (schedule.jitter_s + 1))


def next_slot(schedule: Timing, after: datetime) -> datetime:
    """The first nominal slot strictly after `after` (UTC)."""
    if schedule.interval_s is not None:
        step = schedule.interval_s
        count = int(after.timestamp() // step) + 1
        return datetime.fromtimestamp(count * step, UTC)
    assert schedule.cron is not None, "a schedule has a cron expression or an interval"
    local = after.astimezone(ZoneInfo(schedule.timezone))
    found: datetime = croniter(schedule.cron, local).get_next(datetime)
    return found.astimezone(UTC)


def due_at(schedule: Timing, slot: datetime) -> datetime:
    """When the slot's job is due: the slot plus its jitter."""
    return slot + jitter(schedule, slot)


def due_slots(schedule: Timing, last_slot: datetime | None, now: datetime) -> list[datetime]:
    """The slots after `last_slot` whose due time has come by `now`, oldest first (at most
    MAX_SLOTS, none older than MAX_LOOKBACK). With `last_slot` None (a new schedule) there
    is nothing to catch up on: only a slot due in the last interval counts, never history.

    The caller runs the newest and records the others as missed.
    """
    floor = now - MAX_LOOKBACK
    start = floor if last_slot is None or last_slot < floor else last_slot
    slots: list[datetime] = []
    slot = next_slot(schedule, start)
    while due_at(schedule, slot) <= now:
        slots.append(slot)
        slot = next_slot(schedule, slot)
    if last_slot is None:
        slots = slots[-1:]
    return slots[-MAX_SLOTS:]


def in_quiet_hours(schedule: Timing, slot: datetime) -> bool:
    """Whether the slot falls in the quiet hours, [start, end) in the schedule's time zone;
    a start after the end spans midnight (22:00 to 06:00)."""
    start, end = schedule.quiet_start, schedule.quiet_end
    if start is None or end is None or start == end:
        return False
    local = slot.astimezone(ZoneInfo(schedule.timezone)).time()
    if start < end:
        return start <= local < end
    return local >= start or local < end
