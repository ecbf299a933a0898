"""Scrape Prometheus URLs on a fixed cadence in background threads (METRICS.md, Telemetry).

The load generator owns an asyncio loop whose timestamps must not be delayed, so scraping
runs in plain threads with a synchronous httpx client: one thread per URL, so a slow or
hanging exporter never delays the others. A scrape never raises: a URL that is down, slow
or serves something other than Prometheus text becomes a `TelemetryError` with a reason a
person can act on, and repeats of the same error are collapsed into one with a count.

Timestamps: each scrape's samples carry the midpoint between sending the request and
receiving the response headers, on the scraper's clock (`time.perf_counter` by default,
the same clock as the worker's request timings). The exporter takes its snapshot
somewhere in that interval, so the midpoint is the best single estimate.
"""

from __future__ import annotations

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

import httpx
from prometheus_client.parser import text_string_to_metric_families

from infercost.telemetry.mapping import lookup

#: Responses larger than this are refused: a metrics page is kilobytes, not megabytes.
MAX_BODY_BYTES: Final = 16 * 1024 * 1024
#: Ask for the classic text format (not OpenMetrics or protobuf) so every exporter agrees.
_ACCEPT: Final = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
_EXCERPT_CHARS: Final = 60
_COUNTER_TYPE_LINE: Final = re.compile(r"^#[ \t]*TYPE[ \t]+(\S+)[ \t]+counter[ \t]*$", re.MULTILINE)
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
    #: Successful scrapes per URL.
    scrapes: dict[str, int] = field(default_factory=dict)
    #: Names infercost does not map, seen in any scrape (also when they were not kept).
    unmapped: set[str] = field(default_factory=set)


class _ScrapeFailed(Exception):
    """A scrape that produced no samples; the message is the user-facing reason."""


class Scraper:
    """Scrapes `urls` every `interval_s` in background threads until `stop`.

    `start` scrapes at once and then on a fixed cadence (a scrape that overruns skips the
    slots it missed rather than bunching up). `stop` scrapes each URL one last time, joins
    the threads and returns the `ScrapeResult`. Also a context manager: the result is in
    `.result` after the `with` block.

    `keep_unmapped=False` drops samples of metrics infercost does not map (histogram
    buckets, process metrics), which keeps memory flat on long runs; their names are still
    listed in `ScrapeResult.unmapped`.
    """

    def __init__(
        self,
        urls: Sequence[str],
        interval_s: float = 1.0,
        timeout_s: float = 2.0,
        clock: Callable[[], float] = time.perf_counter,
        *,
        keep_unmapped: bool = True,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_samples: int | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.urls = list(dict.fromkeys(urls))
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s)
        self.keep_unmapped = keep_unmapped
        self.max_body_bytes = max_body_bytes
        # Past this many kept values, only mapped metrics are kept (a long level against an
        # exporter publishing thousands of series must not fill the worker's memory).
        self.max_samples = max_samples
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}
        self._client: httpx.Client | None = None
        self._samples: list[Sample] = []
        self._errors: dict[tuple[str, str], TelemetryError] = {}
        self._scrapes: dict[str, int] = dict.fromkeys(self.urls, 0)
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
        try:
            t, text = self._fetch(url)
            samples = self._parse(url, t, text)
        except _ScrapeFailed as failure:
            with self._lock:
                self._record_error(url, self._clock(), str(failure))
            return
        except Exception as exc:  # noqa: BLE001 - a scraping thread must never die mid-run
            with self._lock:
                self._record_error(url, self._clock(), f"internal error: {type(exc).__name__}")
            return
        with self._lock:
            self._samples.extend(samples)
            self._scrapes[url] += 1
            if (
                self.keep_unmapped
                and self.max_samples is not None
                and len(self._samples) > self.max_samples
            ):
                self.keep_unmapped = False
                self._record_error(
                    url,
                    t,
                    f"more than {self.max_samples:,} values kept; from here on only the "
                    "metrics infercost maps are kept",
                )

    def _record_error(self, url: str, t: float, reason: str) -> None:
        key = (url, reason)
        seen = self._errors.get(key)
        if seen is None:
            self._errors[key] = TelemetryError(url, t, reason, 1, t)
        else:
            self._errors[key] = seen._replace(occurrences=seen.occurrences + 1, t_last=t)

    def _fetch(self, url: str) -> tuple[float, str]:
        """GET one URL within the timeout: (timestamp, body text), or _ScrapeFailed."""
        client = self._client
        if client is None:  # pragma: no cover - start() sets it before any thread runs
            raise _ScrapeFailed("scraper not started")
        deadline = time.monotonic() + self.timeout_s
        t_sent = self._clock()
        try:
            with client.stream("GET", url) as response:
                t_headers = self._clock()
                if not response.is_success:
                    raise _ScrapeFailed(_http_status_reason(response.status_code))
                body = bytearray()
                # The timeout bounds each read; the deadline bounds a slow trickle too.
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_body_bytes:
                        raise _ScrapeFailed(
                            f"response larger than {self.max_body_bytes // (1024 * 1024)} MiB; "
                            "is this a metrics URL?"
                        )
                    if time.monotonic() > deadline:
                        raise _ScrapeFailed(self._timeout_reason())
        except httpx.TimeoutException as exc:
            raise _ScrapeFailed(self._timeout_reason()) from exc
        except httpx.ConnectError as exc:
            raise _ScrapeFailed(_connect_reason(exc)) from exc
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise _ScrapeFailed("not a valid http:// or https:// URL") from exc
        except httpx.TooManyRedirects as exc:
            raise _ScrapeFailed("too many redirects") from exc
        except httpx.RemoteProtocolError as exc:
            raise _ScrapeFailed("the server closed the connection without a full response") from exc
        except httpx.HTTPError as exc:
            raise _ScrapeFailed(f"request failed ({type(exc).__name__})") from exc
        return (t_sent + t_headers) / 2.0, body.decode("utf-8", errors="replace")

    def _timeout_reason(self) -> str:
        return f"timed out after {self.timeout_s:g} s"

    def _parse(self, url: str, t: float, text: str) -> list[Sample]:
        samples, unmapped = _parse(
            text, url, t, keep_unmapped=self.keep_unmapped, label_cache=self._label_cache
        )
        with self._lock:
            self._unmapped |= unmapped
        return samples


