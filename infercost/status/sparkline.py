"""Sparklines as inline SVG: a polyline of a trend series, drawn by hand (numbers only, no
text), so 300 rows of them render in milliseconds where a plotting library takes seconds."""

from __future__ import annotations

from collections.abc import Sequence

WIDTH, HEIGHT, PAD = 96, 26, 2


def sparkline(values: Sequence[float | None], *, label: str, colour: str = "#0969da") -> str:
    """An SVG of `values` (oldest first; None leaves a gap) scaled to its own range, with
    the last point marked; `label` is the accessible name (escaped by the caller's
    template, so it must be plain text put in by the template, never user text here)."""
    points = [(i, v) for i, v in enumerate(values) if v is not None]
    body = ""
    if points:
        low = min(v for _, v in points)
        high = max(v for _, v in points)
        span = high - low or 1.0
        step = (WIDTH - 2 * PAD) / max(len(values) - 1, 1)

        def xy(i: int, v: float) -> str:
            y = HEIGHT - PAD - (v - low) / span * (HEIGHT - 2 * PAD)
            if high == low:
                y = HEIGHT / 2
            return f"{PAD + i * step:.1f},{y:.1f}"

        # Runs of consecutive points become one polyline each: a slice without runs is a gap.
        segments: list[list[str]] = [[]]
        previous = None
        for i, v in points:
            if previous is not None and i != previous + 1:
                segments.append([])
            segments[-1].append(xy(i, v))
            previous = i
        for segment in segments:
            if len(segment) > 1:
                body += (
                    f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                    f'points="{" ".join(segment)}"/>'
                )
        x, y = xy(*points[-1]).split(",")
        body += f'<circle cx="{x}" cy="{y}" r="2.2" fill="{colour}"/>'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}">{body}</svg>'
    )
