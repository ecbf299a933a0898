"""Preflight: probe a registered endpoint in a few seconds, before a job finds out the hard way.

One check sends a handful of small requests, most of them at once, and says per probe
whether it passed, failed or deserves a warning:

- reachable: a TCP connection to the base URL's host and port;
- openai_route: `{base_url}/models` or the chat/completions route answers (a bare URL that
  404s while `{base_url}/v1/models` answers gets the `/v1` suggestion);
- model: the model is served (what `/models` lists when it is not);
- streaming: a 4-token streamed request, built as a job builds its requests (the same body
  builder, infercost/engines/requests.py, with a job's defaults: exact lengths asked the
  declared engine's way), answers with content and a proper end, judged by the job's own
  stream reader (infercost/engines/reader.py), so a check and a job never judge one server
  differently; a refusal is explained as a job's is (infercost/engines/diagnosis.py): a
  request field the server refuses is named, and the request is sent again without it to
  say whether the rest would do;
- stream_usage: that stream carries `usage` (asked with stream_options.include_usage);
- tokenizer: an engine's tokenize route counts a text (the forms of
  infercost/engines/catalog.py, at the server root and under /v1, as the worker's probe tries
  them);
- engine: which engine it looks like, from /models `owned_by`, /version, /props, /info,
  response headers, metric names, the tokenize form and the wording of a refusal, against
  the declared one;
- metrics: each metrics URL answers Prometheus text with series infercost maps
  (infercost/engines/metrics.py); without any, whether `{root}/metrics` would.

A failed reachable, openai_route, model or streaming probe fails the check (`ok` false),
since a job would fail the same way; the others only warn. Every connection goes through
the outbound policy (infercost/net/outbound.py): the name resolved, each address checked and
the request pinned to it. Of what an endpoint answers only its status, content type, size
and the message of a JSON error (cut short) are kept, never an HTML or other page, and the
whole result passes the endpoint's redactor (infercost/net/redact.py) before it is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

import httpx
import msgspec

from infercost.engines import catalog
from infercost.engines.diagnosis import body_text, http_diagnosis, refused_fields, server_message
from infercost.engines.metrics import FAMILY_PREFIXES, lookup
from infercost.engines.reader import RawRequest, RequestFailure, StreamReader
from infercost.engines.requests import JOB_DEFAULTS, generation_body
from infercost.errors import Conflict
from infercost.net.outbound import OutboundRefused, Policy, pinned
from infercost.net.redact import Redactor
from infercost.net.tls import tls_context
from infercost.telemetry.scrape import parse_text

Status = Literal["pass", "warn", "fail", "skip"]

#: Seconds the whole check may take; probes still out by then are reported as timed out.
CHECK_DEADLINE_S: Final = 4.5
#: Seconds one small request may take.
REQUEST_TIMEOUT_S: Final = 3.0
#: Bytes of a streamed answer read at most (4 tokens need far fewer).
MAX_STREAM_BYTES: Final = 256 * 1024
#: Bytes of any other answer read at most.
MAX_BODY_BYTES: Final = 1024 * 1024
#: Characters of an endpoint's own words kept in a detail.
EXCERPT_CHARS: Final = 160
#: Probes whose failure fails the check: a job would fail the same way.
BLOCKING: Final = ("reachable", "openai_route", "model", "streaming")
#: The order probes are reported in.
ORDER: Final = (*BLOCKING, "stream_usage", "tokenizer", "engine", "metrics")
PROBE_TEXT: Final = "Say hello in one word."


def engine_name(value: str | None) -> str | None:
    """The catalog name of an engine (vllm, sglang, llamacpp, tgi, transformers...) for a
    server's or user's name (infercost/engines/catalog.py)."""
    return catalog.engine_key(value)


def server_root(base_url: str) -> str:
    """The server root: the OpenAI base URL without a trailing `/v1`."""
    return catalog.server_root(base_url)


@dataclass(frozen=True, slots=True)
class Target:
    """What to check: the endpoint as registered (the key decrypted, never stored here)."""

    base_url: str
    model: str
    api: str = "openai-chat"
    engine: str | None = None
    api_key: str | None = None
    metrics_urls: tuple[str, ...] = ()


@dataclass(slots=True)
class Probe:
    """One probe's outcome; `detail` says in a sentence what was seen and what to do."""

    name: str
    status: Status
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The stored and returned shape."""
        return {"name": self.name, "status": self.status, "detail": self.detail, **self.data}


class _Failed(Exception):
    """A request that got no HTTP answer; the message is the user-facing reason."""


@dataclass(slots=True)
class Answer:
    """An HTTP answer, its body read up to a bound."""

    status: int
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def content_type(self) -> str | None:
        """The answer's media type, without parameters."""
        return self.headers.get("content-type", "").split(";")[0].strip() or None

    def problem(self) -> str:
        """The server's error message where it sent a JSON error (cut short), else its body
        described, never quoted (infercost/engines/diagnosis.py)."""
        return server_message(self.body, EXCERPT_CHARS, self.content_type)


