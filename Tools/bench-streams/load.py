#!/usr/bin/env python3
"""Many open event streams on one groupdefaults-server, and a steady rate of pushes over them.

Opens STREAMS event streams (GET /v1/suites/SUITE/events), one suite and device id each (the server
records each device, and its sighting at each heartbeat, as a syncing device's), spread over the tokens
of TOKENS (one account each) and over several loopback source addresses (each has its own ~28,000
ephemeral ports), then pushes one op at a time, RATE per second for SECONDS, each to a random
stream's suite, and times push sent -> that stream has the event. Prints one JSON object:

  streams, accounts, sources, open_seconds, rss_before_kib, rss_open_kib, kib_per_stream,
  idle_seconds, idle_events (events and heartbeats the streams got while nothing was pushed),
  idle_server_cores, idle_postgres_cores, pushes, woken, missed, wake_p50_ms, wake_p99_ms,
  server_cpu_seconds, server_cores, postgres_cores

The server's RSS and CPU are read from /proc/PID (--server-pid); with --postgres-pid, the CPU of
that postmaster and its backends too (null without). The idle window is one heartbeat period by
default, so that every stream writes its heartbeat once in it. Written with asyncio alone (no
package to install); used by `groupdefaults-bench server --streams N`.
"""

import argparse
import asyncio
import json
import os
import random
import resource
import sys
import time
import uuid


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid):
    """The CPU of `pid` and of its children (a postmaster's backends); None without a pid."""
    if pid is None:
        return None
    total = cpu_seconds(pid)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (FileNotFoundError, ProcessLookupError):
            pass  # a backend that ended meanwhile
    return total


def cores(before, after, seconds):
    return None if before is None or after is None else (after - before) / seconds


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), int(-(-p * len(sorted_values) // 100))))
    return sorted_values[rank - 1]


class Stream:
    """One open event stream: its suite, and the send time of the push it waits for."""

    def __init__(self, index, suite, token):
        self.index = index
        self.suite = suite
        self.token = token
        self.opened = asyncio.get_running_loop().create_future()
        self.waiting = {}  # revision or None -> send time (ns)
        self.pending_sent = []  # send times of pushes whose revision is not known yet
        self.arrivals = 0
        self.comments = 0
        self.writer = None


async def hold(stream, host, port, source, latencies, closed):
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0), limit=1 << 16)
    except OSError as error:
        if not stream.opened.done():
            stream.opened.set_exception(error)
        return
    stream.writer = writer
    writer.write(
        (
            f"GET /v1/suites/{stream.suite}/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {stream.token}\r\nDevice-ID: {stream.index + 1}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
    )
    try:
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"stream {stream.index}: {status.decode(errors='replace').strip()}")
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        # Chunked transfer: the size lines are skipped; only the event lines matter here.
        event_id = None
        while True:
            line = await reader.readline()
            if not line:
                break
            now = time.monotonic_ns()
            if line.startswith(b"retry:"):
                if not stream.opened.done():
                    stream.opened.set_result(None)
            elif line.startswith(b":"):
                stream.comments += 1
            elif line.startswith(b"id:"):
                event_id = line[3:].strip()
            elif line.startswith(b"data:"):
                stream.arrivals += 1
                if stream.pending_sent:
                    latencies.append(now - stream.pending_sent.pop(0))
                event_id = None
    except (OSError, asyncio.IncompleteReadError) as error:
        if not stream.opened.done():
            stream.opened.set_exception(error)
    except Exception as error:  # noqa: BLE001 - reported through the future
        if not stream.opened.done():
            stream.opened.set_exception(error)
    finally:
        closed.append(stream.index)
        writer.close()


