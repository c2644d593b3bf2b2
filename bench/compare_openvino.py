#!/usr/bin/env python3
"""ggflow against OpenVINO GenAI on the same .gguf file, same thread count, alternating, one run.

    bench/compare_openvino.py [-m models/smollm2-135m-instruct-q4_1.gguf] [-t 2] [--rounds 3]
                              [--ggflow build/ggflow] [--ov-python PATH] [--prompt-tokens 75]
                              [--decode-tokens 128] [--requests 8] [--request-tokens 64] [--json OUT]

OpenVINO GenAI comes from PyPI through bench/install_openvino.sh (its own venv, outside the
repository); it reads the GGUF file itself. Three measurements, each side the same texts, raw
prompts (no chat template), greedy, end of sequence ignored so every request runs its full length:

- time to first token of a prompt of --prompt-tokens tokens (median of 5 prompts that differ in
  their first word, so no prefix cache helps): OpenVINO's LLMPipeline perf metrics (TTFT);
  ggflow: `ggflow serve`, a streamed /v1/completions, request sent -> first token received over
  loopback HTTP (so ggflow's figure also carries HTTP and JSON).
- single-stream decode tokens/s over --decode-tokens tokens: OpenVINO 1000 / TPOT (ms) of
  LLMPipeline; ggflow 1 / time per output token of one streamed request.
- aggregate tokens/s of --requests requests x --request-tokens tokens submitted together:
  OpenVINO's ContinuousBatchingPipeline.generate on the list (wall time); ggflow: that many
  concurrent streamed requests to the server (first sent -> last finished).

Sides alternate per round (OpenVINO in a child process, then ggflow's server; the server is
stopped with SIGSTOP while OpenVINO runs); a figure is the median over rounds. Prints a Markdown
table with the ratio ggflow / OpenVINO (> 1: ggflow better; for TTFT, OpenVINO ms / ggflow ms).
A benchmark, not a test: nothing is asserted. Never run it beside a build or a test suite.
"""
import argparse
import http.client
import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import load_serve  # noqa: E402  (its Server and free_port)

HOST = "127.0.0.1"
TAGS = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliet"]
FILLER = ("the quick brown fox jumps over the lazy dog while the farmer walks to the market with a basket "
          "of apples and pears and the children play in the garden near the old stone bridge ") * 8
REQUESTS = load_serve.PROMPTS


# ---------------------------------------------------------------------------------------------
# OpenVINO side (runs inside the OpenVINO venv: `--ov-worker`)

def ov_worker(a):
    import openvino_genai as og
    spec = json.loads(a.ov_worker)
    t = spec["threads"]
    pipe = og.LLMPipeline(spec["model"], "CPU", INFERENCE_NUM_THREADS=t)

    def cfg(n, ignore_eos=True):
        c = og.GenerationConfig()
        c.max_new_tokens = n
        c.do_sample = False
        c.ignore_eos = ignore_eos
        c.apply_chat_template = False
        return c

    tok = pipe.get_tokenizer()
    n_prompt = [int(tok.encode(p).input_ids.data.shape[1]) for p in spec["ttft_prompts"]]
    pipe.generate(spec["ttft_prompts"][0], cfg(4))  # warm-up
    ttft = [pipe.generate([p], cfg(2)).perf_metrics.get_ttft().mean for p in spec["ttft_prompts"]]
    r = pipe.generate([spec["decode_prompt"]], cfg(spec["decode_tokens"]))
    decode = 1000.0 / r.perf_metrics.get_tpot().mean
    del pipe
    sc = og.SchedulerConfig()
    sc.cache_size = 1  # GB of KV cache
    cb = og.ContinuousBatchingPipeline(spec["model"], sc, "CPU", {"INFERENCE_NUM_THREADS": t})
    cb.generate(spec["requests"][:2], [cfg(8)] * 2)  # warm-up
    n = spec["request_tokens"]
    t0 = time.monotonic()
    res = cb.generate(spec["requests"], [cfg(n)] * len(spec["requests"]))
    wall = time.monotonic() - t0
    total = n * len(res)
    print(json.dumps({"ttft_ms": statistics.median(ttft), "decode_tps": decode, "agg_tps": total / wall,
                      "prompt_tokens": n_prompt, "agg_tokens": total}))