def _connect_reason(exc: BaseException) -> str:
    """Why a connection failed, in words (never a driver's repr)."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, socket.gaierror):
            return "host name not found"
        current = current.__cause__ or current.__context__
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "host name not found"
    return "could not connect"


class Prober:
    """Sends the check's requests through the outbound policy, each bounded in time and size."""

    def __init__(self, client: httpx.AsyncClient, policy: Policy, target: Target) -> None:
        self.client = client
        self.policy = policy
        self.target = target

    def _auth(self) -> dict[str, str]:
        key = self.target.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def send(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        auth: bool = True,
        field_name: str = "base_url",
        limit: int = MAX_BODY_BYTES,
    ) -> Answer:
        """One request to a checked address; _Failed says why there was no answer."""
        try:
            addresses = await self.policy.check_connect(url, field_name)
        except OutboundRefused as exc:
            errors = exc.extra.get("errors") or [{}]
            message = str(errors[0].get("message", "not allowed"))
            raise _Failed(f"refused by the outbound policy: {message}") from None
        except socket.gaierror:
            raise _Failed("host name not found") from None
        except (OSError, ValueError, UnicodeError):
            raise _Failed("not a valid http(s) URL") from None
        target = pinned(url, addresses[0])
        headers = {**target.headers, "User-Agent": "infercost-preflight"}
        if auth:
            headers.update(self._auth())
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            async with self.client.stream(
                method,
                target.url,
                content=content,
                headers=headers,
                timeout=REQUEST_TIMEOUT_S,
                follow_redirects=False,
                extensions=target.extensions,
            ) as response:
                data = bytearray()
                async for chunk in response.aiter_raw():
                    data += chunk
                    if len(data) >= limit:
                        break
                return Answer(response.status_code, response.headers, bytes(data[:limit]))
        except httpx.ConnectError as exc:
            raise _Failed(_connect_reason(exc)) from None
        except httpx.TimeoutException:
            raise _Failed(f"no answer within {REQUEST_TIMEOUT_S:g} s") from None
        except httpx.HTTPError as exc:
            raise _Failed(f"the connection broke ({type(exc).__name__})") from None


def read_stream(body: bytes, content_type: str | None = None) -> RawRequest:
    """A streamed answer as a job's reader reads it: the request's observations, with
    `error_class` and `error` set as a job's request would have them when it failed."""
    rec = RawRequest(0, False, 0, 0, keep_text=True)
    reader = StreamReader(rec, content_type=content_type)
    try:
        reader.feed(body, 1)
        reader.finish(1)
        if not rec.chunk_ns:
            raise RequestFailure("empty", "the response carried no tokens")
    except RequestFailure as failure:
        rec.error_class, rec.error = failure.error_class, failure.reason
    return rec


@dataclass(slots=True)
class _Findings:
    """What the concurrent requests brought back, before it is judged."""

    models: Answer | None = None
    models_error: str | None = None
    v1_models: Answer | None = None
    stream: Answer | None = None
    stream_error: str | None = None
    # The request fields the server refused, and its answer to the request without them.
    refused: tuple[str, ...] = ()
    without_refused: Answer | None = None
    tokenizer: str | None = None
    tokenizer_tried: list[str] = field(default_factory=list)
    engine_clues: dict[str, str] = field(default_factory=dict)
    engine_version: str | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    root_metrics: dict[str, Any] | None = None


