"""Workload fingerprints: one short hash that says whether two runs measured the same thing.

Runs are comparable when they sent the same kind of requests: the same prompts (a dataset's
content hash) or the same length distributions, the same sampling and streaming, and the
same sharing of prefixes and conversation turns. The seed (which particular draws) and the
load (levels, counts, durations) are left out: they are what a comparison varies.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

#: Bumped if the canonical form ever changes, so old and new fingerprints never collide.
FINGERPRINT_VERSION = 1
#: Hex digits kept of the sha256 (64 bits: collisions are not a concern at any team's scale).
FINGERPRINT_HEX_DIGITS = 16
#: Workload fields that never enter the fingerprint; dataset_id is replaced by the content
#: hash, and a preset's name by the lengths it resolved to (stored with the job).
EXCLUDED = frozenset({"seed", "dataset_id", "preset"})
#: Defaults of the workload schema, so an omitted field and its default fingerprint alike.
DEFAULTS: Mapping[str, Any] = {"ignore_eos": True, "stream": True, "temperature": None}


def _canonical(value: Any) -> Any:
    """Nulls dropped (an optional field left out equals it given as null), whole floats as
    ints (128 and 128.0 are the same length), keys sorted on encoding."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def workload_fingerprint(workload: Mapping[str, Any], dataset_sha256: str | None = None) -> str:
    """16 hex digits of sha256 over the canonical JSON of the workload's comparable part:
    every workload field except `seed` and `dataset_id`, defaults filled in, plus the
    dataset's content hash when the workload replays a dataset."""
    fields = {**DEFAULTS, **{k: v for k, v in workload.items() if k not in EXCLUDED}}
    if not fields.get("features"):
        # No request features: plain requests, as every workload sent before they existed.
        fields.pop("features", None)
    for name in ("input_tokens", "output_tokens"):
        if isinstance(fields.get(name), Mapping):
            fields[name] = {"distribution": "normal", **fields[name]}
    if dataset_sha256 is not None:
        # A dataset gives the prompts; a stray input length would not change what is sent.
        fields.pop("input_tokens", None)
        fields["dataset_sha256"] = dataset_sha256
    fields["v"] = FINGERPRINT_VERSION
    canonical = msgspec.json.encode(_canonical(fields), order="sorted")
    return hashlib.sha256(canonical).hexdigest()[:FINGERPRINT_HEX_DIGITS]


def job_fingerprint(
    workload: Mapping[str, Any],
    *,
    api: str,
    dataset_sha256: str | None = None,
    trace_sha256: str | None = None,
    load: Mapping[str, Any] | None = None,
) -> str:
    """The fingerprint of a job's runs, from its stored workload (and, for a trace replay,
    its log's content hash and its stored load plan): a replay's requests are the log's
    window at its speed, which makes two replays the same workload; embeddings are their
    own kind (the same texts embedded are another workload than generated from)."""
    fields = dict(workload)
    if trace_sha256 is not None:
        load = load or {}
        fields["trace"] = {
            "content_sha256": trace_sha256,
            "window": load.get("window"),
            "time_scale": load.get("time_scale"),
        }
    if api == "openai-embeddings":
        fields["api"] = api
    return workload_fingerprint(fields, dataset_sha256)


def without_feature(workload: Mapping[str, Any], feature: str) -> dict[str, Any]:
    """The workload with `feature` taken out of workload.features, the others in their
    order: what a run measured with the feature is held against (a structured run's plain
    twin, docs/figures.md)."""
    features = [f for f in workload.get("features") or () if f != feature]
    return {**workload, "features": features}
