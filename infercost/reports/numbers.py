"""How reports, charts and the CLI write numbers: three significant figures, thousands
separators, and load levels rounded the way a person would say them ('12.9 req/s').

One module so a table, a chart's axis and a terminal agree on what 12.9427 reads as.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: What a table shows for an unknown figure.
UNKNOWN = "\u2013"


def _magnitude(value: float) -> int:
    return math.floor(math.log10(abs(value)))


def number(value: float | None) -> str:
    """A measured figure in a table: whole from 100 up (thousands separated), three
    significant figures below (12.9, 0.0512); an en dash when unknown."""
    if value is None or not math.isfinite(value):
        return UNKNOWN
    if abs(value) >= 100:
        return f"{value:,.0f}"
    # Round first, so 9.9996 reads 10.0 and not 10.00.
    rounded = float(f"{value:.3g}")
    if rounded == 0:
        return "0"
    return f"{rounded:,.{max(0, 2 - _magnitude(rounded))}f}"


def fixed(value: float, digits: int) -> str:
    """`value` with `digits` decimals and thousands separators, but never fewer than three
    significant figures (0.0123 stays 0.0123 where 2 decimals would say 0.01)."""
    if not math.isfinite(value):
        return UNKNOWN
    if value != 0 and abs(value) < 100:
        digits = max(digits, 2 - _magnitude(float(f"{value:.3g}")))
    return f"{value:,.{digits}f}"


def rounded(value: float, significant: int = 3) -> str:
    """A load level (or an axis tick) as a person gives it: whole numbers whole (8, 1,024),
    others to `significant` figures (12.9427 -> 12.9, 29.0435 -> 29.0) without trailing
    zeros the value does not have (2.5, not 2.50)."""
    if not math.isfinite(value):
        return UNKNOWN
    if value == int(value):
        return f"{int(value):,}"
    if abs(value) >= 10**significant:
        return f"{value:,.0f}"
    short = float(f"{value:.{significant}g}")
    if short == 0:
        return "0"
    text = f"{short:,.{max(0, significant - 1 - _magnitude(short))}f}"
    while "." in text and text.endswith("0"):
        shorter = text[:-1].removesuffix(".")
        if float(shorter.replace(",", "")) != value:
            break
        text = shorter
    return text


def distinct(values: Iterable[float], significant: int = 3) -> dict[float, str]:
    """Each value rounded to `significant` figures, with more figures only for values that
    would otherwise read the same: 12.941 and 12.944 read 12.941 and 12.944 while 20.8 beside
    them stays 20.8."""
    figures = dict.fromkeys(sorted(set(values)), significant)
    while True:
        texts = {v: rounded(v, n) for v, n in figures.items()}
        seen: dict[str, list[float]] = {}
        for v, text in texts.items():
            seen.setdefault(text, []).append(v)
        clashes = [v for group in seen.values() if len(group) > 1 for v in group]
        if not clashes:
            return texts
        for v in clashes:
            if figures[v] >= 15:
                return texts
            figures[v] += 1
