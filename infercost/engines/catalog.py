"""Each inference engine as a benchmark client must know it: names, routes, request fields.

One entry per engine (`ENGINES`), read by everything that talks to an endpoint: the
endpoint check (infercost/endpoints/preflight.py), the tokenizer probe
(workers/loadgen/tokenize.py), the telemetry scraper (infercost/engines/metrics.py holds the
metric names, keyed by the `family` named here), the request body builder
(infercost/engines/requests.py) and the stream reader (infercost/engines/reader.py).
tests/infercost/engines/test_catalog.py fails when two of them disagree about an engine.

What an entry says, read from each engine's own server code (December 2026):

- `aliases`: the names users and servers use for it (lower case), all mapped to `key`;
  `owned_by`: what its `/v1/models` items say in `owned_by`; `server_header`: its `Server`
  response header.
- the server root is the OpenAI base URL without a trailing `/v1` (`server_root`): tokenize,
  metrics, health and version routes sit there on every engine here.
- `tokenize`: its tokenize request forms (route, field, how special tokens are switched),
  the text form first; `metrics_family`: its Prometheus prefix in infercost/engines/metrics.py.
- `exact_length`: how it is told to produce exactly the asked number of tokens:
  "ignore_eos" (with max_tokens), "generation_config" (a JSON string of a GenerationConfig
  with min_new_tokens and max_new_tokens: Hugging Face's `transformers serve`), or "none" (it
  cannot be told: TGI, hosted OpenAI).
- `accepted_fields`: for servers that refuse any request field they do not know (HTTP 422
  from `transformers serve`, 400 from the OpenAI API and TensorRT-LLM), the fields they take;
  None where unknown fields are ignored. The body builder never sends anything else.
- `continuous_usage`: it honours stream_options.continuous_usage_stats (usage on every
  event); `usage_always`: the last event carries usage whether asked or not; `sends_done`:
  its streams end with `data: [DONE]`; `timings`: where its own per-request timings come
  (llama.cpp's `timings` object, TGI's response headers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from infercost.engines.metrics import FAMILY_OF_PREFIX

ExactLength = Literal["ignore_eos", "generation_config", "none"]
Timings = Literal["llamacpp", "tgi-headers"]


@dataclass(frozen=True, slots=True)
class TokenizeForm:
    """One tokenize request: the route (at the server root), the field that carries the text,
    how special tokens (BOS) are switched (`special_key`; None: the server always adds them),
    and whether the body carries chat messages (the server applies its chat template)."""

    engines: tuple[str, ...]
    path: str
    field: str
    special_key: str | None
    chat: bool = False

    def body(self, model: str, text: str, *, special: bool) -> dict[str, Any]:
        """The request body that tokenizes `text` (as a user message for a chat form)."""
        body: dict[str, Any] = {"model": model}
        if self.chat:
            body[self.field] = [{"role": "user", "content": text}]
        else:
            body[self.field] = text
        if self.special_key is not None and not self.chat:
            body[self.special_key] = special
        return body

    @property
    def label(self) -> str:
        """e.g. `/tokenize prompt`."""
        return f"{self.path} {self.field}"


#: vLLM's text form (SGLang answers the same body, also at /v1/tokenize);
#: add_special_tokens defaults to true.
PROMPT: Final = TokenizeForm(("vllm", "sglang"), "/tokenize", "prompt", "add_special_tokens")
#: vLLM's chat form: the chat template applied, as /v1/chat/completions applies it.
MESSAGES: Final = TokenizeForm(("vllm",), "/tokenize", "messages", None, chat=True)
#: llama.cpp's form; add_special defaults to false there.
CONTENT: Final = TokenizeForm(("llamacpp",), "/tokenize", "content", "add_special")
#: TGI's form (a generate body); it always adds the special tokens.
INPUTS: Final = TokenizeForm(("tgi",), "/tokenize", "inputs", None)
#: TGI's chat route: the chat template applied, no special tokens added beyond it.
CHAT_TOKENIZE: Final = TokenizeForm(("tgi",), "/chat_tokenize", "messages", None, chat=True)

#: Every text form, in the order tried for an engine that is not known.
TEXT_FORMS: Final = (PROMPT, CONTENT, INPUTS)
#: The chat form served beside a text form.
CHAT_FORMS: Final = {PROMPT: MESSAGES, INPUTS: CHAT_TOKENIZE}

#: The request fields of an OpenAI chat or completion request (openai-python's
#: CompletionCreateParams, 2026), which strict servers accept.
OPENAI_FIELDS: Final = frozenset(
    {
        "messages", "model", "audio", "frequency_penalty", "function_call", "functions",
        "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata",
        "modalities", "moderation", "n", "parallel_tool_calls", "prediction",
        "presence_penalty", "prompt_cache_key", "prompt_cache_options",
        "prompt_cache_retention", "reasoning_effort", "response_format", "safety_identifier",
        "seed", "service_tier", "stop", "store", "stream", "stream_options", "temperature",
        "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity",
        "web_search_options",
        # the legacy completions route
        "prompt", "best_of", "echo", "suffix",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Engine:
    """What infercost knows about one engine (see the module docstring)."""

    key: str
    title: str
    aliases: tuple[str, ...]
    owned_by: tuple[str, ...] = ()
    server_header: tuple[str, ...] = ()
    tokenize: tuple[TokenizeForm, ...] = ()
    metrics_family: str | None = None
    exact_length: ExactLength = "ignore_eos"
    accepted_fields: frozenset[str] | None = None
    continuous_usage: bool = False
    usage_always: bool = False
    sends_done: bool = True
    reasoning_fields: tuple[str, ...] = ()
    timings: Timings | None = None
    #: Another engine whose routes and metric names it serves (NIM 2.x is vLLM).
    like: str | None = None
    note: str = ""

    def refuses(self, name: str) -> bool:
        """Whether a request carrying field `name` is refused by this engine."""
        return self.accepted_fields is not None and name not in self.accepted_fields


ENGINES: Final[dict[str, Engine]] = {
    e.key: e
    for e in (
        Engine(
            "vllm",
            "vLLM",
            ("vllm",),
            owned_by=("vllm",),
            tokenize=(PROMPT, MESSAGES),
            metrics_family="vllm",
            continuous_usage=True,
            reasoning_fields=("reasoning", "reasoning_content"),
            note="unknown request fields are accepted and logged as ignored",
        ),
        Engine(
            "sglang",
            "SGLang",
            ("sglang",),
            owned_by=("sglang",),
            tokenize=(PROMPT,),
            metrics_family="sglang",
            reasoning_fields=("reasoning_content",),
            note="also serves POST /v1/tokenize; validation errors are 400, not 422",
        ),
        Engine(
            "tgi",
            "Hugging Face TGI",
            ("tgi", "text-generation-inference", "text-generation-router"),
            tokenize=(INPUTS, CHAT_TOKENIZE),
            metrics_family="tgi",
            exact_length="none",
            timings="tgi-headers",
            note="always builds ignore_eos_token false; owned_by is the model id",
        ),
        Engine(
            "llamacpp",
            "llama.cpp llama-server",
            ("llamacpp", "llama.cpp", "llama-cpp", "llama_cpp", "llama-server"),
            owned_by=("llamacpp",),
            server_header=("llama.cpp",),
            tokenize=(CONTENT,),
            metrics_family="llamacpp",
            reasoning_fields=("reasoning_content",),
            timings="llamacpp",
            note="n_predict falls back to max_tokens; closes kept-alive connections at will",
        ),
        Engine(
            "trtllm",
            "TensorRT-LLM trtllm-serve",
            ("trtllm", "trtllm-serve", "tensorrt-llm", "tensorrt_llm"),
            owned_by=("tensorrt_llm",),
            accepted_fields=OPENAI_FIELDS
            | {"ignore_eos", "min_tokens", "top_k", "min_p", "repetition_penalty"},
            reasoning_fields=("reasoning_content", "reasoning"),
            note="no tokenize route; Prometheus at /prometheus/metrics only with perf metrics",
        ),
        Engine(
            "nim",
            "NVIDIA NIM",
            ("nim", "nvidia-nim"),
            tokenize=(PROMPT, MESSAGES),
            metrics_family="vllm",
            continuous_usage=True,
            reasoning_fields=("reasoning", "reasoning_content"),
            like="vllm",
            note="NIM 2.x serves vLLM's routes; metrics at /v1/metrics",
        ),
        Engine(
            "transformers",
            "Hugging Face transformers serve",
            ("transformers", "transformers-serve", "transformers serve", "hf-transformers"),
            exact_length="generation_config",
            accepted_fields=OPENAI_FIELDS | {"generation_config"},
            usage_always=True,
            sends_done=False,
            note=(
                "HTTP 422 for any field beyond the OpenAI ones and generation_config; no "
                "tokenize or metrics route; the last event carries usage; no [DONE]"
            ),
        ),
        Engine(
            "openai",
            "OpenAI API",
            ("openai", "openai-api"),
            owned_by=("openai", "system"),
            exact_length="none",
            accepted_fields=OPENAI_FIELDS,
            note="400 'Unrecognized request argument supplied' for unknown fields",
        ),
    )
}

_BY_ALIAS: Final[dict[str, str]] = {
    alias: engine.key for engine in ENGINES.values() for alias in (engine.key, *engine.aliases)
}


def engine_key(name: str | None) -> str | None:
    """The catalog key of an engine from any name users or servers give it (`llama.cpp`,
    `text-generation-inference`, `vLLM`...), or None for a name infercost does not know."""
    if not name:
        return None
    return _BY_ALIAS.get(name.strip().lower())


def engine_of(name: str | None) -> Engine | None:
    """The catalog entry for a name (see `engine_key`), or None."""
    key = engine_key(name)
    return None if key is None else ENGINES[key]


def same_engine(a: str | None, b: str | None) -> bool:
    """Whether two names are one engine, counting an engine that serves another's routes
    (NIM is vLLM) as that one."""
    ea, eb = engine_of(a), engine_of(b)
    if ea is None or eb is None:
        return False
    return (ea.like or ea.key) == (eb.like or eb.key)


def engine_by_owner(owned_by: str | None) -> str | None:
    """The engine a `/v1/models` item's `owned_by` names, or None."""
    if not owned_by:
        return None
    value = owned_by.strip().lower()
    for engine in ENGINES.values():
        if value in engine.owned_by:
            return engine.key
    return engine_key(value)