async def pusher(host, port, queue, streams, counter, errors):
    reader, writer = await asyncio.open_connection(host, port)
    while True:
        item = await queue.get()
        if item is None:
            break
        stream = streams[item]
        counter[0] += 1
        hlc = (int(time.time() * 1000) << 16) | (counter[0] & 0xFFFF)
        body = json.dumps(
            {
                "device_id": "1",
                "batch_id": str(uuid.uuid4()),
                "ops": [{"key": "k", "value": {"integer": counter[0]}, "hlc": str(hlc)}],
            }
        ).encode()
        stream.pending_sent.append(time.monotonic_ns())
        writer.write(
            (
                f"POST /v1/suites/{stream.suite}/push HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Bearer {stream.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        status = await reader.readline()
        length = 0
        chunked = False
        while True:
            header = await reader.readline()
            if header in (b"\r\n", b"\n", b""):
                break
            name, _, value = header.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            if name.lower() == "transfer-encoding" and "chunked" in value:
                chunked = True
        if chunked:
            while True:
                size = int((await reader.readline()).strip(), 16)
                await reader.readexactly(size + 2)
                if size == 0:
                    break
        elif length:
            await reader.readexactly(length)
        if b" 200 " not in status:
            errors.append(status.decode(errors="replace").strip())
            stream.pending_sent.pop()
    writer.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--postgres-pid", type=int, help="the server's PostgreSQL postmaster, to read its CPU")
    parser.add_argument("--tokens", required=True, help="a file of tokens, one per line (one account each)")
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--rate", type=float, default=200, help="pushes per second")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--idle-seconds", type=float, default=15, help="the server's heartbeat period: each stream's heartbeat once")
    parser.add_argument("--sources", type=int, default=0, help="loopback source addresses (0: one per 20,000 streams)")
    arguments = parser.parse_args()

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if arguments.streams + 100 > hard:
        sys.exit(f"load.py: {arguments.streams} streams need that many open files; the limit is {hard}")
    tokens = [line.strip() for line in open(arguments.tokens) if line.strip()]
    sources = [f"127.0.0.{1 + index}" for index in range(arguments.sources or 1 + arguments.streams // 20_000)]

    loop = asyncio.get_running_loop()
    streams = [Stream(index, f"group.load.{index}", tokens[index % len(tokens)]) for index in range(arguments.streams)]
    latencies = []
    closed = []
    rss_before = rss_kib(arguments.server_pid)
    started = time.monotonic()
    tasks = []
    # In waves, so that the server's accept backlog never overflows.
    wave = 500
    for first in range(0, len(streams), wave):
        group = streams[first : first + wave]
        for stream in group:
            source = sources[stream.index % len(sources)]
            tasks.append(loop.create_task(hold(stream, arguments.host, arguments.port, source, latencies, closed)))
        await asyncio.gather(*(stream.opened for stream in group))
    open_seconds = time.monotonic() - started
    await asyncio.sleep(1)
    rss_open = rss_kib(arguments.server_pid)

    # Idle: what the open streams receive while nothing is pushed (heartbeats only, every 15 s).
    comments_before = sum(stream.comments for stream in streams)
    cpu_idle_before = cpu_seconds(arguments.server_pid)
    postgres_idle_before = tree_cpu_seconds(arguments.postgres_pid)
    await asyncio.sleep(arguments.idle_seconds)
    idle_cpu = cpu_seconds(arguments.server_pid) - cpu_idle_before
    idle_postgres_cores = cores(postgres_idle_before, tree_cpu_seconds(arguments.postgres_pid), arguments.idle_seconds)
    idle_events = sum(stream.comments + stream.arrivals for stream in streams) - comments_before

    # A steady rate of single-op pushes, each to a random stream's suite.
    queue = asyncio.Queue()
    counter = [0]
    errors = []
    pushers = [loop.create_task(pusher(arguments.host, arguments.port, queue, streams, counter, errors)) for _ in range(8)]
    total = int(arguments.rate * arguments.seconds)
    rng = random.Random(7)
    cpu_before = cpu_seconds(arguments.server_pid)
    postgres_before = tree_cpu_seconds(arguments.postgres_pid)
    push_started = time.monotonic()
    for number in range(total):
        delay = push_started + number / arguments.rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait(rng.randrange(len(streams)))
    for _ in pushers:
        queue.put_nowait(None)
    await asyncio.gather(*pushers)
    deadline = time.monotonic() + 5
    while len(latencies) < total - len(errors) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    elapsed = time.monotonic() - push_started
    server_cpu = cpu_seconds(arguments.server_pid) - cpu_before
    postgres_cores = cores(postgres_before, tree_cpu_seconds(arguments.postgres_pid), elapsed)
    closed_early = len(closed)
    for stream in streams:
        if stream.writer:
            stream.writer.close()
    for task in tasks:
        task.cancel()
    latencies.sort()
    print(
        json.dumps(
            {
                "streams": arguments.streams,
                "accounts": len(tokens),
                "sources": len(sources),
                "open_seconds": round(open_seconds, 2),
                "rss_before_kib": rss_before,
                "rss_open_kib": rss_open,
                "kib_per_stream": (rss_open - rss_before) / arguments.streams,
                "idle_seconds": arguments.idle_seconds,
                "idle_events": idle_events,
                "idle_server_cores": idle_cpu / arguments.idle_seconds,
                "idle_postgres_cores": idle_postgres_cores,
                "pushes": total,
                "push_errors": errors[:5],
                "woken": len(latencies),
                "missed": total - len(errors) - len(latencies),
                "wake_p50_ms": percentile(latencies, 50) / 1e6 if latencies else None,
                "wake_p99_ms": percentile(latencies, 99) / 1e6 if latencies else None,
                "server_cpu_seconds": server_cpu,
                "server_cores": server_cpu / elapsed,
                "postgres_cores": postgres_cores,
                "closed_early": closed_early,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
