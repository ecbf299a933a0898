"""A small HTTP client for the client commands (submit, jobs, compare, report, cancel).

The commands use the public HTTP API only, exactly as a portal would. Where the API is and
which key to send: `--url` / `--token`, else INFERCOST_URL / INFERCOST_TOKEN, else the
address `infercost up` binds (INFERCOST_HOST / INFERCOST_PORT) and the default team's key
that it writes to INFERCOST_DATA_DIR/default-team.key. Every failure becomes one line a
person can act on (click prints it after "Error:") and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, TypeVar

import click
import httpx

from cli.datadir import TEAM_KEY_FILE
from infercost.net.tls import tls_context
from infercost.settings import Settings

TIMEOUT_S = 30.0

F = TypeVar("F", bound=Callable[..., Any])


class ApiError(click.ClickException):
    """The API answered with an error, or could not be reached; the message says why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the API is, the key to send, and where that key came from (said on a 401)."""

    url: str
    token: str | None
    key_source: str = "--token"


def resolve_connection(
    url: str | None,
    token: str | None,
    settings: Settings | None = None,
    *,
    token_from: str = "--token",  # noqa: S107 (an option name, not a secret)
) -> Connection:
    """The API address and key from the options (click already folded in INFERCOST_URL and
    INFERCOST_TOKEN; `token_from` says which gave the key), else `infercost up`'s defaults:
    its bind address and the default team's key file. No key at all is left to the API to
    refuse, with a hint that names every place looked in."""
    settings = settings or Settings.from_env()
    base = (url or f"http://{settings.host}:{settings.port}").rstrip("/")
    if token is not None:
        return Connection(base, token, token_from)
    key_file = (settings.data_dir / TEAM_KEY_FILE).absolute()
    token = _read_key(key_file)
    if token is None:
        return Connection(
            base,
            None,
            f"no key: --token and INFERCOST_TOKEN were not given and {key_file} does not "
            "exist (INFERCOST_DATA_DIR names the directory `infercost up` wrote it to)",
        )
    return Connection(base, token, f"the key file {key_file}")


def _read_key(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ApiError(f"cannot read the team key at {path}: {exc.strerror}") from None


def api_options(command: F) -> F:
    """`--url` and `--token` (env INFERCOST_URL, INFERCOST_TOKEN) on a client command; the
    command receives a ready `client: ApiClient` instead, closed when it returns."""

    @click.option(
        "--url",
        envvar="INFERCOST_URL",
        help="API base URL (env INFERCOST_URL; default http://INFERCOST_HOST:INFERCOST_PORT).",
    )
    @click.option(
        "--token",
        envvar="INFERCOST_TOKEN",
        help="Team API key (env INFERCOST_TOKEN; default: INFERCOST_DATA_DIR/default-team.key).",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, url: str | None, token: str | None, **kwargs: Any) -> Any:
        # `infercost jobs --url X list`: a subcommand takes what its group was given.
        context = click.get_current_context()
        token_from = _token_source(context)
        parent = context.parent
        if parent is not None and token is None and parent.params.get("token") is not None:
            token_from = _token_source(parent)
        if parent is not None:
            url = url or parent.params.get("url")
            token = token or parent.params.get("token")
        connection = resolve_connection(url, token, token_from=token_from)
        with ApiClient(connection) as client:
            return command(*args, client=client, **kwargs)

    return wrapper  # type: ignore[return-value]


def _token_source(context: click.Context) -> str:
    """Which of --token and INFERCOST_TOKEN gave this command its key."""
    source = context.get_parameter_source("token")
    return "INFERCOST_TOKEN" if source is click.core.ParameterSource.ENVIRONMENT else "--token"


def problem_message(response: httpx.Response) -> str:
    """One line from an error response: the problem's `detail` (RFC 9457), else its text."""
    detail: str | None = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        detail = body.get("detail") or body.get("title")
    if not detail:
        detail = response.text.strip().splitlines()[0] if response.text.strip() else ""
    return str(detail or response.reason_phrase)