def run_ov(a, spec):
    out = subprocess.run([a.ov_python, __file__, "--ov-worker", json.dumps(spec)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("OpenVINO worker failed:\n" + out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# ggflow side (its server)

def post(port, path, body, timeout=60):
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"{path}: HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


def stream_completion(port, prompt, max_tokens, bias):
    """One streamed /v1/completions; returns (ttft s, [arrival times of tokens], completion tokens)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}, "logit_bias": bias}).encode()
    c = http.client.HTTPConnection(HOST, port, timeout=300)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"/v1/completions: HTTP {r.status}: {r.read(300)!r}")
    times, usage = [], None
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        ev = json.loads(payload)
        if ev.get("usage"):
            usage = ev["usage"]
        if ev.get("choices") and ev["choices"][0].get("text"):
            times.append(time.monotonic())
    c.close()
    n = usage["completion_tokens"] if usage else len(times)
    return (times[0] - t0 if times else float("nan")), times, n, t0


def run_ggflow(port, spec, bias):
    ttft = [stream_completion(port, p, 2, bias)[0] * 1000 for p in spec["ttft_prompts"]]
    _, times, n, _ = stream_completion(port, spec["decode_prompt"], spec["decode_tokens"], bias)
    decode = (n - 1) / (times[-1] - times[0])
    results = [None] * len(spec["requests"])

    def one(i):
        results[i] = stream_completion(port, spec["requests"][i], spec["request_tokens"], bias)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(spec["requests"]))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    start = min(r[3] for r in results)
    end = max(r[1][-1] for r in results)
    total = sum(r[2] for r in results)
    return {"ttft_ms": statistics.median(ttft), "decode_tps": decode, "agg_tps": total / (end - start),
            "agg_tokens": total}


def exact_prompt(port, tag, n_tokens):
    """`tag` + filler cut to exactly n_tokens tokens as ggflow tokenizes it (no special tokens)."""
    words = FILLER.split()
    lo, hi = 1, len(words)
    while lo < hi:  # the fewest words reaching n_tokens
        mid = (lo + hi) // 2
        text = tag + " " + " ".join(words[:mid])
        if len(post(port, "/tokenize", {"content": text})["tokens"]) >= n_tokens:
            hi = mid
        else:
            lo = mid + 1
    text = tag + " " + " ".join(words[:lo])
    ids = post(port, "/tokenize", {"content": text})["tokens"]
    if len(ids) != n_tokens:  # cut at the token boundary instead
        text = post(port, "/detokenize", {"tokens": ids[:n_tokens]})["content"]
    return text


def eos_bias(model):
    """logit_bias that keeps every end-of-generation id of the model away (no ignore_eos in the API)."""
    ids = set()
    try:
        import gguf
        r = gguf.GGUFReader(model)
        for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
            f = r.fields.get(key)
            if f is not None:
                ids.add(int(f.parts[f.data[0]][0]))
    except ImportError:
        pass
    return {str(i): -100 for i in sorted(ids)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ov-worker", help=argparse.SUPPRESS)
    ap.add_argument("-m", "--model", default=str(ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--ov-python")
    ap.add_argument("--prompt-tokens", type=int, default=75)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--request-tokens", type=int, default=64)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.ov_worker:
        return ov_worker(a)
    if not a.ov_python:
        out = subprocess.run([str(ROOT / "bench" / "install_openvino.sh")], check=True, capture_output=True, text=True)
        a.ov_python = out.stdout.strip().splitlines()[-1]
    import tempfile
    logdir = tempfile.mkdtemp(prefix="ggflow-ov-")
    port = load_serve.free_port()
    srv = load_serve.Server("ggflow", [a.ggflow, "serve", "-m", a.model, "-t", str(a.threads), "--port", str(port),
                                       "--parallel", str(max(8, a.requests)), "--no-webui"], port, "/ready", logdir)
    srv.start(120)
    try:
        spec = {"model": a.model, "threads": a.threads, "decode_tokens": a.decode_tokens,
                "request_tokens": a.request_tokens,
                "ttft_prompts": [exact_prompt(port, TAGS[i], a.prompt_tokens) for i in range(5)],
                "decode_prompt": "Write a long story about a lighthouse keeper.",
                "requests": [f"{TAGS[i % len(TAGS)]}: {REQUESTS[i % len(REQUESTS)]}" for i in range(a.requests)]}
        bias = eos_bias(a.model)
        stream_completion(port, spec["requests"][0], 8, bias)  # warm-up
        ov_runs, gg_runs = [], []
        for rnd in range(a.rounds):
            srv.pause()
            ov_runs.append(run_ov(a, spec))
            srv.resume()
            time.sleep(0.5)
            # fresh texts each round for TTFT would change the prompt; the tag cycle keeps the prefix cache out
            spec_r = dict(spec, ttft_prompts=[exact_prompt(port, f"{TAGS[i]}{rnd}", a.prompt_tokens) for i in range(5)])
            gg_runs.append(run_ggflow(port, spec_r, bias))
            print(f"round {rnd + 1}/{a.rounds}: openvino {ov_runs[-1]}  ggflow {gg_runs[-1]}", file=sys.stderr)
    finally:
        srv.stop()
    med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
    rows = [("time to first token, %d-token prompt (ms)" % a.prompt_tokens, "ttft_ms", True),
            ("single-stream decode (tokens/s)", "decode_tps", False),
            ("%d requests x %d tokens, aggregate (tokens/s)" % (a.requests, a.request_tokens), "agg_tps", False)]
    print(f"\nmodel {Path(a.model).name}, {a.threads} threads, {a.rounds} rounds (median); "
          f"OpenVINO prompt tokens {ov_runs[0]['prompt_tokens']}, ggflow {a.prompt_tokens}\n")
    print("| measure | OpenVINO GenAI | ggflow | ggflow / OpenVINO |")
    print("|---|---:|---:|---:|")
    table = {}
    for name, k, lower_better in rows:
        o, g = med(ov_runs, k), med(gg_runs, k)
        ratio = o / g if lower_better else g / o
        table[k] = {"openvino": o, "ggflow": g, "ratio": ratio}
        print(f"| {name} | {o:.1f} | {g:.1f} | {ratio:.2f}x |")
    if a.json:
        Path(a.json).write_text(json.dumps({"table": table, "openvino": ov_runs, "ggflow": gg_runs}, indent=1))


if __name__ == "__main__":
    main()
