#!/usr/bin/env python3
"""Greedy continuations of ggflow and llama.cpp (llama-server) with the same KV cache type.

    bench/kv_parity.py [--ggflow build/ggflow] [--llama-bin DIR] [-t 2] [-n 64]
                       [--kv-type q8_0 --kv-type f16] MODEL.gguf

For each prompt of bench/spec_prompts.json (its code block alone, so both tools continue code
without a chat template) and each KV cache type, both tools decode -n tokens greedily; the line
per prompt is the length of the common prefix of the two texts. llama-server runs with
-ctk/-ctv TYPE and flash attention on (llama.cpp's q8_0 cache needs it), a fresh slot per request
(cache_prompt off); ggflow runs `ggflow run --temperature 0 --kv-type TYPE`. Where the texts part,
one tool's top-2 logits were close at that step: a check of numerics parity, not a test.

llama-server comes from bench/install_llamacpp.sh (llama.cpp's own tools, built outside the
repository); without --llama-bin the script runs it.
"""
import argparse
import json
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = "`" * 3


def llama_bin_dir(given):
    if given:
        return Path(given)
    out = subprocess.run([str(ROOT / "bench" / "install_llamacpp.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def code_prompts():
    """The code block of each prompt of bench/spec_prompts.json (the whole text where it has none)."""
    out = []
    for p in json.loads((ROOT / "bench" / "spec_prompts.json").read_text()):
        c = p["content"]
        if FENCE in c:
            c = c.split(FENCE)[1]
            c = c[len("python"):] if c.startswith("python") else c
            c = c.lstrip("\n").rstrip("\n")
        out.append((p["name"], c))
    return out


def llama_complete(port, prompt, n):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                 data=json.dumps({"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1,
                                                  "cache_prompt": False}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["content"]


def wait_healthy(port, proc, seconds=120):
    for _ in range(seconds):
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited ({proc.returncode})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError("llama-server did not become healthy")


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--llama-bin", help="the directory of llama-server (default: bench/install_llamacpp.sh's)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--kv-type", action="append", help="f16, q8_0 (repeatable; default both)")
    ap.add_argument("--port", type=int, default=8097)
    a = ap.parse_args()
    bins = llama_bin_dir(a.llama_bin)
    prompts = code_prompts()
    print(f"{Path(a.model).name}, {a.n} greedy tokens, {a.threads} threads; llama-server: {bins}\n")
    print("| KV cache | prompt | common prefix (chars) | llama.cpp | ggflow |")
    print("|---|---|---:|---:|---:|")
    for kv in a.kv_type or ["q8_0", "f16"]:
        server = subprocess.Popen([str(bins / "llama-server"), "-m", a.model, "-t", str(a.threads), "-c", "4096",
                                   "-ctk", kv, "-ctv", kv, "-fa", "on", "--port", str(a.port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={"LD_LIBRARY_PATH": str(bins)})
        try:
            wait_healthy(a.port, server)
            for name, prompt in prompts:
                lt = llama_complete(a.port, prompt, a.n)
                g = subprocess.run([a.ggflow, "run", "-m", a.model, "-p", prompt, "-n", str(a.n), "--temperature", "0",
                                    "--kv-type", kv, "-t", str(a.threads)], capture_output=True, text=True)
                if g.returncode != 0:
                    raise RuntimeError(f"ggflow run failed ({g.returncode}): {g.stderr[-1000:]}")
                gt = g.stdout.rstrip("\n")
                print(f"| {kv} | {name} | {common_prefix(lt, gt)} | {len(lt)} | {len(gt)} |", flush=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