#: An API hint to send a body field set to true: `send "force": true with the job`,
#: `set allow_mismatched_workload: true`.
_SEND_TRUE = re.compile(
    r"\b(?:send|set)\s+`?\"?(?P<field>[a-z_][\w.]*)\"?:\s*true`?(?:\s+with the (?:job|request))?"
)
#: The same with false, for an option that has a negative form (`--no-ignore-eos`).
_SEND_FALSE = re.compile(
    r"\b(?:send|set)\s+`?\"?(?P<field>[a-z_][\w.]*)\"?:\s*false`?(?:\s+with the (?:job|request))?"
)
#: A field named at the head of a problem's clause: `load.levels: 1.5 is not ...`.
_FIELD_HEAD = re.compile(r"(?:^|(?<=; ))(?P<field>[a-z_][\w.]*): ")
#: A field named by its path inside the text: `raise load.requests_per_level`.
_FIELD_PATH = re.compile(r"\b(?:load|workload|slo|traffic)\.(?P<field>[a-z_]\w*)\b")
#: API routes a hint names, and the command that does the same (`GET /v1/hardware lists the
#: catalog` -> `infercost hardware list` lists the catalog).
_COMMAND_FOR = {
    "GET /v1/hardware": "infercost hardware list",
    "POST /v1/hardware": "infercost hardware add",
    "GET /v1/endpoints": "infercost endpoints list",
    "POST /v1/endpoints": "infercost endpoints add",
    "GET /v1/jobs": "infercost jobs list",
    "POST /v1/jobs": "infercost jobs submit",
    "GET /v1/prices": "infercost prices list",
    "POST /v1/prices": "infercost prices add",
    "GET /v1/datasets": "infercost datasets list",
    "POST /v1/datasets": "infercost datasets upload",
    "GET /v1/traffic": "infercost traffic list",
    "GET /v1/schedules": "infercost schedules list",
    "POST /v1/estimates": "infercost estimate",
    "GET /v1/comparisons": "infercost compare",
}
_ROUTE = re.compile(r"\b(?:GET|POST) /v1/[a-z]+\b(?![/{])")
#: Body fields a command's option names otherwise than its parameter (field -> parameter).
_PARAMETER_OF = {"warmup_requests": "warmup"}


def command_flags(command: click.Command | None) -> dict[str, str]:
    """Body field -> the command's own option for it (`force` -> `--force`), from the
    command's options whose parameter is named after the field."""
    if command is None:
        return {}
    flags: dict[str, str] = {}
    for param in command.params:
        if isinstance(param, click.Option) and param.name:
            long = [o for o in param.opts if o.startswith("--")]
            if long:
                flags[param.name] = long[0]
            negative = [o for o in param.secondary_opts if o.startswith("--")]
            if negative:
                # Its negative form, for a hint to send the field false.
                flags[f"{param.name}=false"] = negative[0]
    for field, parameter in _PARAMETER_OF.items():
        if parameter in flags:
            flags[field] = flags[parameter]
    return flags


def in_cli_words(detail: str, flags: Mapping[str, str]) -> str:
    """The API's hint in the command's own words: a body field the command has an option
    for becomes that option (`send "force": true` -> `pass --force`; `load.levels: ...` ->
    `--levels: ...`; `raise load.duration_s` -> `raise --duration-s`), and a route that a
    command does becomes that command (`GET /v1/hardware` -> `infercost hardware list`);
    fields it has no option for stay as the API named them."""

    def option(field: str) -> str | None:
        return flags.get(field.rsplit(".", 1)[-1])

    def send(match: re.Match[str]) -> str:
        flag = option(match["field"])
        return match[0] if flag is None else f"pass {flag}"

    def send_false(match: re.Match[str]) -> str:
        flag = flags.get(f"{match['field'].rsplit('.', 1)[-1]}=false")
        return match[0] if flag is None else f"pass {flag}"

    def head(match: re.Match[str]) -> str:
        flag = option(match["field"])
        return match[0] if flag is None else f"{flag}: "

    def path(match: re.Match[str]) -> str:
        return flags.get(match["field"]) or match[0]

    def route(match: re.Match[str]) -> str:
        command = _COMMAND_FOR.get(match[0])
        return match[0] if command is None else f"`{command}`"

    detail = _SEND_FALSE.sub(send_false, _SEND_TRUE.sub(send, detail))
    detail = _FIELD_PATH.sub(path, _FIELD_HEAD.sub(head, detail))
    return _ROUTE.sub(route, detail)


