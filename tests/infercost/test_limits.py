"""JSON nesting depth, measured without decoding; and formula-safe CSV cells."""

from __future__ import annotations

import json

import pytest

from api.csv import csv_text, neutralised
from infercost.limits import MAX_JSON_DEPTH, json_depth, too_deep


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ('"scalar"', 0),
        ("42", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('{"a": "[[[[{{{{"}', 1),  # brackets inside strings are text
        (r'["\"[[[", "]]"]', 1),  # an escaped quote does not end the string
        ("[[], [[]], []]", 3),
    ],
)
def test_depth_is_read_from_brackets_outside_strings(text: str, depth: int) -> None:
    json.loads(text)  # the case is valid JSON
    assert json_depth(text) == depth


def test_thousands_of_levels_are_measured_without_recursion() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert json_depth(deep) == 100_000
    assert too_deep(deep)


def test_the_limit_is_inclusive() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    over = "[" + at_limit + "]"
    assert not too_deep(at_limit)
    assert too_deep(over)
    # Many brackets side by side are not depth.
    assert not too_deep("[" + ",".join(["[]"] * 1000) + "]")


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("+SUM(A1:A9)", "'+SUM(A1:A9)"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tTAB", "'\tTAB"),
        ("\rCR", "'\rCR"),
        ("-0.5", "-0.5"),  # a number written as text stays a number
        ("-1e-3", "-1e-3"),
        (-0.5, -0.5),
        (-3, -3),
        ("plain", "plain"),
    ],
)
def test_cells_that_start_a_formula_are_quoted(cell: object, written: object) -> None:
    assert neutralised(cell) == written


def test_csv_text_neutralises_every_cell() -> None:
    text = csv_text(["model", "level"], [['=HYPERLINK("http://x")', -0.5]])
    assert text == 'model,level\n"\'=HYPERLINK(""http://x"")",-0.5\n'
