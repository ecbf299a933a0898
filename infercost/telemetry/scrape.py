"""Scrape Prometheus URLs on a fixed cadence in background threads (docs/figures.md, Telemetry).

The load generator owns an asyncio loop whose timestamps must not be delayed, so scraping
runs in plain threads with a synchronous httpx client: one thread per URL, so a slow or
hanging exporter never delays the others. A scrape never raises: a URL that is down, slow
or serves something other than Prometheus text becomes a `TelemetryError` with a reason a
person can act on, and repeats of the same error are collapsed into one with a count.

What comes back from a metrics URL is untrusted, so the scraper keeps only the series
infercost maps (mapping.py), with only their known labels, values cut to a short length;
everything else is dropped before anything is stored. Error reasons are written by
infercost (a status code, a host name, a fixed phrase), never copied from a response
body; redirects are not followed, and a body past `MAX_BODY_BYTES` is cut off.

Timestamps: each scrape's samples carry the midpoint between sending the request and
receiving the response headers, on the scraper's clock (`time.perf_counter` by default,
the same clock as the worker's request timings). The exporter takes its snapshot
somewhere in that interval, so the midpoint is the best single estimate.
"""

from __future__ import annotations

import asyncio
import errno
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, NamedTuple, Self
from urllib.parse import urlsplit, urlunsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from infercost.engines.metrics import FAMILY_PREFIXES, KNOWN_LABELS, lookup
from infercost.net.outbound import OutboundRefused, Pinned, Policy, pinned
from infercost.net.tls import tls_context

#: Responses larger than this are cut off: a metrics page is kilobytes, not megabytes.
MAX_BODY_BYTES: Final = 4 * 1024 * 1024
#: Known series kept from one answer; past it the rest of that answer is dropped (an
#: exporter inventing label values must not fill the worker's memory or the database).
MAX_SERIES_PER_SCRAPE: Final = 2000
#: Label values longer than this are cut (a model name is tens of characters).
MAX_LABEL_CHARS: Final = 128
#: Unmapped names of a known family listed per scraper, for a new engine version.
MAX_UNMAPPED_NAMES: Final = 200
#: Ask for the classic text format (not OpenMetrics or protobuf) so every exporter agrees.
_ACCEPT: Final = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
_COUNTER_TYPE_LINE: Final = re.compile(r"^#[ \t]*TYPE[ \t]+(\S+)[ \t]+counter[ \t]*$", re.MULTILINE)
#: A Prometheus metric name, so a listed name can hold nothing else.
_METRIC_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,99}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HOST: Final = re.compile(r"[A-Za-z0-9.\-\[\]:]{1,100}")
#: Media types that are certainly not Prometheus text, named in the error.
_NOT_PROMETHEUS_TYPES: Final = frozenset(
    {"text/html", "application/json", "application/xml", "text/xml", "application/xhtml+xml"}
)
#: Extra seconds `stop` waits for a thread beyond an in-flight and a final scrape.
_JOIN_SLACK_S: Final = 1.0


class Sample(NamedTuple):
    """One published value at one scrape.

    `t` is seconds on the scraper's clock; `labels` is shared by all samples of the same
    series, so treat it as read-only.
    """

    t: float
    url: str
    metric: str
    labels: Mapping[str, str]
    value: float


class TelemetryError(NamedTuple):
    """A scrape that failed, collapsed over repeats: first at `t`, last at `t_last`."""

    url: str
    t: float
    reason: str
    occurrences: int = 1
    t_last: float | None = None

    def __str__(self) -> str:
        times = "" if self.occurrences == 1 else f" ({self.occurrences} times)"
        return f"telemetry from {self.url}: {self.reason}{times}"


@dataclass(slots=True)
class ScrapeResult:
    """Everything a scraper collected: samples in arrival order and collapsed errors."""

    samples: list[Sample] = field(default_factory=list)
    errors: list[TelemetryError] = field(default_factory=list)
    #: Successful scrapes per URL (as shown: credentials and query left out).
    scrapes: dict[str, int] = field(default_factory=dict)
    #: Names of known families (vllm:, sglang:, ...) that infercost does not map, seen in
    #: any scrape; their values were dropped. Other names are never listed.
    unmapped: set[str] = field(default_factory=set)


class _ScrapeFailed(Exception):
    """A scrape that produced no samples; the message is the user-facing reason."""