def engine_by_server_header(server: str | None) -> str | None:
    """The engine a `Server` response header names (`llama.cpp`), or None."""
    if not server:
        return None
    name = server.split("/")[0].strip().lower()
    for engine in ENGINES.values():
        if name in engine.server_header:
            return engine.key
    return engine_key(name)


def engine_by_metric(name: str) -> str | None:
    """The engine a Prometheus metric name comes from, by its family's prefix, or None."""
    for prefix, family in FAMILY_OF_PREFIX.items():
        if name.startswith(prefix) and family in ENGINES:
            return family
    return None


def server_root(base_url: str) -> str:
    """The server root: the OpenAI base URL without a trailing `/v1` (where every engine
    serves tokenize, metrics, health and version)."""
    return base_url.rstrip("/").removesuffix("/v1")


def text_forms(engine: str | None) -> tuple[TokenizeForm, ...]:
    """The tokenize text forms to try, the named engine's own first."""
    known = engine_of(engine)
    own = [f for f in (known.tokenize if known else ()) if not f.chat]
    return (*own, *(f for f in TEXT_FORMS if f not in own))


def tokenize_candidates(base_url: str, engine: str | None) -> list[tuple[TokenizeForm, str, str]]:
    """(text form, URL, path shown) to try for an endpoint's tokenizer: each form (the
    declared engine's first) at the server root and then under the base URL's own path
    (`/v1`, where SGLang also serves it)."""
    root = server_root(base_url)
    base = base_url.rstrip("/")
    prefixes = [("", root)]
    if base != root:
        prefixes.append((base[len(root) :] if base.startswith(root) else "/v1", base))
    return [
        (form, prefix + form.path, shown + form.path)
        for form in text_forms(engine)
        for shown, prefix in prefixes
    ]