def parse_text(text: str, url: str = "", t: float = 0.0) -> list[Sample]:
    """The samples of one Prometheus text exposition, all stamped `t` and `url`.

    Raises ValueError("not Prometheus text: ...") when `text` is something else.
    """
    try:
        samples, _ = _parse(text, url, t, keep_unmapped=True, label_cache={})
    except _ScrapeFailed as failure:
        raise ValueError(str(failure)) from None
    return samples


LabelCache = dict[tuple[tuple[str, str], ...], dict[str, str]]


def _parse(
    text: str, url: str, t: float, *, keep_unmapped: bool, label_cache: LabelCache
) -> tuple[list[Sample], set[str]]:
    samples: list[Sample] = []
    unmapped: set[str] = set()
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
                if lookup(name) is None:
                    unmapped.add(name)
                    if not keep_unmapped:
                        continue
                key = tuple(sample.labels.items())
                # One shared dict per distinct label set keeps a long run's samples small.
                labels = label_cache.setdefault(key, sample.labels)
                samples.append(Sample(t, url, sys.intern(name), labels, float(sample.value)))
    except Exception as exc:  # the parser's errors on arbitrary input vary in type
        raise _ScrapeFailed(f"not Prometheus text: {_excerpt(text)}") from exc
    return samples, unmapped


def _make_client(timeout_s: float) -> httpx.Client:
    # trust_env=False: a proxy configured for the worker's outbound traffic must not sit
    # between it and an exporter on the same network.
    return httpx.Client(
        timeout=httpx.Timeout(timeout_s),
        trust_env=False,
        follow_redirects=True,
        headers={"Accept": _ACCEPT},
    )


def _http_status_reason(status: int) -> str:
    hints = {
        401: "the metrics URL needs credentials",
        403: "the metrics URL refused access",
        404: "nothing at this path; check the metrics URL",
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
    return f"could not connect ({text[:_EXCERPT_CHARS]})" if text else "could not connect"


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "an empty line"
    if len(flat) > _EXCERPT_CHARS:
        flat = flat[:_EXCERPT_CHARS] + "..."
    return repr(flat)