def display_url(url: str) -> str:
    """A URL as errors and stored samples show it: without user name, password or query
    (either may carry a credential), control characters removed."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
        shown = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        if parts.query:
            shown += "?\u2026"
    except ValueError:
        shown = "an unparsable URL"
    return _CONTROL.sub("", shown)[:300]


def _target(url: str, policy: Policy | None) -> Pinned:
    """Where to send a scrape of `url`: with a policy, resolved and every address checked
    (infercost/net/outbound.py), aimed at the first one so a name cannot be re-pointed between
    the check and the connection; without one (tests, tools), the URL as given."""
    if policy is None:
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            raise _ScrapeFailed("not a valid http:// or https:// URL")
        return Pinned(url, {})
    try:
        # A scraping thread has no event loop of its own; the check resolves the name.
        addresses = asyncio.run(policy.check_connect(url, "metrics_urls"))
    except OutboundRefused as refused:
        errors = refused.extra.get("errors") or [{}]
        raise _ScrapeFailed(
            "refused by the outbound policy: " + str(errors[0].get("message", "not allowed"))
        ) from None
    except socket.gaierror:
        raise _ScrapeFailed("host name not found") from None
    except (OSError, ValueError, UnicodeError):
        raise _ScrapeFailed("not a valid http:// or https:// URL") from None
    if not addresses:
        raise _ScrapeFailed("host name not found")
    return pinned(url, addresses[0])


class Scraper:
    """Scrapes `urls` every `interval_s` in background threads until `stop`.

    `start` scrapes at once and then on a fixed cadence (a scrape that overruns skips the
    slots it missed rather than bunching up). `stop` scrapes each URL one last time, joins
    the threads and returns the `ScrapeResult`. Also a context manager: the result is in
    `.result` after the `with` block.

    Only the series of metrics infercost maps are kept, with their known labels; names of
    unmapped metrics of a known family are listed in `ScrapeResult.unmapped`. With a
    `policy`, every scrape resolves the URL's host and connects only to addresses the
    outbound policy allows (the worker passes its own; tests and tools may pass None).
    """

    def __init__(
        self,
        urls: Sequence[str],
        interval_s: float = 1.0,
        timeout_s: float = 2.0,
        clock: Callable[[], float] = time.perf_counter,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_series: int = MAX_SERIES_PER_SCRAPE,
        policy: Policy | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.urls = list(dict.fromkeys(urls))
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s)
        self.max_body_bytes = max_body_bytes
        self.max_series = max_series
        self.policy = policy
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}
        self._client: httpx.Client | None = None
        self._samples: list[Sample] = []
        self._errors: dict[tuple[str, str], TelemetryError] = {}
        self._shown = {url: display_url(url) for url in self.urls}
        self._scrapes: dict[str, int] = dict.fromkeys(self._shown.values(), 0)
        self._unmapped: set[str] = set()
        self._label_cache: LabelCache = {}
        self.result: ScrapeResult | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start one scraping thread per URL; the first scrape happens at once."""
        if self._client is not None or self.result is not None:
            raise RuntimeError("a Scraper starts once; make a new one for the next run")
        self._client = _make_client(self.timeout_s)
        for i, url in enumerate(self.urls):
            thread = threading.Thread(
                target=self._run, args=(url,), name=f"telemetry-scrape-{i}", daemon=True
            )
            self._threads[url] = thread
            thread.start()

    def stop(self) -> ScrapeResult:
        """Scrape each URL a final time, join the threads and return what was collected."""
        if self.result is not None:
            return self.result
        self._stop.set()
        # An in-flight scrape and the final one each end within the timeout.
        deadline = time.monotonic() + 2 * self.timeout_s + _JOIN_SLACK_S
        stuck = []
        for url, thread in self._threads.items():
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                stuck.append(url)
        if self._client is not None and not stuck:
            self._client.close()
        with self._lock:
            for url in stuck:
                self._record_error(
                    url,
                    self._clock(),
                    "still scraping when the run ended: the exporter answers too slowly",
                )
            self.result = self._snapshot()
        return self.result

    def _snapshot(self) -> ScrapeResult:
        return ScrapeResult(
            samples=list(self._samples),
            errors=list(self._errors.values()),
            scrapes=dict(self._scrapes),
            unmapped=set(self._unmapped),
        )

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- the scraping threads ----------------------------------------------------------

    def _run(self, url: str) -> None:
        # The cadence runs on the monotonic clock: `clock` only stamps samples and may be
        # anything (a test's fake clock, the worker's perf_counter).
        next_due = time.monotonic()
        while not self._stop.is_set():
            self._scrape_once(url)
            next_due += self.interval_s
            now = time.monotonic()
            if next_due < now:  # overran: skip the missed slots, keep the phase
                missed = int((now - next_due) // self.interval_s) + 1
                next_due += missed * self.interval_s
            self._stop.wait(next_due - now)
        self._scrape_once(url)  # the final scrape, at stop time

    def _scrape_once(self, url: str) -> None:
        shown = self._shown.get(url) or display_url(url)
        try:
            t, text = self._fetch(_target(url, self.policy))
            parsed = _parse(text, shown, t, label_cache=self._label_cache, keep="known")
        except _ScrapeFailed as failure:
            with self._lock:
                self._record_error(shown, self._clock(), str(failure))
            return
        except Exception as exc:  # noqa: BLE001 - a scraping thread must never die mid-run
            with self._lock:
                self._record_error(shown, self._clock(), f"internal error: {type(exc).__name__}")
            return
        samples = parsed.samples
        with self._lock:
            room = MAX_UNMAPPED_NAMES - len(self._unmapped)
            if room > 0:
                self._unmapped.update(sorted(parsed.unmapped_known)[:room])
            self._scrapes[shown] = self._scrapes.get(shown, 0) + 1
            if parsed.series > self.max_series:
                samples = samples[: self.max_series]
                self._record_error(
                    shown,
                    t,
                    f"more than {self.max_series:,} series of known metrics in one answer; "
                    f"kept the first {self.max_series:,}",
                )
            if parsed.series == 0:
                self._record_error(shown, t, _nothing_known(parsed.names))
            self._samples.extend(samples)

    def _record_error(self, url: str, t: float, reason: str) -> None:
        key = (url, reason)
        seen = self._errors.get(key)
        if seen is None:
            self._errors[key] = TelemetryError(url, t, reason, 1, t)
        else:
            self._errors[key] = seen._replace(occurrences=seen.occurrences + 1, t_last=t)

    def _fetch(self, target: Pinned) -> tuple[float, str]:
        """GET one URL within the timeout: (timestamp, body text), or _ScrapeFailed."""
        client = self._client
        if client is None:  # pragma: no cover - start() sets it before any thread runs
            raise _ScrapeFailed("scraper not started")
        deadline = time.monotonic() + self.timeout_s
        t_sent = self._clock()
        try:
            with client.stream(
                "GET", target.url, headers=target.headers, extensions=target.extensions
            ) as response:
                t_headers = self._clock()
                _check_response(response, self.max_body_bytes)
                body = bytearray()
                # The timeout bounds each read; the deadline bounds a slow trickle too.
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_body_bytes:
                        raise _ScrapeFailed(_too_large(self.max_body_bytes))
                    if time.monotonic() > deadline:
                        raise _ScrapeFailed(self._timeout_reason())
        except httpx.TimeoutException as exc:
            raise _ScrapeFailed(self._timeout_reason()) from exc
        except httpx.ConnectError as exc:
            raise _ScrapeFailed(_connect_reason(exc)) from exc
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise _ScrapeFailed("not a valid http:// or https:// URL") from exc
        except httpx.RemoteProtocolError as exc:
            raise _ScrapeFailed("the server closed the connection without a full response") from exc
        except httpx.DecodingError as exc:
            raise _ScrapeFailed("answered a body that could not be decoded") from exc
        except httpx.HTTPError as exc:
            raise _ScrapeFailed(f"request failed ({type(exc).__name__})") from exc
        return (t_sent + t_headers) / 2.0, body.decode("utf-8", errors="replace")

    def _timeout_reason(self) -> str:
        return f"timed out after {self.timeout_s:g} s"


def _check_response(response: httpx.Response, max_body_bytes: int) -> None:
    """Refuse, before reading the body, an answer that cannot be a metrics page."""
    status = response.status_code
    if response.is_redirect or 300 <= status < 400:
        raise _ScrapeFailed(_redirect_reason(status, response.headers.get("location")))
    if not response.is_success:
        raise _ScrapeFailed(_http_status_reason(status))
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media in _NOT_PROMETHEUS_TYPES:
        raise _ScrapeFailed(f"answered something that is not Prometheus text ({media})")
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_body_bytes:
        raise _ScrapeFailed(_too_large(max_body_bytes))


def _nothing_known(names: int) -> str:
    if names == 0:
        return "answered an empty metrics page"
    return (
        f"answered Prometheus text, but none of its {names:,} metrics is one infercost maps "
        "(vLLM, SGLang, TGI, llama.cpp or the DCGM exporter)"
    )


def _too_large(max_body_bytes: int) -> str:
    size = (
        f"{max_body_bytes / (1024 * 1024):g} MiB"
        if max_body_bytes >= 1024 * 1024
        else f"{max_body_bytes / 1024:g} KiB"
    )
    return (
        f"answer larger than {size}, cut off; a metrics page is kilobytes: is this a metrics URL?"
    )


def _redirect_reason(status: int, location: str | None) -> str:
    """A redirect, naming only the host it points at: infercost follows none (the target
    is not what the endpoint declared, and could be anywhere)."""
    host = ""
    if location:
        try:
            host = urlsplit(location.strip()).hostname or ""
        except ValueError:
            host = ""
        host = host if _HOST.fullmatch(host) else ("another host" if host else "")
    target = f" to {host}" if host else (" on the same host" if location else "")
    return (
        f"HTTP {status}: redirects{target}; infercost follows no redirects, so put the "
        "final address in the endpoint's metrics_urls"
    )


def parse_text(text: str, url: str = "", t: float = 0.0) -> list[Sample]:
    """Every sample of one Prometheus text exposition (mapped or not), stamped `t` and
    `url`: for tests and tools. The scraper keeps only known series (see `Scraper`).

    Raises ValueError("not Prometheus text") when `text` is something else.
    """
    try:
        return _parse(text, url, t, label_cache={}, keep="all").samples
    except _ScrapeFailed as failure:
        raise ValueError(str(failure)) from None


LabelCache = dict[tuple[tuple[str, str], ...], dict[str, str]]


@dataclass(slots=True)
class _Parsed:
    samples: list[Sample]
    #: Distinct known series in the answer (before any cut), and metric names in all.
    series: int
    names: int
    unmapped_known: set[str]


def _clean_value(value: str) -> str:
    return _CONTROL.sub("", value)[:MAX_LABEL_CHARS]


def _parse(text: str, url: str, t: float, *, label_cache: LabelCache, keep: str) -> _Parsed:
    """Parse an exposition; keep="known" keeps mapped series with their known labels
    (values cleaned), keep="all" every sample as published."""
    samples: list[Sample] = []
    names: set[str] = set()
    unmapped_known: set[str] = set()
    repeats: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    # The parser appends _total to every counter sample; a counter declared without it
    # (TGI's, DCGM's) gets its own name back so names read as the exporter wrote them.
    declared_counters = set(_COUNTER_TYPE_LINE.findall(text))
    try:
        for family in text_string_to_metric_families(text):
            bare = family.type == "counter" and family.name in declared_counters
            for sample in family.samples:
                name = sample.name
                if bare and name == family.name + "_total" and name not in declared_counters:
                    name = family.name
                # prometheus_client publishes a _created timestamp per counter and
                # histogram; it is bookkeeping, not a measurement.
                if name.endswith("_created"):
                    continue
                names.add(name)
                spec = lookup(name)
                if keep == "all":
                    labels = sample.labels
                elif spec is None:
                    if name.startswith(FAMILY_PREFIXES) and _METRIC_NAME.fullmatch(name):
                        unmapped_known.add(name)
                    continue
                else:
                    allowed = KNOWN_LABELS[spec.family]
                    labels = {k: _clean_value(v) for k, v in sample.labels.items() if k in allowed}
                key = tuple(sorted(labels.items()))
                if keep == "known":
                    # Two series that differed only in dropped labels would read as one
                    # jumping series; the later ones are numbered apart instead.
                    n = repeats[(name, key)] = repeats.get((name, key), 0) + 1
                    if n > 1:
                        key = tuple(sorted({**labels, "series": str(n)}.items()))
                # One shared dict per distinct label set keeps a long run's samples small.
                shared = label_cache.setdefault(key, dict(key))
                samples.append(Sample(t, url, sys.intern(name), shared, float(sample.value)))
    except Exception as exc:  # the parser's errors on arbitrary input vary in type
        raise _ScrapeFailed("answered something that is not Prometheus text") from exc
    series = (
        len(samples)
        if keep == "known"
        else len({(s.metric, tuple(s.labels.items())) for s in samples})
    )
    return _Parsed(samples, series, len(names), unmapped_known)


def _make_client(timeout_s: float) -> httpx.Client:
    # trust_env=False: a proxy configured for the worker's outbound traffic must not sit
    # between it and an exporter on the same network. No redirects: a metrics URL is
    # scraped where the endpoint says, nowhere else.
    return httpx.Client(
        timeout=httpx.Timeout(timeout_s),
        trust_env=False,
        follow_redirects=False,
        headers={"Accept": _ACCEPT},
        verify=tls_context(),
    )


def _http_status_reason(status: int) -> str:
    hints = {
        401: "the metrics URL needs credentials",
        403: "the metrics URL refused access",
        404: "nothing at this path; check the metrics URL",
        501: "the server does not serve metrics (llama.cpp's server needs --metrics)",
    }
    hint = hints.get(status)
    return f"HTTP {status}" if hint is None else f"HTTP {status}: {hint}"


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _connect_reason(exc: httpx.ConnectError) -> str:
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "host name not found"
        if isinstance(cause, OSError) and cause.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return "host unreachable"
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "host name not found"
    return "could not connect"
