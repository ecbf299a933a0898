"""Records byte-exact answers of a running llama-server into a fixtures folder, for tests that
parse what a real llama.cpp sends (tests/fixtures/engines/llamacpp/). Called by llamacpp.py
--fixtures DIR; every exchange goes over a raw loopback socket so nothing is re-encoded.

Files: `*.json` / `*.sse` / `*.prom` hold a response body exactly as sent (chunked transfer
coding removed); `*.http` hold the whole response, status line and headers included.
README.md lists the build, the date, and each file's request and status.

Structured output (workload.features "structured") is asked for as infercost's workers ask
(infercost.engines.requests.generation_body with infercost.workload.tools.response_format),
from a second server started with TEMPLATE as its chat template: the model has none, and
llama.cpp's ChatML fallback breaks every response_format request (error-json-schema-chatml.http,
from the first server). Each structured answer is checked against its schema here and the
verdict written into README.md.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator

sys.path.insert(
    0, str(Path(__file__).resolve().parents[2])
)  # the requests as infercost builds them
from infercost.engines.requests import generation_body
from infercost.workload.tools import STRUCTURED_SCHEMA, TOOLS, response_format

#: A prompt the Llama-2 vocabulary splits into a known number of pieces.
CONTENT = "Hello world, how are you?"
MESSAGES = [{"role": "user", "content": CONTENT}]

#: The second server's chat template (its header says why it is needed).
TEMPLATE = Path(__file__).resolve().with_name("tiny_chat_template.jinja")

#: A schema llama.cpp's grammar bounds entirely (an enum, an integer with bounds, a boolean),
#: so whatever a random model samples is valid against it. STRUCTURED_SCHEMA, what a job's
#: `structured` requests ask for, has a number with bounds and free strings, which the grammar
#: leaves unbounded: its answer is JSON of the right shape that may still break the schema.
BOUNDED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "neutral", "negative"]},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "resolved": {"type": "boolean"},
    },
    "required": ["sentiment", "stars", "resolved"],
    "additionalProperties": False,
}
#: Room for a whole answer: the grammar lets the model put up to 22 characters of white space
#: between tokens, and a random model does.
STRUCTURED_MAX_TOKENS = 64


def _request(method: str, path: str, host: str, body: object | None, close: bool) -> bytes:
    payload = b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Accept: */*"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def _read_response(sock: socket.socket, buf: bytearray) -> tuple[bytes, bytes, bytes]:
    """One HTTP/1.1 response from `sock` (bytes already read are in `buf`, left-overs stay
    there): (raw bytes as received, head, body with chunked coding removed)."""

    def need(n: int) -> None:
        while len(buf) < n:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection mid-response")
            buf.extend(data)

    while b"\r\n\r\n" not in buf:
        need(len(buf) + 1)
    head_end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:head_end])
    headers = {
        k.strip().lower(): v.strip()
        for k, _, v in (line.partition(":") for line in head.decode("latin-1").split("\r\n")[1:])
        if k
    }
    pos = head_end
    body = bytearray()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            while b"\r\n" not in buf[pos:]:
                need(len(buf) + 1)
            line_end = buf.index(b"\r\n", pos)
            size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
            pos = line_end + 2
            need(pos + size + 2)
            body += buf[pos : pos + size]
            pos += size + 2
            if size == 0:
                break
    elif "content-length" in headers:
        n = int(headers["content-length"])
        need(pos + n)
        body += buf[pos : pos + n]
        pos += n
    else:  # the body runs to the end of the connection
        while data := sock.recv(65536):
            buf.extend(data)
        body += buf[pos:]
        pos = len(buf)
    raw = bytes(buf[:pos])
    del buf[:pos]
    return raw, head, bytes(body)


def exchange(url: str, method: str, path: str, body: object | None = None) -> tuple[bytes, bytes]:
    """One request on a fresh connection (Connection: close); (raw response, body)."""
    host = url.removeprefix("http://")
    name, _, port = host.partition(":")
    with socket.create_connection((name, int(port)), timeout=60) as sock:
        sock.sendall(_request(method, path, host, body, close=True))
        raw, _head, payload = _read_response(sock, bytearray())
    return raw, payload


def _status(raw: bytes) -> str:
    return raw.split(b"\r\n", 1)[0].decode("latin-1")


def keepalive_then_close(url: str, model: str) -> tuple[bytes, str]:
    """Two requests on one kept-alive connection: a plain one (answered with Keep-Alive and
    left open), then a streamed one; then waits to see whether the server closes. Returns
    the raw bytes of both responses and what happened to the connection afterwards."""
    host = url.removeprefix("http://")
    name, _, port = host.partition(":")
    with socket.create_connection((name, int(port)), timeout=30) as sock:
        buf = bytearray()
        sock.sendall(_request("GET", "/health", host, None, close=False))
        first, _, _ = _read_response(sock, buf)
        stream = {
            "model": model,
            "messages": MESSAGES,
            "max_tokens": 4,
            "stream": True,
            "ignore_eos": True,
            "temperature": 0,
            "seed": 1,
        }
        sock.sendall(_request("POST", "/v1/chat/completions", host, stream, close=False))
        second, _, _ = _read_response(sock, buf)
        sock.settimeout(10)
        started = time.monotonic()
        try:
            tail = sock.recv(65536)
            after = (
                f"the server closed the connection {1000 * (time.monotonic() - started):.0f} ms"
                " after the streamed response ended (recv returned EOF)"
                if not tail
                else f"unexpected bytes after the response: {tail[:80]!r}"
            )
        except TimeoutError:
            after = "the connection stayed open for 10 s after the streamed response"
    return first + second, after


def metrics_under_load(url: str, model: str, streams: int) -> bytes:
    """/metrics while `streams` streamed requests run against 8 slots, so some are processing
    and some deferred; the page is taken once both gauges are non-zero."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": CONTENT * 8}],
        "max_tokens": 96,
        "stream": True,
        "ignore_eos": True,
    }

    def one() -> None:
        with (
            httpx.Client(timeout=120) as client,
            client.stream("POST", f"{url}/v1/chat/completions", json=body) as r,
        ):
            for _ in r.iter_bytes():
                pass

    threads = [threading.Thread(target=one, daemon=True) for _ in range(streams)]
    for t in threads:
        t.start()
    page = b""
    try:
        for _ in range(200):
            _raw, page = exchange(url, "GET", "/metrics")
            text = page.decode()
            if "llamacpp:requests_deferred 0\n" not in text and (
                "llamacpp:requests_processing 0\n" not in text
            ):
                break
            time.sleep(0.05)
        else:
            raise SystemExit("never saw requests processing and deferred at once")
    finally:
        for t in threads:
            t.join(180)
    return page


