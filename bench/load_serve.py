#!/usr/bin/env python3
"""Loopback load test of `ggflow serve` against llama.cpp's llama-server: same .gguf, same threads.

    bench/load_serve.py --model MODEL.gguf [--threads 2] [--clients 1,4,8,16] [--requests-per-client 4]
                        [--max-tokens 64] [--parallel 8] [--ctx 2048] [--ggflow build/ggflow]
                        [--llama-server PATH] [--only ggflow|llama] [--timeout 300] [--json OUT.json]
                        [--ggflow-args '--kv-cache 1GiB'] [--llama-args '...'] [--reuse-prompts]

Both servers are started once on free loopback ports (ggflow: `ggflow serve -m M -t T --parallel P
--ctx-size X`; llama-server: `llama-server -m M -t T -np P -c P*X`, continuous batching being its
default and -c the total over its P slots, so both run P sequences of up to X tokens each; ggflow's
KV pool keeps its default size unless --ggflow-args says otherwise, llama-server's holds P*X
tokens), get one warm-up request each, and then take
turns, one concurrency level at a time (ggflow at level 1, llama-server at level 1, ggflow at the
next level, ...); never both at once. At a level of C clients, C threads each send R streamed chat
completions back to back (temperature 0, max_tokens N, a fixed set of varied prompts,
`stream_options.include_usage`), so every run stops by itself; a request that has not finished
after --timeout seconds is dropped and counted as failed. Each prompt starts with a tag naming its
level, client and request (without --reuse-prompts), so neither server's prefix cache finds more of
it than the chat template's header; both servers get the same texts.

Per level and server: aggregate generated tokens/s (completion tokens of all requests / wall time of
the level), p50/p99 time to first token (request sent -> first non-empty content delta), p50/p99
time per output token ((last content - first content) / (completion tokens - 1)), requests OK /
failed. Completion tokens come from the usage chunk; without one, content chunks are counted.
Greedy decoding may still differ between the two engines, and ggflow has no `ignore_eos`, so the
outputs (and their lengths) need not match: tokens/s counts what each actually generated.

The server that is not being measured stays up and idle; its CPU time is sampled after start-up and
during the other's turn (reported; with --pause-idle, or when it is not idle-quiet, it is stopped
with SIGSTOP while the other is measured). Prints a Markdown table: llama-server, ggflow and the ratio
ggflow / llama-server. A benchmark, not a test: nothing is asserted. Never run it beside a build
or a test suite on the same cores.
"""
import argparse
import http.client
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a refrigerator keeps food cold, step by step.",
    "List ten ideas for a weekend trip with children and say why each is fun.",
    "Describe the water cycle to a ten-year-old.",
    "What are the main differences between a cat and a dog as pets? Give details.",
    "Write a poem about autumn leaves falling in a quiet park.",
    "Give me a recipe for a simple vegetable soup, with the steps.",
    "Why is the sky blue? Explain it in plain words.",
    "Tell me about the history of bicycles.",
    "Write a letter to a friend describing your new apartment.",
    "How do plants make their food? Describe photosynthesis.",
    "Suggest a daily routine for someone learning to play the guitar.",
    "Summarize the rules of chess for a beginner.",
    "Describe a busy market in a small town on a Saturday morning.",
    "What should I pack for a week of hiking in the mountains?",
    "Explain what a computer program is and how it runs.",
]


# ---------------------------------------------------------------------------------------------
# servers


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


class Server:
    def __init__(self, name, cmd, port, ready_path, logdir):
        self.name, self.cmd, self.port, self.ready_path = name, cmd, port, ready_path
        self.log_path = Path(logdir) / f"{name}.log"
        self.proc = None
        self.paused = False

    def start(self, timeout):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; log: {self.log_path}\n"
                                   + self.log_tail())
            try:
                c = http.client.HTTPConnection(HOST, self.port, timeout=2)
                c.request("GET", self.ready_path)
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"{self.name} not ready after {timeout}s; log: {self.log_path}\n" + self.log_tail())

    def log_tail(self, n=20):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def pause(self):
        if not self.paused:
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self):
        if self.paused:
            self.proc.send_signal(signal.SIGCONT)
            self.paused = False

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()


