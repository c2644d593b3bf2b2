#!/usr/bin/env python3
"""Soak test of `ggflow serve` (not part of CI): C concurrent clients for D minutes, each sending
streamed chat or completion requests with random prompts, random max_tokens and random sampling,
and cancelling a random share of them mid-stream (the socket is closed). Every ten seconds the
server's RSS and /metrics are sampled. At the end: every request either finished or was cancelled
by its client (no error, no 5xx), the server is idle (0 running, 0 waiting, 0 KV blocks in use),
RSS after warm-up stayed flat (last sample within --rss-slack MiB of the first after warm-up), and
after SIGTERM the server exits 0 and logs that the block manager's invariants hold with 0 blocks
held. Prints a report (the figures for docs/RELIABILITY.md) and exits 1 on any failure.

    .venv/bin/python scripts/soak.py [--minutes 30] [--clients 32] [--cancel 0.2]
                                     [--ggflow build/ggflow] [--model models/...gguf] [-t 2]
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("the cat dog sun river city night music paper garden stone window light story friend road "
         "winter ocean bread house teacher mountain storm letter").split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_:]+)(\{[^}]*\})? ([-0-9.e+]+|NaN)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.errors = []
        self.tokens = 0

    def add(self, key, tokens=0, error=None):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            self.tokens += tokens
            if error and len(self.errors) < 20:
                self.errors.append(error)


def one_request(port, rng, stats, cancel_share):
    chat = rng.random() < 0.7
    n_words = rng.choice([3, 10, 40, 150])
    text = " ".join(rng.choice(WORDS) for _ in range(n_words))
    body = {"max_tokens": rng.choice([1, 8, 32, 128]), "stream": True,
            "temperature": rng.choice([0, 0.7, 1.2]), "stream_options": {"include_usage": True}}
    if rng.random() < 0.3:
        body["stop"] = [rng.choice(WORDS)]
    if chat:
        body["messages"] = [{"role": "user", "content": f"Tell me about {text}."}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = text
        path = "/v1/completions"
    cancel_after = rng.randint(1, 20) if rng.random() < cancel_share else None
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status == 429:
            resp.read()
            stats.add("429")
            return
        if resp.status != 200:
            stats.add(f"http_{resp.status}", error=f"{resp.status}: {resp.read()[:300]!r}")
            return
        chunks = 0
        finish = None
        tokens = 0
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                break
            chunk = json.loads(line[6:])
            for ch in chunk.get("choices", []):
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            chunks += 1
            if cancel_after is not None and chunks >= cancel_after:
                conn.sock.shutdown(socket.SHUT_RDWR)
                stats.add("cancelled_by_client")
                return
        if finish in ("stop", "length"):
            stats.add(f"finished_{finish}", tokens)
        else:
            stats.add(f"finish_{finish}", error=f"finish_reason {finish!r}")
    except Exception as e:  # a dropped connection the client did not ask for
        stats.add("client_error", error=f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--model", default=str(ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--cancel", type=float, default=0.2, help="share of requests cancelled mid-stream")
    ap.add_argument("--warmup", type=float, default=60, help="seconds before the RSS baseline")
    ap.add_argument("--rss-slack", type=float, default=32, help="MiB the RSS may grow after warm-up")
    ap.add_argument("--kv-cache", default="64MiB", help="small, so the pool runs full and preempts")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    port = free_port()
    log = open(ROOT / "build" / "soak-server.log", "w")
    cmd = [a.ggflow, "serve", "-m", a.model, "--port", str(port), "-t", str(a.threads), "--parallel", "8",
           "--max-queue", str(a.clients), "--kv-cache", a.kv_cache, "--ctx-size", "1024", "--no-webui"]
    srv = subprocess.Popen(cmd, stderr=log, stdout=log)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/ready")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(0.2)
    else:
        print("soak: the server did not become ready", file=sys.stderr)
        srv.kill()
        return 1

    stats = Stats()
    deadline = time.time() + a.minutes * 60
    stop = threading.Event()

    def client(i):
        rng = random.Random(a.seed * 1000 + i)
        while time.time() < deadline and not stop.is_set():
            one_request(port, rng, stats, a.cancel)

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    samples = []  # (seconds, rss MiB, running, waiting, kv usage, preemptions)
    while any(t.is_alive() for t in threads):
        time.sleep(10)
        m = metrics(port)
        samples.append((time.time() - t0, rss_mib(srv.pid), m.get("ggflow:num_requests_running", -1),
                        m.get("ggflow:num_requests_waiting", -1), m.get("ggflow:kv_cache_usage_perc", -1),
                        m.get("ggflow:num_preemptions_total", -1)))
        s = samples[-1]
        print(f"soak: {s[0]:7.0f} s  RSS {s[1]:7.1f} MiB  running {s[2]:.0f}  waiting {s[3]:.0f}  "
              f"KV {s[4]:.2f}  preemptions {s[5]:.0f}", file=sys.stderr, flush=True)
    elapsed = time.time() - t0
    time.sleep(2)
    idle = metrics(port)
    srv.send_signal(signal.SIGTERM)
    try:
        rc = srv.wait(60)
    except subprocess.TimeoutExpired:
        srv.kill()
        rc = "killed"
    log.close()
    tail = (ROOT / "build" / "soak-server.log").read_text(errors="replace").splitlines()[-3:]

    failures = []
    bad = {k: v for k, v in stats.counts.items() if k not in ("finished_stop", "finished_length", "cancelled_by_client", "429")}
    if bad:
        failures.append(f"unexpected outcomes {bad}: {stats.errors[:5]}")
    for key in ("ggflow:num_requests_running", "ggflow:num_requests_waiting", "ggflow:kv_cache_usage_perc"):
        if idle.get(key) != 0:
            failures.append(f"not idle at the end: {key} = {idle.get(key)}")
    if rc != 0:
        failures.append(f"exit code after SIGTERM {rc}")
    if not any("invariants hold" in l and " 0 of " in l for l in tail):
        failures.append(f"block manager at exit: {tail}")
    base = [s for s in samples if s[0] >= a.warmup]
    if len(base) >= 2 and base[-1][1] - base[0][1] > a.rss_slack:
        failures.append(f"RSS grew {base[-1][1] - base[0][1]:.1f} MiB after warm-up ({base[0][1]:.1f} -> {base[-1][1]:.1f})")

    total = sum(stats.counts.values())
    print(f"\nsoak: {a.clients} clients for {elapsed / 60:.1f} min: {total} requests "
          f"({', '.join(f'{k} {v}' for k, v in sorted(stats.counts.items()))}), {stats.tokens} tokens generated "
          f"({stats.tokens / elapsed:.0f}/s), preemptions {idle.get('ggflow:num_preemptions_total', 0):.0f}")
    if base:
        print(f"soak: RSS after warm-up {base[0][1]:.1f} MiB -> {base[-1][1]:.1f} MiB at the end "
              f"(max {max(s[1] for s in base):.1f})")
    print(f"soak: at exit: {tail[-1] if tail else '?'} (exit code {rc})")
    if failures:
        print("soak: FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("soak: no error, no leaked block, RSS flat")
    return 0


if __name__ == "__main__":
    sys.exit(main())
