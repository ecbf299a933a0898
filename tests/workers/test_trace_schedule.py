"""How many connections a replay opens before its clock starts: its busiest second's sends."""

from __future__ import annotations

from workers.loadgen.open_loop import busiest_second


def test_the_busiest_second_of_a_schedule() -> None:
    second = 1_000_000_000
    # 0, 0.2, 0.9 s fall in one second; 1.0 s starts the next (0.2 to 1.0 holds 3 too); then
    # four requests within 0.3 s from 5 s.
    offsets = [0, 2 * second // 10, 9 * second // 10, second, 5 * second,
               51 * second // 10, 52 * second // 10, 53 * second // 10]  # fmt: skip
    assert busiest_second(offsets) == 4
    assert busiest_second(offsets, cap=2) == 2
    assert busiest_second(offsets, limit=3) == 3
    assert busiest_second([]) == 0
