#!/usr/bin/env python3
"""Decode speed with a JSON-Schema constraint against free decoding, ggflow and llama.cpp's
llama-server, same file, same threads, same run.

    bench/structured_decode.py [--ggflow build/ggflow] [--llama-server PATH] [-t 2] [-n 128]
                               [--streams 1,8] [--rounds 3] MODEL.gguf [...]

For each model, each server in turn (ggflow serve, then llama-server) is started once; then for
--rounds rounds and each stream count B, B concurrent /v1/completions requests decode -n tokens
freely (ignore_eos) and B decode under SCHEMA (an object with a list of 40 strings: the answer
reaches -n tokens before the grammar may end, so both modes produce exactly -n tokens), the two
alternating. A mode's figure is the median over the rounds of B * n / wall time (aggregate tokens
per second, the short prompt's prefill included, the same in both modes). The ratio constrained /
free is each server's cost of the constraint (>= 0.95 is the target for ggflow). ggflow's mask
times come from its /metrics (ggflow:grammar_mask_seconds, p50 / p99 over the last masks);
llama-server reports no mask time, so its per-token grammar cost is derived: 1/tps_constrained -
1/tps_free (single stream). Never run it beside a build or a test suite on the same cores.
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "object",
          "properties": {"items": {"type": "array", "items": {"type": "string", "maxLength": 24},
                                   "minItems": 40, "maxItems": 40}},
          "required": ["items"], "additionalProperties": False}
PROMPT = "A JSON list of forty fruit names and short descriptions:\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"{path}: {r.status} {data[:300]!r}")
    return json.loads(data)


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read().decode()


class Server:
    def __init__(self, cmd, port, ready_path):
        self.port = port
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited: {Path(self.log.name).read_text()[-800:]}")
            try:
                if get(port, ready_path)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{cmd[0]} not ready in 300 s")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.unlink(self.log.name)


def body(kind, n, constrained, i):
    b = {"prompt": PROMPT, "max_tokens": n, "temperature": 0, "seed": i}
    if kind == "ggflow":
        b["model"] = None
    if constrained:
        b["json_schema"] = SCHEMA
    else:
        b["ignore_eos"] = True
    b = {k: v for k, v in b.items() if v is not None}
    if kind == "llama":
        b["n_predict"] = n
    return b


def run_batch(port, kind, n, streams, constrained):
    def one(i):
        r = post(port, "/v1/completions", body(kind, n, constrained, i))
        return r["usage"]["completion_tokens"]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(streams) as pool:
        toks = list(pool.map(one, range(streams)))
    dt = time.perf_counter() - t0
    if any(t != n for t in toks):
        raise RuntimeError(f"{kind}: expected {n} tokens per request, got {toks} (constrained={constrained})")
    return sum(toks) / dt


def mask_quantiles(port):
    _, text = get(port, "/metrics")
    q = {}
    for line in text.splitlines():
        if line.startswith("ggflow:grammar_mask_seconds{quantile="):
            k = line.split('"')[1]
            q[k] = float(line.split()[-1])
        elif line.startswith("ggflow:grammar_mask_seconds_count"):
            q["count"] = int(line.split()[-1])
    return q


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--llama-server", default=None)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--streams", default="1,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    streams = [int(s) for s in a.streams.split(",")]
    llama = a.llama_server
    if llama is None:
        out = subprocess.run([str(ROOT / "bench" / "install_llamacpp.sh")], check=True, capture_output=True, text=True)
        llama = str(Path(out.stdout.strip().splitlines()[-1]) / "llama-server")
    ctx = max(streams) * (a.n + 64) + 256
    print("| model | server | streams | free t/s | JSON schema t/s | constrained / free | mask p50 / p99 |")
    print("|---|---|---:|---:|---:|---:|---|")
    for model in a.models:
        for kind in ("llama", "ggflow"):
            port = free_port()
            if kind == "ggflow":
                cmd = [a.ggflow, "serve", "-m", model, "--port", str(port), "-t", str(a.threads),
                       "--parallel", str(max(streams)), "--ctx-size", str(a.n + 256)]
                srv = Server(cmd, port, "/ready")
            else:
                cmd = [llama, "-m", model, "--port", str(port), "-t", str(a.threads), "-np", str(max(streams)),
                       "-c", str(ctx), "--no-webui", "-ngl", "0"]
                srv = Server(cmd, port, "/health")
            try:
                res = {}
                for B in streams:
                    run_batch(srv.port, kind, 16, B, False)  # warm-up
                    run_batch(srv.port, kind, 16, B, True)
                    free, cons = [], []
                    for _ in range(a.rounds):
                        free.append(run_batch(srv.port, kind, a.n, B, False))
                        cons.append(run_batch(srv.port, kind, a.n, B, True))
                    res[B] = (statistics.median(free), statistics.median(cons))
                q = mask_quantiles(srv.port) if kind == "ggflow" else {}
            finally:
                srv.stop()
            for B, (f, c) in res.items():
                if kind == "ggflow":
                    mask = f"{q.get('0.5', 0) * 1e6:.0f} / {q.get('0.99', 0) * 1e6:.0f} us ({q.get('count', 0)} masks)"
                else:
                    mask = f"~{max(0.0, 1 / c - 1 / f) * 1e6 / (1 if B == 1 else B):.0f} us/token (derived)" if B == 1 else ""
                print(f"| {Path(model).name} | {'ggflow' if kind == 'ggflow' else 'llama.cpp'} | {B} | {f:.1f} | {c:.1f} | "
                      f"{c / f:.3f} | {mask} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