class ApiClient:
    """Synchronous JSON calls against the API; errors raise ApiError with one clear line."""

    def __init__(self, connection: Connection, *, timeout: float = TIMEOUT_S) -> None:
        self.url = connection.url
        self.has_token = connection.token is not None
        self.key_source = connection.key_source
        headers = {"User-Agent": "infercost-cli"}
        if connection.token:
            headers["Authorization"] = f"Bearer {connection.token}"
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, verify=tls_context()
        )

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | BinaryIO | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """Send one request (None-valued parameters left out; a file as `content` is sent
        as it is read, never whole in memory); a transport failure or an error status raises
        ApiError. `timeout` replaces the client's for this request."""
        try:
            response = self._http.request(
                method,
                path,
                params=_params(params or {}),
                json=json,
                headers=headers,
                content=content,
                timeout=timeout if timeout is not None else self._http.timeout,
            )
        except httpx.ConnectError:
            raise ApiError(f"no API at {self.url}: start it with `make run`") from None
        except httpx.TimeoutException:
            raise ApiError(
                f"the API at {self.url} did not answer within {self._http.timeout.read} s"
            ) from None
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot talk to the API at {self.url}: {exc}") from None
        if response.status_code >= 400:
            raise ApiError(self._explain(method, path, response), response.status_code)
        return response

    def _explain(self, method: str, path: str, response: httpx.Response) -> str:
        context = click.get_current_context(silent=True)
        detail = in_cli_words(
            problem_message(response), command_flags(None if context is None else context.command)
        )
        message = f"{method} {path}: {detail} (HTTP {response.status_code})"
        if response.status_code == 401:
            hint = (
                f"{self.key_source}; pass --token or set INFERCOST_TOKEN"
                if not self.has_token
                else f"the key came from {self.key_source}: check it (a team key, as "
                "`infercost up` prints)"
            )
            message += f"; {hint}"
        return message

    def get(self, path: str, **params: Any) -> Any:
        """GET a JSON document; None-valued parameters are left out."""
        return self.request("GET", path, params=params).json()

    def post(self, path: str, body: Any = None, headers: Mapping[str, str] | None = None) -> Any:
        """POST a JSON body and return the JSON answer."""
        return self.request("POST", path, json=body, headers=headers).json()

    def patch(self, path: str, body: Any) -> Any:
        """PATCH a JSON body and return the JSON answer."""
        return self.request("PATCH", path, json=body).json()

    def delete(self, path: str) -> None:
        """DELETE a resource."""
        self.request("DELETE", path)

    def delete_json(self, path: str) -> Any:
        """DELETE a resource that answers with a JSON body."""
        return self.request("DELETE", path).json()

    def download(
        self,
        path: str,
        sink: BinaryIO,
        *,
        raw: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, str | None]:
        """GET `path` streamed into `sink` chunk by chunk, never whole in memory: the body
        as sent (`raw`, still compressed) or decoded. Returns the bytes written and the
        response's Content-Encoding; an error status raises ApiError."""
        written = 0
        try:
            with self._http.stream("GET", path, headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError(self._explain("GET", path, response), response.status_code)
                chunks = response.iter_raw() if raw else response.iter_bytes()
                for chunk in chunks:
                    sink.write(chunk)
                    written += len(chunk)
                return written, response.headers.get("content-encoding")
        except httpx.ConnectError:
            raise ApiError(f"no API at {self.url}: start it with `make run`") from None
        except httpx.TimeoutException:
            raise ApiError(
                f"the API at {self.url} did not answer within {self._http.timeout.read} s"
            ) from None
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot talk to the API at {self.url}: {exc}") from None

    def pages(self, path: str, *, page: int = 500, most: int = 10_000, **params: Any) -> list[Any]:
        """Every item of a paged listing (`items`, `total`), up to `most`."""
        items: list[Any] = []
        while len(items) < most:
            answer = self.get(path, limit=page, offset=len(items), **params)
            items.extend(answer["items"])
            if not answer["items"] or len(items) >= answer["total"]:
                break
        return items[:most]


def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    # Left out: options not given (None) and repeatable options given no value.
    return {k: v for k, v in params.items() if v is not None and v not in ([], ())}
