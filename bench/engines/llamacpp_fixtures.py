"""Records byte-exact answers of a running llama-server into a fixtures folder, for tests that
parse what a real llama.cpp sends (tests/fixtures/engines/llamacpp/). Called by llamacpp.py
--fixtures DIR; every exchange goes over a raw loopback socket so nothing is re-encoded.

Files: `*.json` / `*.sse` / `*.prom` hold a response body exactly as sent (chunked transfer
coding removed); `*.http` hold the whole response, status line and headers included.
README.md lists the build, the date, and each file's request and status.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

#: A prompt the Llama-2 vocabulary splits into a known number of pieces.
CONTENT = "Hello world, how are you?"
MESSAGES = [{"role": "user", "content": CONTENT}]


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


def record(url: str, out: Path, args: argparse.Namespace) -> None:
    """Writes every fixture of the module docstring into `out` and its manifest."""
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
