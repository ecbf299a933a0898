"""Why a request failed, in words a person can act on: the same sentence from the endpoint
check (infercost/endpoints/preflight.py) and from a job's failed requests
(workers/loadgen/stream.py, whose reason becomes the job's error when every request fails).

It reads the server's own message out of the error shapes engines use (OpenAI's
`{"error": {"message"}}`, FastAPI's `{"detail"}`, TGI's `{"error": "..."}`, a bare
`{"message"}`) and recognises the refusals a benchmark meets first: request fields the
server does not take (Hugging Face `transformers serve`: HTTP 422 "Unexpected fields in the
request: {'ignore_eos'}"; the OpenAI API: 400 "Unrecognized request argument supplied:
ignore_eos"; pydantic's extra_forbidden from TensorRT-LLM; serde's "unknown field"), a
missing or wrong key, a model that is not served, and TLS spoken to a plain HTTP port or the
reverse.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from infercost.engines.catalog import ENGINES, engine_of

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]+")
#: Patterns naming refused fields, each with the engine whose wording it is (None: several).
_REFUSALS: Final = (
    (re.compile(r"Unexpected (?:fields|keys) in the request: \{([^}]*)\}"), "transformers"),
    (re.compile(r"Unsupported fields in the request: \{([^}]*)\}"), "transformers"),
    (re.compile(r"Unrecognized request arguments? supplied: ([\w, ]+)"), "openai"),
    (re.compile(r"unknown field `(\w+)`"), None),
    (re.compile(r"(\w+)\s+Extra inputs are not permitted"), None),
)
_FIELD_NAME: Final = re.compile(r"[A-Za-z_][\w.-]{0,63}")
_QUOTED: Final = re.compile(r"'([^']+)'|\"([^\"]+)\"|(\w+)")


#: Characters of a server's own error message kept (what an OpenAI-style error object says).
MESSAGE_CHARS: Final = 200


def _json_message(body: bytes) -> str | None:  # noqa: PLR0911 - one per error shape
    """The server's own message where the body is a JSON error object: OpenAI's
    error.message, FastAPI's detail, TGI's error string, a bare message; else None."""
    try:
        parsed: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    if "detail" in parsed:
        return _detail_text(parsed["detail"])
    if isinstance(parsed.get("message"), str):
        return str(parsed["message"])
    return None


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} kB"


def describe_body(body: bytes, content_type: str | None = None) -> str:
    """A body that is not quoted, described: its content type and size (an HTML page, say,
    is an internal service's page, which a team must not read back through this one)."""
    if not body.strip():
        return "an empty body"
    kind = _CONTROL.sub("", (content_type or "").split(";")[0].strip().lower())[:64]
    if not kind:
        head = body[:64].lstrip().lower()
        kind = "text/html" if head.startswith((b"<!doctype html", b"<html")) else "unknown"
    what = (
        "an HTML page"
        if "html" in kind
        else "a body that is no JSON error"
        if kind == "unknown"
        else f"a {kind} body"
    )
    return f"{what} of {_size(len(body))}, not quoted"


def server_message(body: bytes, limit: int = MESSAGE_CHARS, content_type: str | None = None) -> str:
    """What may be shown of an error body: where it is a JSON error object, the server's own
    message (cleaned, cut to `limit`); else the body described (`describe_body`), never
    quoted."""
    said = _json_message(body)
    if said is None:
        return describe_body(body, content_type)
    text = _CONTROL.sub(" ", said).strip()
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def body_text(body: bytes) -> str:
    """The words of an error body for recognising a refusal (a refused field's name, a TLS
    port), never shown: the JSON error's message, else the start of the text."""
    said = _json_message(body)
    text = said if said is not None else body[:4096].decode("utf-8", "replace")
    return _CONTROL.sub(" ", text).strip()


def _detail_text(detail: Any) -> str:
    """FastAPI's `detail`: a string, or pydantic's list of errors (each with `loc`, `msg`,
    `type`), written as `field: message`."""
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = item.get("loc") or []
                where = str(loc[-1]) if isinstance(loc, list) and loc else ""
                kind = item.get("type")
                msg = item.get("msg") or kind or ""
                if kind == "extra_forbidden" and where:
                    parts.append(f"{where}\n  Extra inputs are not permitted")
                else:
                    parts.append(f"{where}: {msg}" if where else str(msg))
        return "; ".join(parts)
    return str(detail)


def refused_fields(message: str) -> tuple[tuple[str, ...], str | None]:
    """The request fields a server's message says it refuses, and the engine whose wording
    that is (None when several word it so); ((), None) when it names none."""
    for pattern, engine in _REFUSALS:
        found = pattern.findall(message)
        if not found:
            continue
        names: list[str] = []
        for group in found:
            for quoted in _QUOTED.findall(group):
                name = next(part for part in quoted if part)
                # A field's name, never a run of the server's text.
                if name not in names and _FIELD_NAME.fullmatch(name):
                    names.append(name)
        if names:
            return tuple(names), engine
    return (), None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """An HTTP refusal explained: `reason` says what happened and what to do; `refused`
    names the request fields the server would not take; `kind` is one of refused_field,
    tls, auth, model, route, overloaded, http."""

    reason: str
    kind: str
    refused: tuple[str, ...] = ()


def http_diagnosis(  # noqa: PLR0911 - one answer per kind of refusal
    status: int,
    body: bytes,
    *,
    engine: str | None = None,
    model: str | None = None,
    content_type: str | None = None,
) -> Diagnosis:
    """Why a request got HTTP `status` with `body`, and what to do about it: the server's
    own message where it sent a JSON error, else its body described; refusals are
    recognised from the body's words either way (they are not quoted)."""
    message = body_text(body)
    shown = server_message(body, content_type=content_type)
    said = f"HTTP {status}: {shown}"
    refused, wording = refused_fields(message) if 400 <= status < 500 else ((), None)
    if refused:
        names = ", ".join(f"'{n}'" for n in refused)
        return Diagnosis(
            f"the server refuses the request field{'s' if len(refused) > 1 else ''} {names} "
            f"({said}): {_refusal_advice(refused, engine, wording)}",
            "refused_field",
            refused,
        )
    if status == 400 and "plain http request was sent to https port" in message.lower():
        return Diagnosis(
            f"the server speaks TLS on this port ({said}): use https:// in base_url", "tls"
        )
    if status in (401, 403):
        return Diagnosis(
            f"the server refused the credentials ({said}): set the endpoint's api_key", "auth"
        )
    if status == 404 and model and (model in message or "model" in message.lower()):
        return Diagnosis(
            f"the model '{model}' is not served here ({said}): set the endpoint's model to a "
            "name its /models route lists",
            "model",
        )
    if status == 404:
        return Diagnosis(
            f"{said}: no such route; base_url should end where /chat/completions begins, "
            "often with /v1",
            "route",
        )
    if status in (429, 503):
        return Diagnosis(f"{said}: the server is overloaded or rate-limited", "overloaded")
    return Diagnosis(said, "http")


def _refusal_advice(refused: tuple[str, ...], engine: str | None, wording: str | None) -> str:
    """What to do about refused fields: name the engine whose way of asking for exact
    lengths the server takes, or leave the field out."""
    declared = engine_of(engine)
    length_fields = {"ignore_eos", "min_tokens", "generation_config", "continuous_usage_stats"}
    if declared is not None and declared.accepted_fields is not None:
        return (
            f"infercost sends {declared.title} only the fields it takes; the server does not "
            "behave like one: check the endpoint's engine"
        )
    suggestion = ENGINES.get(wording or "")
    if suggestion is not None and set(refused) & length_fields:
        way = (
            "lengths are then forced with generation_config"
            if suggestion.exact_length == "generation_config"
            else "it cannot be told an exact length, so none is asked"
        )
        return (
            f"the server answers like {suggestion.title}: set the endpoint's engine to "
            f"{suggestion.key} ({way}), or send workload.ignore_eos false"
        )
    if "ignore_eos" in refused:
        return "send workload.ignore_eos false, or set the endpoint's engine"
    return "set the endpoint's engine so infercost sends only what it takes"


def connect_diagnosis(exc: BaseException, base_url: str) -> str | None:
    """A TLS mismatch in words (https:// to a plain HTTP port, or a certificate the system does
    not trust), or None when the failure is something else."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ssl.SSLCertVerificationError):
            return (
                f"the TLS certificate of {base_url} is not trusted ({current.verify_message}): "
                "use a certificate the worker's system trusts"
            )
        if isinstance(current, ssl.SSLError):
            text = str(current).lower()
            if "wrong version number" in text or "record layer" in text or "http request" in text:
                return (
                    f"{base_url} does not speak TLS (a plain HTTP server answered the TLS "
                    "handshake): use http:// in base_url"
                )
            return f"the TLS handshake with {base_url} failed ({current.reason or current})"
        current = current.__cause__ or current.__context__
    return None
