"""How client commands print: `--json` for scripts, tables for people, ids never cut.

Tables fold a long cell onto a second line rather than cutting it with an ellipsis, and
off a terminal they are as wide as they need to be, so an id or a figure copied from a
table is always whole. Numbers carry thousands separators and a fixed number of decimals.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from infercost.reports.numbers import fixed

F = TypeVar("F", bound=Callable[..., Any])

#: Width of a table printed off a terminal (into a pipe or a file): wide enough that no
#: row wraps.
PIPE_WIDTH = 1000


def json_option(command: F) -> F:
    """`--json` on a command: it prints the API's JSON instead of a table (`as_json`)."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print JSON (what the API answered) instead of a table, for scripts.",
    )(command)


def emit_json(data: Any) -> None:
    """Print `data` as indented JSON on standard output."""
    click.echo(json.dumps(data, indent=2, default=str))


def console() -> Console:
    """Standard output as rich sees it; off a terminal, wide enough that tables never wrap."""
    tty = sys.stdout.isatty()
    return Console(width=None if tty else PIPE_WIDTH, highlight=False)


def table(*columns: str, right: tuple[str, ...] = (), ids: tuple[str, ...] = ("id",)) -> Table:
    """A table whose cells fold instead of being cut; `ids` columns keep a whole UUID on one
    line; `right` columns (numbers) align right."""
    out = Table()
    for name in columns:
        if name in ids:
            out.add_column(name, no_wrap=True, min_width=36, overflow="fold")
        else:
            out.add_column(name, justify="right" if name in right else "left", overflow="fold")
    return out


def num(value: float | None, digits: int = 1, unit: str = "") -> str:
    """A figure with thousands separators and `digits` decimals (1,175.4), but at least three
    significant figures (0.0512, not 0.05); '-' if unknown."""
    if value is None:
        return "-"
    return f"{fixed(value, digits)}{unit}"


def when(value: str | None) -> str:
    """An RFC 3339 time as 'YYYY-MM-DD HH:MM:SS' (UTC), or '-'."""
    if not value:
        return "-"
    return datetime.fromisoformat(value.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")


def is_uuid(text: str) -> bool:
    """Whether `text` is a whole UUID."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
