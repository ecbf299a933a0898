"""Workload fingerprints: equal for like-for-like workloads, different when any input that
makes runs comparable changes; the seed never counts."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from infercost.workload.fingerprint import workload_fingerprint

BASE: dict[str, Any] = {
    "input_tokens": {"distribution": "normal", "mean": 512.0, "std": 64.0, "min": None},
    "output_tokens": {"distribution": "normal", "mean": 128.0, "std": None},
    "ignore_eos": True,
    "stream": True,
    "temperature": None,
    "seed": 0,
}


def test_like_for_like_workloads_share_a_fingerprint() -> None:
    fp = workload_fingerprint(BASE)
    # Stored fingerprints must stay comparable: the hash of the canonical form written out by
    # hand (sorted keys, nulls and the seed dropped, whole floats as ints, the version).
    canonical = (
        b'{"ignore_eos":true,"input_tokens":{"distribution":"normal","mean":512,"std":64},'
        b'"output_tokens":{"distribution":"normal","mean":128},"stream":true,"v":1}'
    )
    assert fp == hashlib.sha256(canonical).hexdigest()[:16] == "c1bd9b716e445583"
    # The seed, explicit defaults, nulls and 512 vs 512.0 do not change what is measured.
    same = {
        "input_tokens": {"mean": 512, "std": 64},
        "output_tokens": {"mean": 128},
        "seed": 42,
    }
    assert workload_fingerprint(same) == fp
    # Key order does not matter.
    assert workload_fingerprint(dict(reversed(list(BASE.items())))) == fp


@pytest.mark.parametrize(
    "change",
    [
        {"input_tokens": {"mean": 512, "std": 32}},
        {"input_tokens": {"distribution": "lognormal", "mean": 512, "std": 64}},
        {"output_tokens": {"mean": 256}},
        {"output_tokens": {"mean": 128, "max": 200}},
        {"ignore_eos": False},
        {"stream": False},
        {"temperature": 0.7},
        {"sessions": {"turns": 3, "system_prompt_tokens": 100}},
    ],
)
def test_any_comparable_input_changes_it(change: dict[str, Any]) -> None:
    assert workload_fingerprint({**BASE, **change}) != workload_fingerprint(BASE)


def test_datasets_are_named_by_content() -> None:
    on_dataset = {"output_tokens": {"mean": 128}, "dataset_id": "a", "seed": 1}
    fp = workload_fingerprint(on_dataset, "ab" * 32)
    # Another id with the same bytes (another team, a re-upload) is the same workload.
    assert workload_fingerprint({**on_dataset, "dataset_id": "b", "seed": 2}, "ab" * 32) == fp
    assert workload_fingerprint(on_dataset, "cd" * 32) != fp
    assert workload_fingerprint({**on_dataset, "output_tokens": {"mean": 64}}, "ab" * 32) != fp
    assert fp != workload_fingerprint(BASE)
