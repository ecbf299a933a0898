"""Slot computation with a clock the test controls: cron in a time zone (across both DST
changes), intervals, jitter bounds, quiet hours, catch-up after downtime."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta

from infercost.schedules.slots import (
    Timing,
    check_cron,
    check_timezone,
    due_at,
    due_slots,
    in_quiet_hours,
    next_slot,
)

ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def test_cron_every_three_hours_in_berlin_across_the_spring_change() -> None:
    # 29 March 2026, 02:00 CET -> 03:00 CEST. Local 00:00 is 23:00 UTC the day before (CET,
    # +1); local 03:00 is 01:00 UTC (CEST, +2): two hours apart in UTC, then three again.
    berlin = Timing(id=ID, cron="0 */3 * * *", timezone="Europe/Berlin")
    slots = due_slots(berlin, utc(2026, 3, 28, 20, 0), utc(2026, 3, 29, 7, 0))
    assert slots == [utc(2026, 3, 28, 23), utc(2026, 3, 29, 1), utc(2026, 3, 29, 4),
                     utc(2026, 3, 29, 7)]  # fmt: skip


def test_cron_across_the_autumn_change() -> None:
    # 25 October 2026, 03:00 CEST -> 02:00 CET. Local 00:00 CEST is 22:00 UTC; the next
    # local 03:00 is CET, 02:00 UTC: four hours apart in UTC.
    berlin = Timing(id=ID, cron="0 */3 * * *", timezone="Europe/Berlin")
    assert next_slot(berlin, utc(2026, 10, 24, 21)) == utc(2026, 10, 24, 22)
    assert next_slot(berlin, utc(2026, 10, 24, 22)) == utc(2026, 10, 25, 2)


def test_daily_cron_follows_local_time_not_utc() -> None:
    # 09:00 in New York is 14:00 UTC in winter (EST) and 13:00 UTC in summer (EDT).
    ny = Timing(id=ID, cron="0 9 * * *", timezone="America/New_York")
    assert next_slot(ny, utc(2026, 1, 10)) == utc(2026, 1, 10, 14)
    assert next_slot(ny, utc(2026, 7, 10)) == utc(2026, 7, 10, 13)


def test_interval_slots_are_multiples_from_the_epoch() -> None:
    every_3h = Timing(id=ID, interval_s=10800)
    # 2026-01-01T00:00Z is a multiple of 3 h since the epoch (20454 days).
    assert next_slot(every_3h, utc(2026, 1, 1, 1, 30)) == utc(2026, 1, 1, 3)
    assert next_slot(every_3h, utc(2026, 1, 1, 3)) == utc(2026, 1, 1, 6)
    assert due_slots(every_3h, utc(2026, 1, 1, 3), utc(2026, 1, 1, 8, 59)) == [utc(2026, 1, 1, 6)]


def test_a_restart_catches_up_every_slot_since_the_last_one() -> None:
    hourly = Timing(id=ID, interval_s=3600)
    # Down from 10:30 to 14:10: slots 11, 12, 13 and 14 are due (the caller runs 14:00 and
    # records the others as missed); 10:00 was the last handled, so it is not repeated.
    slots = due_slots(hourly, utc(2026, 1, 1, 10), utc(2026, 1, 1, 14, 10))
    assert slots == [utc(2026, 1, 1, h) for h in (11, 12, 13, 14)]
    assert due_slots(hourly, utc(2026, 1, 1, 14), utc(2026, 1, 1, 14, 10)) == []


def test_a_new_schedule_does_not_replay_history() -> None:
    hourly = Timing(id=ID, interval_s=3600)
    assert due_slots(hourly, None, utc(2026, 1, 1, 14, 10)) == [utc(2026, 1, 1, 14)]


def test_jitter_stays_within_its_bounds_and_is_the_same_for_every_replica() -> None:
    bounds = timedelta(seconds=600)
    delays = set()
    for n in range(200):
        timing = Timing(id=uuid.UUID(int=n), interval_s=3600, jitter_s=600)
        slot = utc(2026, 1, 1, 5)
        delay = due_at(timing, slot) - slot
        assert timedelta(0) <= delay <= bounds
        assert delay == due_at(Timing(id=uuid.UUID(int=n), interval_s=3600, jitter_s=600),
                               slot) - slot  # fmt: skip
        delays.add(delay)
    # Spread out, not all at the slot: 200 draws from 601 values take many distinct ones.
    assert len(delays) > 100
    assert due_at(Timing(id=ID, interval_s=3600), utc(2026, 1, 1, 5)) == utc(2026, 1, 1, 5)


def test_a_jittered_slot_is_due_only_once_its_delay_passed() -> None:
    timing = Timing(id=ID, interval_s=3600, jitter_s=900)
    slot = utc(2026, 1, 1, 5)
    due = due_at(timing, slot)
    assert slot < due <= slot + timedelta(seconds=900)  # this id draws a non-zero delay
    assert due_slots(timing, utc(2026, 1, 1, 4), due - timedelta(seconds=1)) == []
    assert due_slots(timing, utc(2026, 1, 1, 4), due) == [slot]


def test_quiet_hours_span_midnight_in_the_schedules_time_zone() -> None:
    quiet = Timing(id=ID, interval_s=3600, timezone="Europe/Berlin",
                   quiet_start=time(22, 0), quiet_end=time(6, 0))  # fmt: skip
    # January: Berlin is UTC+1. 21:00 UTC = 22:00 local (quiet), 04:59 UTC = 05:59 (quiet),
    # 05:00 UTC = 06:00 local (not quiet: the end is excluded), 20:59 UTC = 21:59 (not).
    assert in_quiet_hours(quiet, utc(2026, 1, 1, 21, 0))
    assert in_quiet_hours(quiet, utc(2026, 1, 2, 4, 59))
    assert not in_quiet_hours(quiet, utc(2026, 1, 2, 5, 0))
    assert not in_quiet_hours(quiet, utc(2026, 1, 1, 20, 59))
    daytime = Timing(id=ID, interval_s=3600, quiet_start=time(9), quiet_end=time(17))
    assert in_quiet_hours(daytime, utc(2026, 1, 1, 9))
    assert not in_quiet_hours(daytime, utc(2026, 1, 1, 17))
    assert not in_quiet_hours(Timing(id=ID, interval_s=3600), utc(2026, 1, 1, 23))


def test_cron_and_time_zone_checks_say_what_is_wrong() -> None:
    assert check_cron("0 */3 * * *") is None
    assert check_cron("0 */3 * *") is not None
    assert check_cron("61 * * * *") is not None
    assert check_timezone("Europe/Berlin") is None
    assert check_timezone("Mars/Olympus") is not None
