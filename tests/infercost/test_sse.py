"""The server-sent events parser against the WHATWG standard's rules (HTML §9.2.5-9.2.6), each
case written out by hand: what a conforming client dispatches for the bytes given."""

from __future__ import annotations

import pytest

from infercost.engines.sse import MESSAGE, SSEParser


def events(body: bytes, *, pieces: int = 1) -> list[tuple[bytes, bytes]]:
    """(type, data) of every event dispatched for `body`, fed in `pieces` equal parts."""
    parser = SSEParser()
    size = max(1, -(-len(body) // pieces))
    out: list[tuple[bytes, bytes]] = []
    for at in range(0, len(body), size):
        out.extend((kind, data) for kind, data, _ in parser.feed(body[at : at + size]))
    return out


CASES: dict[str, tuple[bytes, list[tuple[bytes, bytes]]]] = {
    "one data line": (b"data: hello\n\n", [(MESSAGE, b"hello")]),
    # Several data lines are joined with a newline; the last newline is dropped.
    "multi-line data": (b"data: a\ndata: b\ndata:\n\n", [(MESSAGE, b"a\nb\n")]),
    # Only one leading space is removed; none is needed.
    "spaces after the colon": (
        b"data:  two\n\ndata:none\n\n",
        [(MESSAGE, b" two"), (MESSAGE, b"none")],
    ),
    # CR, LF and CRLF all end lines, mixed in one stream.
    "line ends": (
        b"data: cr\r\rdata: lf\n\ndata: crlf\r\n\r\ndata: x\r\ndata: y\n\r\n",
        [(MESSAGE, b"cr"), (MESSAGE, b"lf"), (MESSAGE, b"crlf"), (MESSAGE, b"x\ny")],
    ),
    # Comments are ignored; an event of comments only dispatches nothing.
    "comments": (b": hi\n\n:\ndata: a\n: between\ndata: b\n\n", [(MESSAGE, b"a\nb")]),
    # `event` names the type of the event it is in, and only that one.
    "event type": (
        b"event: error\ndata: boom\n\ndata: after\n\n",
        [(b"error", b"boom"), (MESSAGE, b"after")],
    ),
    # An event with a type but no data is not dispatched, and its type does not carry over.
    "type without data": (b"event: error\n\ndata: plain\n\n", [(MESSAGE, b"plain")]),
    # A field without a colon is that field with an empty value: `data` alone is an empty line
    # of data, which still dispatches an (empty) event.
    "field without colon": (b"data\n\n", [(MESSAGE, b"")]),
    # Unknown fields are ignored (llama.cpp's old `error:` lines).
    "unknown field": (b'error: {"message":"x"}\n\ndata: ok\n\n', [(MESSAGE, b"ok")]),
    # An event never ended by a blank line is discarded at the end of the stream.
    "unended event": (b"data: a\n\ndata: [DONE]\n", [(MESSAGE, b"a")]),
    # One leading byte order mark is dropped.
    "byte order mark": (b"\xef\xbb\xbfdata: a\n\n", [(MESSAGE, b"a")]),
    # Field names are case-sensitive.
    "case": (b"Data: no\n\ndata: yes\n\n", [(MESSAGE, b"yes")]),
    # Extra blank lines dispatch nothing.
    "blank lines": (b"\n\n\ndata: a\n\n\n\n", [(MESSAGE, b"a")]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("pieces", [1, 3, 1000])
def test_the_standard(name: str, pieces: int) -> None:
    body, expected = CASES[name]
    assert events(body, pieces=pieces) == expected


def test_id_and_retry() -> None:
    parser = SSEParser()
    parser.feed(b"id: 7\nretry: 1500\ndata: a\n\n")
    assert (parser.last_id, parser.retry_ms) == (b"7", 1500)
    # An id holding NUL is ignored; a retry that is not all digits too; an empty id resets.
    parser.feed(b"id: 8\x00\nretry: 1.5\ndata: b\n\n")
    assert (parser.last_id, parser.retry_ms) == (b"7", 1500)
    parser.feed(b"id\ndata: c\n\n")
    assert parser.last_id == b""


def test_a_crlf_split_between_reads_is_one_line_end() -> None:
    parser = SSEParser()
    got = [*parser.feed(b"data: a\r"), *parser.feed(b"\n\r"), *parser.feed(b"\ndata: b\r\n\r\n")]
    assert [(k, d) for k, d, _ in got] == [(MESSAGE, b"a"), (MESSAGE, b"b")]


def test_the_event_is_dispatched_by_the_read_that_brings_its_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n") == []
    assert parser.pending() == b"data: a\n"
    assert [d for _, d, _ in parser.feed(b"\n")] == [b"a"]


def test_a_batch_of_plain_events_is_their_data_as_one_json_array() -> None:
    parser = SSEParser()
    batch = parser.feed_batch(b'data: {"a":1}\n\ndata:{"b":2}\n\ndata: {"c"')
    assert batch == (b'[ {"a":1},{"b":2}]', 2, b'data: {"a":1}\n\ndata:{"b":2}\n\n')
    # One event alone is its data; the rest of the last read completes it.
    assert parser.feed_batch(b":3}\n\n") == (b' {"c":3}', 1, b'data: {"c":3}\n\n')
    # Anything but plain data lines comes as events.
    assert parser.feed_batch(b"event: x\ndata: 1\n\n: c\n\n") == [(b"x", b"1", 1)]
    assert parser.events_in(b'data: {"a":1}\n\ndata:{"b":2}\n\n') == [
        (MESSAGE, b'{"a":1}', 1),
        (MESSAGE, b'{"b":2}', 1),
    ]
