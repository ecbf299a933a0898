"""The job's TTFT against the wire's: tcpdump on loopback beside the load generator. Prints
figures; asserts nothing. Needs root (or CAP_NET_RAW) and tcpdump on the PATH.

    .venv/bin/python bench/wire_ttft.py [--levels 64,256] [--rounds 5]

For each level, a simulator in fixed mode (TTFT 50 ms, 10 ms between tokens, 64 tokens)
serves one closed-loop level of the worker's own load generator (workers/loadgen: the load
client, the closed loop, the stream reader, the client health with its pause watch, the heap
collected and frozen before the level as the worker does), while tcpdump records every
packet on the simulator's port with the kernel's nanosecond timestamps.

- wire TTFT: per request, the client's packet carrying `POST` to the first packet of the
  answer whose bytes carry non-empty content (`"content":"x`), on the same connection;
- job TTFT: the same requests' own samples (t_first - t_send, docs/figures.md);
- matched: each job request paired with the wire request sent within 2 ms of it on the
  wall clock (the job's monotonic stamps moved onto the wall clock by one measured offset),
  and the job's TTFT minus the wire's, per request;
- the level's verdict as a run would carry it: client_bound, the adequacy reasons about the
  client, pause exposure, the longest loop stall and garbage collection.

The machine should be quiet: client, simulator and tcpdump share it, and on a busy 2-core
machine all three are late by turns (the load average is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import numpy as np

from infercost.figures.metrics import summarize
from sim.config import SimConfig
from sim.process import sim_process
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.health import ClientHealth
from workers.loadgen.stream import RawRequest, Target, open_connections, request_body
from workers.loadgen.transport import load_client

TTFT_MS, ITL_MS, TOKENS = 50.0, 10.0, 64
PROMPT = " ".join(["word"] * 64)
MATCH_NS = 2_000_000


@dataclass
class Packet:
    ts_ns: int
    src_port: int
    dst_port: int
    payload: bytes


def read_pcap(path: Path) -> list[Packet]:
    """IPv4/TCP packets of a pcap file (Ethernet or Linux cooked link layer, nanosecond or
    microsecond timestamps)."""
    data = path.read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise ValueError(f"not a little-endian pcap file: {magic:#x}")
    nano = magic == 0xA1B23C4D
    link = struct.unpack("<I", data[20:24])[0]
    link_len = {1: 14, 113: 16, 276: 20}.get(link)
    if link_len is None:
        raise ValueError(f"link type {link} not read here")
    packets = []
    at = 24
    while at + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack("<IIII", data[at : at + 16])
        frame = data[at + 16 : at + 16 + incl]
        at += 16 + incl
        ip = frame[link_len:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        tcp = ip[ihl:total]
        if len(tcp) < 20:
            continue
        src, dst = struct.unpack(">HH", tcp[:4])
        offset = (tcp[12] >> 4) * 4
        ts = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        packets.append(Packet(ts, src, dst, bytes(tcp[offset:])))
    return packets


def wire_ttfts(packets: list[Packet], port: int) -> list[tuple[int, int]]:
    """(request packet time, TTFT ns) of every streamed request seen on the wire."""
    pending: dict[int, int] = {}  # client port -> its request's time, until content came
    out = []
    for p in sorted(packets, key=lambda p: p.ts_ns):
        if p.dst_port == port and p.payload.startswith(b"POST "):
            pending[p.src_port] = p.ts_ns
        elif p.src_port == port and p.dst_port in pending:
            at = p.payload.find(b'"content":"')
            if at >= 0 and p.payload[at + 11 : at + 12] not in (b'"', b""):
                sent = pending.pop(p.dst_port)
                out.append((sent, p.ts_ns - sent))
    return out


def wall_minus_perf_ns() -> int:
    """time.time_ns() - perf_counter_ns() from the closest of a few bracketed reads."""
    best: tuple[int, int] | None = None
    for _ in range(20):
        a = perf_counter_ns()
        wall = time.time_ns()
        b = perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, wall - (a + b) // 2)
    assert best is not None
    return best[1]


async def level(
    base_url: str, users: int, measured: int
) -> tuple[list[RawRequest], dict[str, Any]]:
    """One closed-loop level as a worker runs it; its requests and its reading health."""
    target = Target.for_endpoint(base_url, "openai-chat", "sim-model", None, 120.0)
    body = request_body(target, PROMPT, TOKENS, stream=True, ignore_eos=True, temperature=None)
    ramp_s = (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000.0
    plan = LevelPlan(
        users, users, measured, True, lambda _s: (body, 64), lambda _r: None, ramp_s=ramp_s
    )
    done: list[RawRequest] = []
    health = ClientHealth()
    async with load_client(users, health=health) as client:
        await open_connections(client, target, users)
        gc.collect()
        gc.freeze()
        health.start()
        try:
            await run_closed_loop(client, target, plan, done)
        finally:
            reading = await health.stop(r.chunk_ns for r in done)
            gc.unfreeze()
    return done, reading


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--levels", default="64,256")
    parser.add_argument("--rounds", type=int, default=5, help="measured requests per user")
    args = parser.parse_args()
    if shutil.which("tcpdump") is None:
        raise SystemExit("tcpdump is not installed (apt-get install tcpdump)")
    print(
        f"# bench/wire_ttft.py, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
        f"load average {os.getloadavg()[0]:.1f} at the start"
    )
    print(
        f"sim fixed ttft={TTFT_MS:g} ms itl={ITL_MS:g} ms, {TOKENS} tokens; closed loop, "
        f"warm-up one request per user, then {args.rounds} per user measured"
    )
    print(f"{'users':>5} {'':6} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}   verdict")
    config = SimConfig(port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, model="sim-model")
    for users in (int(x) for x in args.levels.split(",")):
        with sim_process(config) as sim, tempfile.TemporaryDirectory() as tmp:
            port = int(sim.base_url.rsplit(":", 1)[1].split("/")[0])
            pcap = Path(tmp) / "wire.pcap"
            dump = subprocess.Popen(
                ["tcpdump", "-i", "lo", "-w", str(pcap), "-s", "1024", "-B", "65536",
                 "--time-stamp-precision=nano", "-U", f"tcp port {port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)  # tcpdump listening before the first packet
            load0 = os.getloadavg()[0]
            offset = wall_minus_perf_ns()
            done, reading = asyncio.run(level(sim.openai_base_url, users, args.rounds * users))
            time.sleep(0.5)
            dump.send_signal(signal.SIGINT)
            dump.wait(timeout=30)
            packets = read_pcap(pcap)
        measured = [r for r in done if not r.warmup and r.error_class is None and r.chunk_ns]
        first_send = min(r.t_send for r in measured) + offset
        wire = [(t, ttft) for t, ttft in wire_ttfts(packets, port) if t >= first_send - MATCH_NS]
        job_ms = [(r.chunk_ns[0] - r.t_send) / 1e6 for r in measured]
        wire_ms = [ttft / 1e6 for _, ttft in wire]
        # Pair each job request with the wire request sent nearest to it on the wall clock.
        wire_sorted = sorted(wire)
        sends = np.array([t for t, _ in wire_sorted], dtype=np.int64)
        diffs = []
        for r in measured:
            at = r.t_send + offset
            k = int(np.searchsorted(sends, at))
            near = [j for j in (k - 1, k) if 0 <= j < len(sends)]
            if near:
                j = min(near, key=lambda j: abs(int(sends[j]) - at))
                if abs(int(sends[j]) - at) <= MATCH_NS:
                    diffs.append((r.chunk_ns[0] - r.t_send - wire_sorted[j][1]) / 1e6)
        timings = [r.timing(min(x.t_sched for x in done)) for r in done]
        figures = summarize(timings, target_concurrency=users, reading=reading)
        reasons = [
            r["code"]
            for r in (figures.adequacy or {})["reasons"]
            if r["code"].startswith(("client", "concurrency"))
        ]
        client = figures.client
        verdict = (
            f"client_bound={figures.client_bound} {reasons} exposure={client.get('pause_exposure')} "
            f"stall max={client.get('loop_stall_max_ms')} ms gc max={(client.get('gc') or {}).get('max_ms')} ms "
            f"gc passes={(client.get('gc') or {}).get('collections')}"
        )
        for name, values in (("wire", wire_ms), ("job", job_ms), ("job-wire", diffs)):
            print(
                f"{users:>5} {name:8} {pct(values, 50):7.1f} {pct(values, 90):7.1f} "
                f"{pct(values, 99):7.1f} {max(values, default=float('nan')):7.1f}"
                + (f"   {verdict}" if name == "job" else f"   n={len(values)}")
            )
        print(
            f"      load average {load0:.1f} when the level started, {os.getloadavg()[0]:.1f} after"
        )


if __name__ == "__main__":
    main()
