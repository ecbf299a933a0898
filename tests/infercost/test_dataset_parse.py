"""Dataset parsing: items of each shape, and errors that name the line or item."""

from __future__ import annotations

import pytest

from infercost.datasets.parse import DatasetError, parse_dataset


def test_items_of_each_shape() -> None:
    parsed = parse_dataset(
        b'{"prompt": "a b", "max_tokens": 3}\n\n{"messages": [{"role": "user", "content": "x"}]}\n',
        "jsonl",
    )
    assert [(i.prompt, i.max_tokens, i.user_turns) for i in parsed.items] == [
        ("a b", 3, 1),
        (None, None, 1),
    ]
    sharegpt = parse_dataset(
        b'[{"conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "q"},'
        b' {"from": "gpt", "value": "a"}, {"from": "human", "value": "q2"}]}]',
        "sharegpt",
    )
    (item,) = sharegpt.items
    # The reply before the first human turn is dropped; roles become chat roles.
    assert [m["role"] for m in item.messages or []] == ["user", "assistant", "user"]
    assert item.user_turns == 2


@pytest.mark.parametrize(
    ("data", "fmt", "where"),
    [
        (b'{"prompt": "ok"}\n{"prompt": ""}\n', "jsonl", "line 2"),
        (b'{"prompt": "ok"}\n\xff\n', "jsonl", "line 2"),
        (b'[\n{"conversations": []},\n{"conversations": [}\n]', "sharegpt", "line 3"),
        (b'[{"conversations": "no"}]', "sharegpt", "item 1"),
        (b"\n\n", "jsonl", "line 1"),
    ],
)
def test_errors_name_the_place(data: bytes, fmt: str, where: str) -> None:
    with pytest.raises(DatasetError) as caught:
        parse_dataset(data, fmt)
    assert caught.value.where == where


def test_a_nul_character_is_refused_with_its_line() -> None:
    data = b'{"prompt": "fine"}\n{"prompt": "a\\u0000b"}\n'
    with pytest.raises(DatasetError) as caught:
        parse_dataset(data, "jsonl")
    assert "line 2" in str(caught.value)
    assert "NUL" in str(caught.value)