def structured_body(
    model: str, features: dict[str, Any], *, stream: bool, exact_length: bool
) -> dict[str, Any]:
    """A chat request with workload.features fields, built by infercost's own
    generation_body for engine llamacpp, greedy and seeded so the capture can be made again."""
    body: dict[str, Any] = json.loads(
        generation_body(
            api="openai-chat",
            model=model,
            engine="llamacpp",
            prompt=CONTENT,
            max_tokens=STRUCTURED_MAX_TOKENS,
            stream=stream,
            exact_length=exact_length,
            temperature=0,
            features=features,
        )
    )
    body["seed"] = 1
    return body


def answer_of(payload: bytes, stream: bool) -> dict[str, Any]:
    """What an answer said, read plainly (not with infercost's reader): its content, its tool
    calls (name, arguments), its finish_reason and any error object."""
    if stream:
        events = [
            json.loads(line.removeprefix("data: "))
            for line in payload.decode().split("\n")
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
    else:
        doc = json.loads(payload)
        events = [{**doc, "choices": [{**c, "delta": c["message"]} for c in doc["choices"]]}]
    content, finish, error = "", None, None
    calls: dict[int, list[str]] = {}
    for event in events:
        error = event.get("error", error)
        for choice in event.get("choices", ()):
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            finish = choice.get("finish_reason") or finish
            for call in delta.get("tool_calls") or ():
                name_args = calls.setdefault(call.get("index", 0), ["", ""])
                function = call.get("function") or {}
                name_args[0] += function.get("name") or ""
                name_args[1] += function.get("arguments") or ""
    return {"content": content, "calls": list(calls.values()), "finish": finish, "error": error}


def verdict(text: str, schema: dict[str, Any], what: str = "the schema") -> str:
    """Whether `text` is JSON valid against `schema` (`what`, in words), for the README."""
    try:
        value = json.loads(text)
    except ValueError:
        return "not JSON"
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=str)
    if not errors:
        return f"JSON valid against {what}"
    where = "/".join(str(p) for p in errors[0].absolute_path) or "the answer"
    return f"JSON, but not valid against {what} ({where}: {errors[0].message})"