def llama_server_path(given):
    if given:
        return given
    out = subprocess.run([str(ROOT / "bench" / "install_llamacpp.sh")], check=True, capture_output=True, text=True)
    return str(Path(out.stdout.strip().splitlines()[-1]) / "llama-server")


# ---------------------------------------------------------------------------------------------
# one streamed request


def stream_chat(port, prompt, max_tokens, timeout):
    """Sends one streamed chat completion; returns a record of its timings and token counts."""
    body = json.dumps({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }).encode()
    rec = {"ok": False, "ttft": None, "tpot": None, "completion_tokens": 0, "prompt_tokens": None,
           "cached_tokens": None, "content_chunks": 0, "usage_reported": False, "finish_reason": None, "error": None}
    t0 = time.monotonic()
    deadline = t0 + timeout
    t_first = t_last = None
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.connect()
        sock = conn.sock  # the response keeps reading it even where the connection lets go of it
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}: {resp.read(500).decode(errors='replace')}"
            return rec
        done = False
        while not done:
            left = deadline - time.monotonic()
            if left <= 0:
                rec["error"] = f"timeout after {timeout}s"
                return rec
            sock.settimeout(left)
            line = resp.readline()
            if not line:
                break  # the server closed the stream
            line = line.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators, SSE comments (keep-alive), event: lines
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            now = time.monotonic()
            chunk = json.loads(data)
            if "error" in chunk:
                rec["error"] = f"stream error: {json.dumps(chunk['error'])[:300]}"
                return rec
            for ch in chunk.get("choices") or []:
                delta = ch.get("delta") or {}
                if delta.get("content"):
                    rec["content_chunks"] += 1
                    if t_first is None:
                        t_first = now
                    t_last = now
                if ch.get("finish_reason"):
                    rec["finish_reason"] = ch["finish_reason"]
            usage = chunk.get("usage")
            if usage:
                rec["usage_reported"] = True
                rec["completion_tokens"] = usage.get("completion_tokens", 0)
                rec["prompt_tokens"] = usage.get("prompt_tokens")
                rec["cached_tokens"] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        if not done:
            rec["error"] = "stream ended without [DONE]"
            return rec
    except TimeoutError:
        rec["error"] = f"timeout after {timeout}s"
        return rec
    except (OSError, http.client.HTTPException, ValueError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
        return rec
    finally:
        conn.close()
    if not rec["usage_reported"]:
        rec["completion_tokens"] = rec["content_chunks"]
    if t_first is not None:
        rec["ttft"] = t_first - t0
        if rec["completion_tokens"] > 1:
            rec["tpot"] = (t_last - t_first) / (rec["completion_tokens"] - 1)
    rec["e2e"] = time.monotonic() - t0
    rec["ok"] = rec["finish_reason"] not in (None, "error", "cancelled")
    if not rec["ok"]:
        rec["error"] = f"finish_reason {rec['finish_reason']}"
    return rec


# ---------------------------------------------------------------------------------------------
# one level


def percentile(xs, q):
    """Linear interpolation between closest ranks (numpy's default); None for no data."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def run_level(server, clients, a):
    records = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)

    def client(i):
        barrier.wait()
        for r in range(a.requests_per_client):
            prompt = PROMPTS[(i * a.requests_per_client + r) % len(PROMPTS)]
            if not a.reuse_prompts:  # the same text for both servers, never seen before by either
                prompt = f"(Request {clients}-{i}-{r}.) {prompt}"
            rec = stream_chat(server.port, prompt, a.max_tokens, a.timeout)
            rec["client"], rec["index"] = i, r
            records[i].append(rec)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    recs = [r for rs in records for r in rs]
    ok = [r for r in recs if r["ok"]]
    gen = sum(r["completion_tokens"] for r in ok)

    def ms(v):
        return None if v is None else v * 1000

    return {
        "clients": clients,
        "wall_s": wall,
        "requests_ok": len(ok),
        "requests_failed": len(recs) - len(ok),
        "completion_tokens": gen,
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in ok),
        "cached_prompt_tokens": sum(r["cached_tokens"] or 0 for r in ok),
        "usage_reported": all(r["usage_reported"] for r in ok) if ok else None,
        "tokens_per_s": gen / wall if wall > 0 else None,
        "ttft_p50_ms": ms(percentile([r["ttft"] for r in ok], 50)),
        "ttft_p99_ms": ms(percentile([r["ttft"] for r in ok], 99)),
        "tpot_p50_ms": ms(percentile([r["tpot"] for r in ok], 50)),
        "tpot_p99_ms": ms(percentile([r["tpot"] for r in ok], 99)),
        "finish_reasons": {k: sum(1 for r in ok if r["finish_reason"] == k)
                           for k in sorted({r["finish_reason"] for r in ok})},
        "errors": sorted({r["error"] for r in recs if r["error"]})[:5],
        "requests": recs,
    }


# ---------------------------------------------------------------------------------------------
# output


METRICS = [  # key, label, format
    ("tokens_per_s", "generated t/s", "{:.1f}"),
    ("ttft_p50_ms", "TTFT p50 ms", "{:.0f}"),
    ("ttft_p99_ms", "TTFT p99 ms", "{:.0f}"),
    ("tpot_p50_ms", "TPOT p50 ms", "{:.1f}"),
    ("tpot_p99_ms", "TPOT p99 ms", "{:.1f}"),
]


def fmt(v, f):
    return "–" if v is None else f.format(v)


def print_table(levels, names):
    both = len(names) == 2
    print("t/s: completion tokens of all requests / wall time of the level; TTFT: time to the first "
          "content; TPOT: (last - first content) / (tokens - 1).")
    if both:
        print("ggflow / llama-server: > 1 is better for t/s, < 1 is better for TTFT and TPOT.\n")
        print("| clients | metric | llama-server | ggflow | ggflow / llama-server |")
        print("|---:|---|---:|---:|---:|")
    else:
        print()
        print(f"| clients | metric | {names[0]} |")
        print("|---:|---|---:|")
    for lv in levels:
        c = lv["clients"]
        res = lv["servers"]
        for key, label, f in METRICS:
            if both:
                l, g = res["llama-server"][key], res["ggflow"][key]
                ratio = f"{g / l:.2f}" if (g is not None and l) else "–"
                print(f"| {c} | {label} | {fmt(l, f)} | {fmt(g, f)} | {ratio} |")
            else:
                print(f"| {c} | {label} | {fmt(res[names[0]][key], f)} |")
        okf = {n: f"{res[n]['requests_ok']} / {res[n]['requests_failed']}" for n in names}
        toks = {n: str(res[n]["completion_tokens"]) for n in names}
        if both:
            print(f"| {c} | requests ok / failed | {okf['llama-server']} | {okf['ggflow']} | |")
            print(f"| {c} | completion tokens | {toks['llama-server']} | {toks['ggflow']} | |")
        else:
            print(f"| {c} | requests ok / failed | {okf[names[0]]} |")
            print(f"| {c} | completion tokens | {toks[names[0]]} |")


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", "-m", required=True)
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--clients", default="1,4,8,16", help="concurrency levels, comma-separated")
    ap.add_argument("--requests-per-client", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=8, help="sequences decoded together (both servers)")
    ap.add_argument("--ctx", type=int, default=2048, help="context tokens per sequence (both servers)")
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--llama-server", help="default: bench/install_llamacpp.sh's build")
    ap.add_argument("--ggflow-args", default="", help="more arguments for ggflow serve (one string)")
    ap.add_argument("--llama-args", default="", help="more arguments for llama-server (one string)")
    ap.add_argument("--only", choices=["ggflow", "llama"], help="measure one server alone")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per request")
    ap.add_argument("--startup-timeout", type=float, default=120)
    ap.add_argument("--pause-idle", choices=["auto", "always", "never"], default="auto",
                    help="SIGSTOP the server not being measured: auto = when it is not idle-quiet")
    ap.add_argument("--reuse-prompts", action="store_true",
                    help="send the prompts as they are (by default each request's is tagged, so no two are the same)")
    ap.add_argument("--json", help="write the results (with every request's record) here")
    ap.add_argument("--keep-logs", action="store_true", help="keep the servers' logs (path on stderr)")
    a = ap.parse_args()
    levels = [int(x) for x in a.clients.split(",") if x.strip()]
    if not levels or min(levels) < 1 or a.requests_per_client < 1 or a.max_tokens < 1:
        ap.error("--clients, --requests-per-client and --max-tokens must be >= 1")
    model = os.path.abspath(a.model)
    logdir = tempfile.mkdtemp(prefix="load_serve-")

    servers = {}
    if a.only != "llama":
        port = free_port()
        servers["ggflow"] = Server("ggflow", [
            a.ggflow, "serve", "-m", model, "-t", str(a.threads), "--parallel", str(a.parallel),
            "--ctx-size", str(a.ctx), "--host", HOST, "--port", str(port), "--no-webui",
            *shlex.split(a.ggflow_args)], port, "/ready", logdir)
    if a.only != "ggflow":
        port = free_port()
        servers["llama-server"] = Server("llama-server", [
            llama_server_path(a.llama_server), "-m", model, "-t", str(a.threads), "-np", str(a.parallel),
            "-c", str(a.parallel * a.ctx), "--host", HOST, "--port", str(port),
            *shlex.split(a.llama_args)], port, "/health", logdir)
    names = list(servers)

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    out = {"cpu": cpu, "cores": os.cpu_count(), "model": model, "threads": a.threads,
           "parallel": a.parallel, "ctx": a.ctx, "max_tokens": a.max_tokens,
           "requests_per_client": a.requests_per_client, "servers": {}, "levels": []}
    try:
        for s in servers.values():
            print(f"starting {s.name}: {' '.join(s.cmd)}", file=sys.stderr)
            s.start(a.startup_timeout)
            w = stream_chat(s.port, "Hello! Who are you?", min(8, a.max_tokens), a.timeout)
            print(f"  warm-up: {'ok' if w['ok'] else 'FAILED ' + str(w['error'])}", file=sys.stderr)
        idle = {}
        time.sleep(1)
        for s in servers.values():  # idle-quiet check: CPU used over 3 s with no request
            c0 = s.cpu()
            time.sleep(3)
            idle[s.name] = (s.cpu() - c0) / 3
            print(f"{s.name} idle CPU: {idle[s.name] * 100:.1f}% of a core", file=sys.stderr)
        for s in servers.values():
            out["servers"][s.name] = {"cmd": s.cmd, "idle_cpu_fraction": idle[s.name]}
        pause = {n: a.pause_idle == "always" or (a.pause_idle == "auto" and idle[n] > 0.01) for n in names}

        for c in levels:
            lv = {"clients": c, "servers": {}}
            for s in servers.values():
                others = [o for o in servers.values() if o is not s]
                for o in others:
                    if pause[o.name]:
                        o.pause()
                other_cpu0 = {o.name: o.cpu() for o in others}
                print(f"{s.name}: {c} clients x {a.requests_per_client} requests", file=sys.stderr)
                res = run_level(s, c, a)
                for o in others:
                    res[f"other_cpu_s_{o.name}"] = o.cpu() - other_cpu0[o.name]
                    o.resume()
                if res["errors"]:
                    print(f"  errors: {res['errors']}", file=sys.stderr)
                lv["servers"][s.name] = res
            out["levels"].append(lv)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print(f"load_serve: {e}", file=sys.stderr)
        return 1
    finally:
        for s in servers.values():
            s.stop()
    if a.keep_logs:
        print(f"server logs: {logdir}", file=sys.stderr)
    else:
        for s in servers.values():
            try:
                s.log_path.unlink()
            except OSError:
                pass
        try:
            os.rmdir(logdir)
        except OSError:
            pass

    print(f"CPU: {cpu}; {os.cpu_count()} cores; {a.threads} threads; {Path(model).name}; "
          f"{a.requests_per_client} requests per client, max_tokens {a.max_tokens}, parallel {a.parallel}\n")
    print_table(out["levels"], names)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
