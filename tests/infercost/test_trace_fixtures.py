"""The importers on real slices of public traces (tests/fixtures/traces, with their source and
licence in its README): each read held against statistics computed here with pandas and
numpy from the same file; and the text a replay builds for them sharing exactly the blocks
the trace says are shared."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from infercost.traffic.parse import read_all
from infercost.traffic.repository import WindowRequest
from workers.trace import TraceText, TraceWindow

TRACES = Path(__file__).parent.parent / "fixtures" / "traces"


def agree(read: dict[str, float], values: np.ndarray) -> None:
    assert read["mean"] == pytest.approx(values.mean(), rel=1e-12)
    for q in (50, 90, 99):
        assert read[f"p{q}"] == pytest.approx(np.percentile(values, q), rel=1e-12)
    assert read["max"] == values.max()


@pytest.mark.parametrize("name", ["azure_code_300.csv", "azure_conv_300.csv"])
def test_azure_slices_read_as_pandas_reads_them(name: str) -> None:
    path = TRACES / name
    rows, summary = read_all(path.read_bytes(), "azure")
    frame = pd.read_csv(path)
    # The file's seven-digit fractions end in 0: microseconds lose nothing.
    times = pd.to_datetime(frame["TIMESTAMP"])
    offsets = (times - times.min()).dt.total_seconds()
    assert summary.requests == len(frame) == 300
    assert summary.duration_s == pytest.approx(offsets.max(), abs=1e-6)
    assert summary.mean_requests_per_s == pytest.approx(300 / offsets.max())
    peak = int((offsets // 60).value_counts().max())
    assert summary.peak_1m_requests_per_s == pytest.approx(peak / 60)
    agree(summary.input_tokens, frame["ContextTokens"].to_numpy())
    agree(summary.output_tokens, frame["GeneratedTokens"].to_numpy())
    assert summary.start_at is not None
    assert summary.start_at.replace(tzinfo=None) == times.min().to_pydatetime()
    assert [r[1] for r in rows] == (offsets * 1e6).round().astype(int).tolist()


def test_a_mooncake_slice_reads_its_blocks_and_their_reuse() -> None:
    path = TRACES / "mooncake_conversation_300.jsonl"
    _, summary = read_all(path.read_bytes(), "mooncake")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    times = np.array([r["timestamp"] for r in records])
    assert summary.requests == 300
    assert summary.duration_s == pytest.approx((times.max() - times.min()) / 1000)
    assert summary.block_tokens == 512
    agree(summary.input_tokens, np.array([r["input_length"] for r in records]))
    agree(summary.output_tokens, np.array([r["output_length"] for r in records]))
    # Reuse by hand: a block's tokens count as reused when an earlier request had the block
    # (a block is 512 tokens, the last one of a prompt what is left of it).
    seen: set[int] = set()
    reused = 0
    for r in sorted(records, key=lambda r: r["timestamp"]):
        for j, block in enumerate(r["hash_ids"]):
            tokens = min(512, r["input_length"] - 512 * j)
            if block in seen:
                reused += tokens
            seen.add(block)
    total = sum(r["input_length"] for r in records)
    assert summary.prefix_reuse_share == pytest.approx(reused / total)
    # Its first 102 s: 8% of prompt tokens in blocks seen before (more as the hour goes on).
    assert reused / total == pytest.approx(0.081, abs=0.001)


def test_replay_text_shares_exactly_the_shared_blocks() -> None:
    path = TRACES / "mooncake_conversation_300.jsonl"
    rows, _ = read_all(path.read_bytes(), "mooncake")
    records = [json.loads(line) for line in path.read_text().splitlines()][:40]
    # Rows as the importer stores them: blocks renumbered in order of first appearance.
    window = TraceWindow(
        [WindowRequest(r[0], r[1] / 1e6, r[2], r[3], r[4], r[5], r[6]) for r in rows[:40]],
        512,
        0.0,
        10.0,
    )
    text = TraceText(window, seed=7, words_for=lambda n: n)
    prompts = [text.prompt(i).split() for i in range(40)]
    for i, r in enumerate(records):
        assert len(prompts[i]) == r["input_length"]
    for i in range(40):
        for j in range(i):
            a, b = records[i], records[j]
            common = 0
            while (
                common < min(len(a["hash_ids"]), len(b["hash_ids"]))
                and a["hash_ids"][common] == b["hash_ids"][common]
            ):
                common += 1
            shared = min(common * 512, a["input_length"], b["input_length"])
            # The same words as far as the blocks are shared, and not one word further.
            assert prompts[i][:shared] == prompts[j][:shared]
            if shared < min(len(prompts[i]), len(prompts[j])):
                assert prompts[i][shared] != prompts[j][shared]
    # A replay sends them ten times faster: request i due at its time / 10.
    assert window.offsets_ns()[:3] == [round(r["timestamp"] / 1000 / 10 * 1e9) for r in records[:3]]