def record_structured(url: str, out: Path, model: str) -> list[str]:
    """The structured-output captures from the server with TEMPLATE (and the tool-call one
    when the server forces a call); returns their manifest lines."""
    lines: list[str] = []
    where = "second server"
    schema_format = {"response_format": response_format(STRUCTURED_SCHEMA)}
    bounded_format = {"response_format": response_format(BOUNDED_SCHEMA)}
    cases: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool, bool]] = [
        # name, features, schema the answer is checked against, streamed, ignore_eos
        ("chat-stream-json-schema.sse", schema_format, STRUCTURED_SCHEMA, True, False),
        ("chat-stream-json-schema-bounded.sse", bounded_format, BOUNDED_SCHEMA, True, False),
        ("chat-json-schema-bounded.json", bounded_format, BOUNDED_SCHEMA, False, False),
        (
            "chat-stream-json-object.sse",
            {"response_format": {"type": "json_object"}},
            {"type": "object"},
            True,
            False,
        ),
        # A job's default: an exact length (ignore_eos) with structured output.
        ("error-json-schema-ignore-eos.sse", schema_format, None, True, True),
    ]
    for name, features, schema, stream, exact in cases:
        body = structured_body(model, features, stream=stream, exact_length=exact)
        raw, payload = exchange(url, "POST", "/v1/chat/completions", body)
        (out / name).write_bytes(payload)
        said = answer_of(payload, stream)
        line = f"{name} ({where}): POST /v1/chat/completions {json.dumps(body)} -> {_status(raw)}"
        line += f"; finish_reason {said['finish'] or 'none'}, content {json.dumps(said['content'])}"
        if said["error"] is not None:
            line += f", then the error event {json.dumps(said['error'])} and no [DONE]"
        if schema is not None:
            what = "the schema" if "json_schema" in json.dumps(features) else "a JSON object"
            line += f": {verdict(said['content'], schema, what)}"
        lines.append(line)
    tools = structured_body(
        model, {"tools": TOOLS, "tool_choice": "required"}, stream=True, exact_length=False
    )
    raw, payload = exchange(url, "POST", "/v1/chat/completions", tools)
    said = answer_of(payload, True)
    name = "chat-stream-tools-required.sse"
    if said["calls"]:
        (out / name).write_bytes(payload)
        lines.append(
            f"{name} ({where}): POST /v1/chat/completions {json.dumps(tools)} -> {_status(raw)};"
            f" finish_reason {said['finish']}, calls {json.dumps(said['calls'])}"
        )
    else:
        lines.append(
            f"{name}: not recorded. The same request with `tools` (the two of a job's `tools`"
            f' feature) and tool_choice "required" got {_status(raw)} with content only, no'
            f" tool-call delta (finish_reason {said['finish']}, {len(said['content'])} characters"
            " of text): this build's grammar for a required call lets text come before it"
            " (as the server logs it at -lv 5: root ::= space until-...? tool-calls, the text"
            " running until <tool_call>), and a random model never writes the marker"
        )
    return lines


