"""Every part that knows an engine agrees about it: the endpoint check, the worker's tokenizer
probe, the telemetry mapping, the request body builder and stream reader, and the simulator's
engine profiles. A new alias, form, metric family or refused field added in one place and
not another fails here."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from infercost.endpoints import preflight
from infercost.engines import catalog
from infercost.engines.catalog import ENGINES
from infercost.engines.metrics import FAMILY_OF_PREFIX, METRIC_TABLE, lookup
from sim.config import ENGINE_PROFILES
from workers.loadgen import tokenize
from workers.loadgen.stream import Target, request_body

#: Names users and servers give engines, as the ENGINES.md research found them in use.
SPELLINGS = {
    "vLLM": "vllm",
    "llama.cpp": "llamacpp",
    "llama-server": "llamacpp",
    "llama_cpp": "llamacpp",
    "text-generation-inference": "tgi",
    "text-generation-router": "tgi",
    "TGI": "tgi",
    "SGLang": "sglang",
    "tensorrt_llm": "trtllm",
    "transformers": "transformers",
    "unknown-engine": None,
}


@pytest.mark.parametrize(("name", "key"), sorted(SPELLINGS.items()))
def test_the_check_and_the_tokenizer_probe_name_engines_alike(name: str, key: str | None) -> None:
    assert preflight.engine_name(name) == key
    assert tokenize.engine_key(name) == key
    assert catalog.engine_key(name) == key


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_alias_of_every_engine(engine: str) -> None:
    for alias in ENGINES[engine].aliases:
        assert preflight.engine_name(alias) == tokenize.engine_key(alias) == engine


def test_server_root_is_one_rule() -> None:
    for base in ("http://h:8000/v1", "http://h:8000/v1/", "http://h:8000", "http://h/x/v1"):
        assert preflight.server_root(base) == tokenize.server_root(base)
    assert preflight.server_root("http://h:8000/v1/") == "http://h:8000"


@pytest.mark.parametrize("engine", [*sorted(ENGINES), None])
def test_the_check_tries_the_tokenize_forms_the_probe_tries(engine: str | None) -> None:
    base = "http://192.0.2.1:8000/v1"
    target = Target.for_endpoint(base, "openai-chat", "m", None, 5.0, engine=engine)
    probe = [(f.path, f.field, url) for f, url, _ in tokenize._candidates(target)]
    check = [(f.path, f.field, url) for f, url, _ in catalog.tokenize_candidates(base, engine)]
    assert probe == check
    known = catalog.engine_of(engine)
    own = [f for f in (known.tokenize if known else ()) if not f.chat]
    if own:
        # the engine's own text form first, at the server root
        assert probe[0][:2] == (own[0].path, own[0].field)
        assert probe[0][2] == "http://192.0.2.1:8000" + own[0].path


def test_metric_families_name_the_engines_that_publish_them() -> None:
    families = {spec.family for spec in METRIC_TABLE}
    for engine in ENGINES.values():
        if engine.metrics_family is not None:
            assert engine.metrics_family in families, engine.key
    for prefix, family in FAMILY_OF_PREFIX.items():
        sources = [spec.source for spec in METRIC_TABLE if spec.family == family]
        assert sources, family
        assert all(source.startswith(prefix) for source in sources)
        recognised = catalog.engine_by_metric(sources[0])
        assert recognised == (family if family in ENGINES else None)


def test_the_vllm_kv_cache_rename_is_versioned() -> None:
    new, old = lookup("vllm:kv_cache_usage_perc"), lookup("vllm:gpu_cache_usage_perc")
    assert new is not None and old is not None
    assert new.canonical == old.canonical == "kv_cache_usage"
    assert new.versions == ">=0.9.2"
    # the old name, shown beside the new one until 0.11, gives way to it
    assert old.versions == "<0.11"
    assert old.priority > new.priority


def _body(engine: str | None, *, ignore_eos: bool = True) -> dict[str, Any]:
    target = Target.for_endpoint("http://h:1/v1", "openai-chat", "m", None, 5.0, engine=engine)
    body = request_body(target, "hi", 12, stream=True, ignore_eos=ignore_eos, temperature=0.0)
    decoded: dict[str, Any] = msgspec.json.decode(body)
    return decoded


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_job_never_sends_an_engine_a_field_it_refuses(engine: str) -> None:
    known = ENGINES[engine]
    body = _body(engine)
    if known.accepted_fields is not None:
        assert set(body) <= known.accepted_fields
    # stream options as the reader expects usage from it
    options = body.get("stream_options", {})
    assert bool(options.get("continuous_usage_stats")) == known.continuous_usage
    assert (
        Target.for_endpoint(
            "http://h/v1", "openai-chat", "m", None, 1, engine=engine
        ).continuous_usage
        == known.continuous_usage
    )
    if known.usage_always:
        assert "stream_options" not in body


def test_exact_lengths_are_asked_each_engines_way() -> None:
    assert _body("vllm")["ignore_eos"] is True
    assert _body("llama.cpp")["ignore_eos"] is True
    assert _body(None)["ignore_eos"] is True  # an engine not named: the common field
    forced = _body("transformers")
    assert "ignore_eos" not in forced
    assert json.loads(forced["generation_config"]) == {"min_new_tokens": 12, "max_new_tokens": 12}
    assert forced["max_tokens"] == 12
    # engines that cannot be told: nothing asked
    assert "ignore_eos" not in _body("tgi")
    assert "ignore_eos" not in _body("openai")
    # and nothing at all when the workload does not ask for exact lengths
    for engine in (None, "vllm", "transformers"):
        body = _body(engine, ignore_eos=False)
        assert "ignore_eos" not in body and "generation_config" not in body


@pytest.mark.parametrize("profile", sorted(set(ENGINE_PROFILES) - {"default"}))
def test_the_simulators_profiles_copy_what_the_catalog_says(profile: str) -> None:
    engine = ENGINES[profile]
    switches = ENGINE_PROFILES[profile]
    assert (switches.get("tokenize", "default") == "none") == (not engine.tokenize)
    assert (switches.get("metrics", "default") == "none") == (engine.metrics_family is None)
    assert bool(switches.get("strict_fields")) == (engine.accepted_fields is not None)
    assert (switches.get("stream_end", "done") == "done") == engine.sends_done
    assert (switches.get("usage") in ("finish", "continuous")) == engine.usage_always
    assert bool(switches.get("timings")) == (engine.timings == "llamacpp")
    assert bool(switches.get("generation_config")) == (engine.exact_length == "generation_config")