def _token_count(answer: Any) -> int | None:
    """The token count in any engine's tokenize answer, or None."""
    if isinstance(answer, list):
        return len(answer)
    if isinstance(answer, dict):
        count = answer.get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        if isinstance(answer.get("tokens"), list):
            return len(answer["tokens"])
    return None


def _metric_names(text: str) -> set[str] | None:
    """The sample names of Prometheus text, or None when it is not Prometheus text."""
    try:
        return {s.metric for s in parse_text(text)}
    except ValueError:
        return None


class Check:
    """One preflight check of one target."""

    def __init__(self, prober: Prober) -> None:
        self.prober = prober
        self.target = prober.target
        self.base = self.target.base_url.rstrip("/")
        self.root = server_root(self.base)
        self.found = _Findings()

    async def _models(self) -> None:
        try:
            self.found.models = await self.prober.send("GET", f"{self.base}/models")
        except _Failed as exc:
            self.found.models_error = str(exc)
            return
        if self.found.models.status == 404 and not self.base.endswith("/v1"):
            with contextlib.suppress(_Failed):
                self.found.v1_models = await self.prober.send("GET", f"{self.base}/v1/models")
        models = self.found.models.json() if self.found.models.status == 200 else None
        data = models.get("data") if isinstance(models, dict) else None
        for item in data if isinstance(data, list) else []:
            owned_by = str(item.get("owned_by")) if isinstance(item, dict) else None
            owner = catalog.engine_by_owner(owned_by)
            if owner:
                self.found.engine_clues["/models owned_by"] = owner

    def _probe_body(self, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        """The check's 4-token request: a job's body at a job's defaults (less `drop`)."""
        body: dict[str, Any] = msgspec.json.decode(
            generation_body(
                api=self.target.api,
                model=self.target.model,
                engine=self.target.engine,
                prompt=PROBE_TEXT,
                max_tokens=4,
                stream=JOB_DEFAULTS["stream"],
                exact_length=JOB_DEFAULTS["ignore_eos"],
                temperature=JOB_DEFAULTS["temperature"],
            )
        )
        return {k: v for k, v in body.items() if k not in drop}

    async def _stream(self) -> None:
        chat = self.target.api == "openai-chat"
        path = "/chat/completions" if chat else "/completions"
        try:
            answer = await self.prober.send(
                "POST", self.base + path, body=self._probe_body(), limit=MAX_STREAM_BYTES
            )
        except _Failed as exc:
            self.found.stream_error = str(exc)
            return
        self.found.stream = answer
        name = catalog.engine_by_server_header(answer.headers.get("server"))
        if name:
            self.found.engine_clues["Server header"] = name
        if 400 <= answer.status < 500:
            refused, wording = refused_fields(body_text(answer.body))
            if wording:
                self.found.engine_clues["refusal wording"] = wording
            if refused:
                # Would the rest of a job's request do? The same request without them.
                self.found.refused = refused
                with contextlib.suppress(_Failed):
                    self.found.without_refused = await self.prober.send(
                        "POST",
                        self.base + path,
                        body=self._probe_body(refused),
                        limit=MAX_STREAM_BYTES,
                    )

    async def _tokenizer(self) -> None:
        """The catalog's tokenize forms, as the worker's tokenizer probe tries them."""
        declared = engine_name(self.target.engine)
        for form, url, path in catalog.tokenize_candidates(self.base, self.target.engine):
            engine = declared if declared in form.engines else form.engines[0]
            body = form.body(self.target.model, PROBE_TEXT, special=False)
            try:
                answer = await self.prober.send("POST", url, body=body)
            except _Failed as exc:
                self.found.tokenizer_tried.append(f"{path} {form.field}: {exc}")
                return  # the server is not answering: no other form will do better
            count = _token_count(answer.json()) if answer.status == 200 else None
            if count:
                self.found.tokenizer = f"{engine}:{path} {form.field}"
                self.found.engine_clues.setdefault("tokenize form", engine)
                return
            self.found.tokenizer_tried.append(f"{path} {form.field}: HTTP {answer.status}")

    async def _identity(self) -> None:
        """/version (vLLM, SGLang answer it), /props (llama.cpp), /info (TGI)."""

        async def get(path: str) -> Any:
            try:
                answer = await self.prober.send("GET", self.root + path)
            except _Failed:
                return None
            return answer.json() if answer.status == 200 else None

        version, props, info = await asyncio.gather(get("/version"), get("/props"), get("/info"))
        if isinstance(info, dict) and "router" in info:
            self.found.engine_clues["/info router"] = engine_name(str(info["router"])) or "tgi"
            if isinstance(info.get("version"), str):
                self.found.engine_version = info["version"][:64]
        if isinstance(props, dict) and (
            "default_generation_settings" in props or "build_info" in props
        ):
            self.found.engine_clues["/props"] = "llamacpp"
            if isinstance(props.get("build_info"), str):
                self.found.engine_version = props["build_info"][:64]
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            self.found.engine_version = self.found.engine_version or version["version"][:64]

    async def _scrape(self, url: str, field_name: str) -> dict[str, Any]:
        """One metrics URL: whether it answered Prometheus text, and how many known series."""
        row: dict[str, Any] = {"url": url, "known_series": 0, "error": None}
        try:
            answer = await self.prober.send("GET", url, auth=False, field_name=field_name)
        except _Failed as exc:
            row["error"] = str(exc)
            return row
        if answer.status != 200:
            row["error"] = f"HTTP {answer.status}"
            return row
        names = _metric_names(answer.body.decode("utf-8", "replace"))
        if names is None:
            row["error"] = "not Prometheus text"
            return row
        known = sorted(n for n in names if lookup(n) is not None)
        row["known_series"] = len(known)
        for name in names:
            engine = catalog.engine_by_metric(name)
            if engine is not None:
                self.found.engine_clues["metric names"] = engine
                break
        if not known and any(n.startswith(FAMILY_PREFIXES) for n in names):
            row["error"] = "an engine's metrics, none of them mapped by this version"
        return row

    async def _metrics(self) -> None:
        urls = self.target.metrics_urls
        if urls:
            self.found.metrics = list(
                await asyncio.gather(
                    *(self._scrape(u, f"metrics_urls[{i}]") for i, u in enumerate(urls))
                )
            )
        else:
            self.found.root_metrics = await self._scrape(self.root + "/metrics", "base_url")

    async def gather(self, deadline_s: float) -> list[str]:
        """Run the requests at once; the names of those cut by the deadline."""
        parts = {
            "models": self._models(),
            "stream": self._stream(),
            "tokenizer": self._tokenizer(),
            "identity": self._identity(),
            "metrics": self._metrics(),
        }
        tasks = {name: asyncio.ensure_future(coro) for name, coro in parts.items()}
        _, pending = await asyncio.wait(tasks.values(), timeout=deadline_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return [name for name, task in tasks.items() if task in pending]

    # -- judging

    def judge(self, cut: list[str]) -> list[Probe]:
        """Each probe's verdict from what came back."""
        f = self.found
        probes: dict[str, Probe] = {}
        unreachable = f.models_error if f.models is None else None
        if unreachable is None and f.stream is None and f.stream_error:
            unreachable = f.stream_error
        if unreachable is not None and f.models is None and f.stream is None:
            probes["reachable"] = Probe(
                "reachable",
                "fail",
                f"{self.base}: {unreachable}; check the host and port, and that the server runs",
            )
            for name in ORDER[1:]:
                probes[name] = Probe(name, "skip", "not tried: the server is not reachable")
            return [probes[n] for n in ORDER]
        probes["reachable"] = Probe("reachable", "pass", f"connected to {self.root}")
        served = self._served_models()
        self._judge_route(probes, served)
        self._judge_stream(probes, served, "stream" in cut)
        self._judge_extras(probes, cut)
        return [probes[n] for n in ORDER]

    def _served_models(self) -> list[str] | None:
        f = self.found
        if f.models is None or f.models.status != 200:
            return None
        body = f.models.json()
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            return None
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]

    def _judge_route(self, probes: dict[str, Probe], served: list[str] | None) -> None:
        f = self.found
        stream_status = f.stream.status if f.stream is not None else None
        if f.v1_models is not None and f.v1_models.status == 200 and stream_status in (404, None):
            suggestion = self.base + "/v1"
            probes["openai_route"] = Probe(
                "openai_route",
                "fail",
                f"{self.base}/models answers 404 but {suggestion}/models answers: set base_url "
                f"to {suggestion}",
                {"suggested_base_url": suggestion},
            )
        elif f.models is not None and f.models.status in (401, 403):
            probes["openai_route"] = Probe(
                "openai_route",
                "fail",
                f"the server refused the request (HTTP {f.models.status}: {f.models.problem()}): "
                "set the endpoint's api_key",
            )
        elif served is not None or (stream_status is not None and stream_status != 404):
            probes["openai_route"] = Probe(
                "openai_route", "pass", f"{self.base} answers the OpenAI API"
            )
        elif stream_status == 404 and served is None:
            probes["openai_route"] = Probe(
                "openai_route",
                "fail",
                f"{self.base} has no OpenAI routes (HTTP 404 for /models and the completions "
                "route): base_url should end where /chat/completions begins, often with /v1",
            )
        else:
            probes["openai_route"] = Probe(
                "openai_route",
                "warn",
                f"{self.base}/models did not answer with a model list"
                + (f" ({f.models_error})" if f.models_error else ""),
            )

    def _judge_stream(
        self, probes: dict[str, Probe], served: list[str] | None, timed_out: bool
    ) -> None:
        f = self.found
        model = self.target.model
        listed = served is not None and model in served
        offer = {"served_models": served} if served is not None else {}
        if probes["openai_route"].status == "fail":
            for name in ("model", "streaming", "stream_usage"):
                probes[name] = Probe(name, "skip", "not tried: the OpenAI route does not answer")
            return
        answer = f.stream
        if answer is None or answer.status != 200:
            self._judge_refused(probes, served, timed_out)
            return
        if listed:
            probes["model"] = Probe("model", "pass", f"'{model}' is served", offer)
        elif served is not None:
            probes["model"] = Probe(
                "model",
                "warn",
                f"'{model}' answered although /models lists only: {', '.join(served)} (some "
                "servers accept any name for the one model they serve)",
                offer,
            )
        else:
            probes["model"] = Probe("model", "pass", f"'{model}' answered a request", offer)
        kind = answer.headers.get("content-type", "").split(";")[0].strip() or None
        seen = read_stream(answer.body, kind)
        if seen.error_class is not None:
            probes["streaming"] = Probe(
                "streaming",
                "fail",
                f"a job's request would fail ({seen.error_class}): {seen.error}",
                {"error_class": seen.error_class},
            )
        else:
            probes["streaming"] = Probe(
                "streaming", "pass", f"{len(seen.chunk_ns)} content events, then the end"
            )
        if seen.count_source == "usage":
            probes["stream_usage"] = Probe(
                "stream_usage", "pass", f"usage in the stream ({seen.n_out} output tokens)"
            )
        else:
            probes["stream_usage"] = Probe(
                "stream_usage",
                "warn",
                "no usage in the stream with stream_options.include_usage: output tokens are "
                "counted by the tokenizer route or estimated, not the server's own count",
            )

    def _judge_refused(
        self, probes: dict[str, Probe], served: list[str] | None, timed_out: bool
    ) -> None:
        """The model and streaming probes when the streamed request got no 200."""
        f = self.found
        answer = f.stream
        model = self.target.model
        listed = served is not None and model in served
        offer = {"served_models": served} if served is not None else {}
        diagnosis = (
            None
            if answer is None
            else http_diagnosis(
                answer.status,
                answer.body,
                engine=self.target.engine,
                model=model,
                content_type=answer.content_type,
            )
        )
        why = (
            f"no answer within {CHECK_DEADLINE_S:g} s"
            if timed_out
            else (f.stream_error or "")
            if diagnosis is None
            else diagnosis.reason
        )
        model_refused = (
            answer is not None
            and answer.status in (400, 404)
            and not listed
            and not f.refused
            and (served is not None or diagnosis is None or diagnosis.kind == "model")
        )
        if (served is not None and not listed) or model_refused:
            names = ", ".join(served or []) or "none listed"
            said = "" if answer is None else f"HTTP {answer.status}: {answer.problem()}"
            probes["model"] = Probe(
                "model",
                "fail",
                f"'{model}' is not served here ({said or why}); /models lists: {names}",
                offer,
            )
        else:
            probes["model"] = Probe(
                "model",
                "pass" if listed else "warn",
                f"'{model}' is listed by /models"
                if listed
                else f"/models gave no list to check '{model}' against",
                offer,
            )
        if probes["model"].status == "fail":
            probes["streaming"] = Probe("streaming", "skip", "not tried: the model is not served")
        elif f.refused:
            probes["streaming"] = self._refusal_probe(why)
        else:
            probes["streaming"] = Probe(
                "streaming", "fail", f"a 4-token streamed request failed: {why}"
            )
        probes["stream_usage"] = Probe("stream_usage", "skip", "not tried: no stream")

    def _refusal_probe(self, why: str) -> Probe:
        """The streaming probe when the server refused fields of a job's request: it fails
        (every request of a job would), and says whether the request without them streams."""
        f = self.found
        retry = f.without_refused
        data: dict[str, Any] = {"refused_fields": list(f.refused)}
        them = "it" if len(f.refused) == 1 else "them"
        if retry is None:
            after = f"the request without {them} got no answer"
        elif retry.status != 200:
            after = f"without {them} the server still answered HTTP {retry.status}"
        else:
            kind = retry.headers.get("content-type", "").split(";")[0].strip() or None
            seen = read_stream(retry.body, kind)
            after = (
                f"without {them} it streams"
                if seen.error_class is None
                else f"without {them} the stream fails too ({seen.error})"
            )
        return Probe(
            "streaming", "fail", f"every request of a job would fail: {why}; {after}", data
        )

    def _judge_extras(self, probes: dict[str, Probe], cut: list[str]) -> None:
        f = self.found
        if f.tokenizer:
            probes["tokenizer"] = Probe(
                "tokenizer",
                "pass",
                f"{f.tokenizer} counts tokens: prompts of exact length",
                {"form": f.tokenizer},
            )
        else:
            tried = "; ".join(f.tokenizer_tried) or "cut by the deadline"
            probes["tokenizer"] = Probe(
                "tokenizer",
                "warn",
                f"no tokenize route answered ({tried}): prompt lengths will be approximate",
            )
        self._judge_engine(probes)
        self._judge_metrics(probes, "metrics" in cut)

    def _judge_engine(self, probes: dict[str, Probe]) -> None:
        f = self.found
        clues = f.engine_clues
        votes: dict[str, float] = {}
        for clue, engine in clues.items():
            # vLLM and SGLang answer the same tokenize body: the weakest clue.
            votes[engine] = votes.get(engine, 0.0) + (0.5 if clue == "tokenize form" else 1.0)
        guess = max(votes, key=lambda e: votes[e]) if votes else None
        declared = engine_name(self.target.engine)
        data: dict[str, Any] = {
            "guess": guess,
            "version": f.engine_version,
            "evidence": [f"{k}: {v}" for k, v in clues.items()],
        }
        if guess is None:
            probes["engine"] = Probe(
                "engine",
                "warn" if declared is None else "pass",
                "no engine recognised from its routes, headers or metric names"
                + ("" if declared is None else f"; declared: {self.target.engine}"),
                data,
            )
        elif declared is not None and not catalog.same_engine(declared, guess):
            probes["engine"] = Probe(
                "engine",
                "warn",
                f"declared {self.target.engine}, but it looks like {guess} "
                f"({'; '.join(data['evidence'])}): fix the endpoint's engine",
                data,
            )
        else:
            probes["engine"] = Probe(
                "engine",
                "pass",
                f"looks like {guess} ({'; '.join(data['evidence'])})"
                + ("" if declared else ": set engine to it"),
                data,
            )

    def _judge_metrics(self, probes: dict[str, Probe], timed_out: bool) -> None:
        f = self.found
        if f.metrics:
            bad = [m for m in f.metrics if m["error"] or not m["known_series"]]
            known = sum(m["known_series"] for m in f.metrics)
            rows = {"urls": f.metrics}
            if bad:
                reasons = "; ".join(
                    f"{m['url']}: {m['error'] or 'no series infercost maps'}" for m in bad
                )
                probes["metrics"] = Probe("metrics", "warn", reasons, rows)
            else:
                probes["metrics"] = Probe(
                    "metrics", "pass", f"{known} known series across {len(f.metrics)} URL(s)", rows
                )
            return
        root = f.root_metrics
        if root is not None and root["known_series"]:
            probes["metrics"] = Probe(
                "metrics",
                "warn",
                f"no metrics_urls, but {root['url']} answers {root['known_series']} known series: "
                "add it to metrics_urls for KV cache and queue figures",
                {"suggested_metrics_url": root["url"]},
            )
        else:
            probes["metrics"] = Probe(
                "metrics",
                "skip" if not timed_out else "warn",
                "no metrics_urls registered (runs will carry no server telemetry)",
            )


async def run_check(
    target: Target, policy: Policy, *, deadline_s: float = CHECK_DEADLINE_S
) -> dict[str, Any]:
    """Probe `target` within about `deadline_s` seconds and return the stored check:
    `{"ok", "summary", "duration_ms", "probes": [...], "engine", "engine_version",
    "suggested_base_url", "served_models"}`. Never raises for what the endpoint does."""
    started = time.monotonic()
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=4)
    async with httpx.AsyncClient(limits=limits, trust_env=False, verify=tls_context()) as client:
        check = Check(Prober(client, policy, target))
        cut = await check.gather(deadline_s)
    probes = check.judge(cut)
    result = _result(probes, check.found, time.monotonic() - started)
    # Every word of it passes the endpoint's redactor before it is stored or returned: an
    # upstream may echo the key it was sent (infercost/net/redact.py).
    redacted: dict[str, Any] = Redactor.for_endpoint(target.api_key).data(result)
    return redacted