def record(url: str, out: Path, args: argparse.Namespace, templated: str | None = None) -> None:
    """Writes every fixture of the module docstring into `out` and its manifest; the
    structured-output ones from `templated`, the server with TEMPLATE."""
    out.mkdir(parents=True, exist_ok=True)
    model = httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]
    manifest: list[str] = []

    def save(name: str, data: bytes, what: str) -> None:
        (out / name).write_bytes(data)
        manifest.append(f"{name}: {what}")

    chat = {
        "model": model,
        "messages": MESSAGES,
        "max_tokens": 6,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
        "seed": 1,
    }
    cases: list[tuple[str, str, str, object | None, bool]] = [
        ("tokenize-content.json", "POST", "/tokenize", {"content": CONTENT}, False),
        (
            "tokenize-add-special.json",
            "POST",
            "/tokenize",
            {"content": CONTENT, "add_special": True},
            False,
        ),
        (
            "tokenize-messages.json",
            "POST",
            "/tokenize",
            {"model": model, "messages": MESSAGES},
            False,
        ),
        ("v1-models.json", "GET", "/v1/models", None, False),
        ("props.json", "GET", "/props", None, False),
        ("health.json", "GET", "/health", None, False),
        (
            "chat-stream-usage.sse",
            "POST",
            "/v1/chat/completions",
            {**chat, "stream_options": {"include_usage": True}},
            False,
        ),
        ("chat-stream-no-usage.sse", "POST", "/v1/chat/completions", chat, False),
        ("error-no-messages.http", "POST", "/v1/chat/completions", {"model": model}, True),
        ("error-bad-json.http", "POST", "/v1/chat/completions", None, True),
        (
            "error-json-schema-chatml.http",
            "POST",
            "/v1/chat/completions",
            structured_body(
                model,
                {"response_format": response_format(STRUCTURED_SCHEMA)},
                stream=True,
                exact_length=False,
            ),
            True,
        ),
    ]
    for name, method, path, body, whole in cases:
        if name == "error-bad-json.http":
            raw = _bad_json(url)
            save(
                name, raw, f"POST {path} with the body '{{\"model\": ' (not JSON) -> {_status(raw)}"
            )
            continue
        raw, payload = exchange(url, method, path, body)
        save(
            name, raw if whole else payload, f"{method} {path} {json.dumps(body)} -> {_status(raw)}"
        )
    raw, after = keepalive_then_close(url, model)
    save(
        "keepalive-then-close.http",
        raw,
        f"GET /health then a streamed POST /v1/chat/completions (max_tokens 4) on one"
        f" HTTP/1.1 connection without Connection: close; afterwards {after}",
    )
    save(
        "metrics-under-load.prom",
        metrics_under_load(url, model, 12),
        "GET /metrics while 12 streamed chat requests (max_tokens 96) ran on 8 slots",
    )
    if templated is not None:
        manifest.extend(record_structured(templated, out, model))
    props = httpx.get(f"{url}/props", timeout=10).json()
    sdist = next(
        (p.name for p in args.server.parents if p.name.startswith("llama_cpp_python")), "?"
    )
    n_ctx = props.get("default_generation_settings", {}).get("n_ctx", "?")
    readme = [
        "# llama-server captures",
        "",
        "Byte-exact answers of a real llama.cpp server, recorded by"
        " `bench/engines/llamacpp.sh --fixtures` (bench/engines/llamacpp_fixtures.py).",
        "",
        f"- recorded: {datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}",
        f"- build: llama-server {props.get('build_info')}, from the llama.cpp vendored in the"
        f" PyPI sdist {sdist}, CPU only (cmake -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release)",
        f"- model: {model} ({args.model.name}), a random-weight llama with the Llama-2 vocabulary"
        " (bench/engines/tiny_llama_gguf.py)",
        f"- server: --parallel 8 --metrics, {n_ctx} tokens of context per slot, loopback",
        "- second server (the structured-output captures): the same, with --chat-template-file"
        " bench/engines/tiny_chat_template.jinja (Llama-2 [INST] turns, no generation prompt);"
        " the model has no chat template, and with llama.cpp's ChatML fallback every"
        " response_format request fails (error-json-schema-chatml.http)",
        "- structured requests are built by infercost's generation_body (engine llamacpp) with"
        " the response_format a job's `structured` feature sends; each answer's verdict below is"
        " the recorder's own check (jsonschema) of the content it received",
        "- `.json`, `.sse`, `.prom`: the response body as sent (chunked coding removed);"
        " `.http`: the whole response, status line and headers included",
        "",
        "## Requests",
        "",
        *(f"- {line}" for line in manifest),
    ]
    (out / "README.md").write_text("\n".join(readme) + "\n")
    print(f"# recorded {len(manifest)} fixtures in {out}", flush=True)


def _bad_json(url: str) -> bytes:
    """A body that is not JSON at all, sent raw."""
    host = url.removeprefix("http://")
    name, _, port = host.partition(":")
    payload = b'{"model": '
    req = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode() + payload
    with socket.create_connection((name, int(port)), timeout=30) as sock:
        sock.sendall(req)
        raw, _, _ = _read_response(sock, bytearray())
    return raw
