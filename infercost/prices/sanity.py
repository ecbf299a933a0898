"""Whether a new price looks mistyped: far from what the team's book already holds for the
same hardware. Such an entry is accepted (prices do move) with a warning that the response,
the CLI and every estimate priced from it repeat."""

from __future__ import annotations

from typing import Final

#: How far from the book's median a price may be before it is flagged: more than this many
#: times it, or less than this fraction of it.
FAR_FACTOR: Final = 5.0


def price_warning(
    usd_per_gpu_hour: float,
    hardware: str,
    reference: tuple[float, int] | None,
    price_id: object = "{id}",
) -> str | None:
    """The warning for a price of `usd_per_gpu_hour` for `hardware` when the book's entries
    for it (`reference`: their median and count; None when there are none) make it look
    mistyped, else None."""
    if reference is None:
        return None
    median, count = reference
    if median <= 0:
        return None
    # Compared by multiplying, so "exactly a fifth" (0.6 against 3.0) is a fifth.
    if median <= usd_per_gpu_hour * FAR_FACTOR and usd_per_gpu_hour <= median * FAR_FACTOR:
        return None
    ratio = usd_per_gpu_hour / median
    entries = "its one entry" if count == 1 else f"the median of its {count} entries"
    if ratio >= FAR_FACTOR:
        how_far = f"{ratio:,.0f}x"
    elif ratio * 1e9 >= 1:
        how_far = f"1/{1 / ratio:,.0f} of"
    else:  # zero, or so small that its inverse would not print (or would not exist)
        how_far = "next to nothing against"
    return (
        f"USD {usd_per_gpu_hour:,.2f} per GPU-hour for {hardware} is {how_far} the USD "
        f"{median:,.2f} your price book holds for it ({entries}): if it is a typo, withdraw "
        f"the entry (DELETE /v1/prices/{price_id}) and add the right figure"
    )
