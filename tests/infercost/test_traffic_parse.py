"""Reading request logs chunk by chunk: the same rows however the bytes are cut (lines, UTF-8
characters and gzip members split across chunks), each format's quirks, and errors that name
the line and column."""

from __future__ import annotations

import gzip

import pytest

from infercost.traffic.parse import Decoder, TooLarge, TrafficError, TrafficReader, read_all
from tests.traffic_files import azure_csv, burstgpt_csv, mooncake_jsonl


def read_in_chunks(data: bytes, fmt: str, size: int) -> tuple[list[tuple[object, ...]], object]:
    decoder = Decoder(1 << 40)
    reader = TrafficReader(fmt)
    rows = []
    for start in range(0, len(data), size):
        rows += reader.rows(decoder.feed(data[start : start + size]))
    rows += reader.rows(decoder.close())
    return rows, reader.finish()


@pytest.mark.parametrize("size", [1, 7, 4096])
@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("azure", azure_csv(300, seed=1)),
        ("mooncake", mooncake_jsonl(200, seed=2)),
        ("burstgpt", burstgpt_csv(200, seed=3, layout="v1.2")),
    ],
)
def test_any_chunking_reads_the_same(fmt: str, data: bytes, size: int) -> None:
    whole, summary = read_all(data, fmt)
    cut, cut_summary = read_in_chunks(data, fmt, size)
    assert cut == whole and cut_summary == summary
    packed, packed_summary = read_in_chunks(gzip.compress(data), fmt, size)
    assert packed == whole and packed_summary == summary


def test_two_gzip_members_and_a_multibyte_model_name() -> None:
    text = "timestamp,input_tokens,output_tokens,model\n0,1,1,modèle\n1.5,2,2,modèle\n"
    data = gzip.compress(text[:30].encode()) + gzip.compress(text[30:].encode())
    rows, summary = read_in_chunks(data, "infercost", 3)
    assert [r[4] for r in rows] == ["modèle", "modèle"]
    assert summary.models == [{"model": "modèle", "requests": 2}]  # type: ignore[attr-defined]


def test_azure_times_and_crlf() -> None:
    data = (
        b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\r\n"
        b"2023-11-16 18:15:46.6805900,374,44\r\n"
        b"2023-11-16 18:15:50.9951690,396,109"
    )
    rows, summary = read_all(data, "azure")
    # Offsets in microseconds from the first request; the 7th digit is dropped, not rounded.
    assert [r[1] for r in rows] == [0, 4_314_579]
    assert summary.start_at is not None and summary.start_at.isoformat() == (
        "2023-11-16T18:15:46.680590+00:00"
    )


def test_errors_name_line_and_column() -> None:
    cases = [
        (b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1\n", "azure",
         2, "GeneratedTokens", "2 fields"),
        (b"timestamp,input_tokens,output_tokens\n0,1,1\n2026-11-02T00:00:00Z,1,1\n",
         "infercost", 3, "timestamp", "mixes offsets"),
        (b'{"timestamp": 0, "input_length": 1, "output_length": 1}\n[1]\n', "mooncake", 2,
         None, "JSON object"),
        (b'{"timestamp": 0, "output_length": 1}\n', "mooncake", 1, "input_length", "no"),
        (b"timestamp,input_tokens,output_tokens,model\n0,1,1,a\x00b\n", "infercost", 2,
         "model", "NUL"),
        (b"timestamp,input_tokens,output_tokens\n0,1,1\n\xff\xfe\n", "infercost", 3, None,
         "UTF-8"),
        (b"timestamp,input_tokens,output_tokens\n0,1,2.5\n", "infercost", 2, "output_tokens",
         "whole number"),
    ]  # fmt: skip
    for data, fmt, line, column, what in cases:
        with pytest.raises(TrafficError) as caught:
            read_all(data, fmt)
        error = caught.value
        assert (error.line, error.column) == (line, column), (data, str(error))
        assert what in error.problem, (data, error.problem)


def test_the_text_cap_holds_as_it_unpacks() -> None:
    decoder = Decoder(100)
    with pytest.raises(TooLarge):
        decoder.feed(gzip.compress(b"x" * 1000))