def _result(probes: list[Probe], found: _Findings, elapsed_s: float) -> dict[str, Any]:
    failed = [p for p in probes if p.status == "fail"]
    warned = [p for p in probes if p.status == "warn"]
    extra: dict[str, Any] = {}
    for p in probes:
        extra.update(p.data)
    if failed:
        summary = "; ".join(f"{p.name}: {p.detail}" for p in failed)
    elif warned:
        summary = f"ready, with {len(warned)} warning(s): " + ", ".join(p.name for p in warned)
    else:
        summary = "ready: every probe passed"
    return {
        "ok": not failed,
        "summary": summary,
        "duration_ms": round(elapsed_s * 1000.0, 1),
        "probes": [p.to_json() for p in probes],
        "engine": extra.get("guess"),
        "engine_version": found.engine_version,
        "suggested_base_url": extra.get("suggested_base_url"),
        "served_models": extra.get("served_models"),
    }


def refuse_if_failed(
    endpoint_id: object, name: str, check: Mapping[str, Any] | None, checked_at: datetime | None
) -> None:
    """Conflict (409) when the endpoint's last check failed: a job would fail the same way.
    Jobs may override with `"force": true`."""
    if not check or check.get("ok", True):
        return
    when = f" at {checked_at.strftime('%Y-%m-%d %H:%M:%S')} UTC" if checked_at else ""
    raise Conflict(
        f"endpoint '{name}' failed its last check{when}: {check.get('summary')}. Fix it and "
        f"check again (POST /v1/endpoints/{endpoint_id}/check, or `infercost endpoints check "
        f'{name}`), or send "force": true with the job to submit it anyway'
    )
