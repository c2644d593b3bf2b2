#!/usr/bin/env python3
"""ggflow vs llama.cpp on the same .gguf file, same thread count (1), measured in one run.

    bench/compare_llamacpp.py --ggflow build/ggflow [--engine paged|sdpa|raw] MODEL.gguf [...]

Needs llama-cpp-python (the oracle: `python3 -m venv /tmp/oracle-venv &&
/tmp/oracle-venv/bin/pip install llama-cpp-python`); run it with that interpreter. For each model
it times a 32-token prompt (prefill) and 32 greedy decode steps in both engines:
- llama.cpp: llama_cpp.Llama(n_threads=1), eval() of the prompt, then 32 single-token evals.
- ggflow: process wall time (median of 3) of `ggflow run --tokens ...`: with the 32-token prompt
  and -n 1 (load + prefill), with -n 33 (load + prefill + 32 decodes), and with a 1-token prompt
  and -n 1 ("load": opening, building and adapting the graph, plus one 1-token step). Decode per
  token = (t(-n 33) - t(-n 1)) / 32; prefill = t(-n 1) - load + one decode step.
Prints a Markdown table with the ratios (ggflow time / llama.cpp time; > 1 means ggflow is slower).
"""
import argparse
import statistics
import subprocess
import sys
import time

from llama_cpp import Llama


def wall(cmd, reps=3):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench(ggflow, engine, path):
    llm = Llama(model_path=path, n_threads=1, n_threads_batch=1, n_ctx=256, verbose=False)
    prompt = llm.tokenize(b"Once upon a time, there was a little girl who loved to read books about the sea and the stars.")[:32]
    prompt = (prompt * 4)[:32]
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    l_prefill = time.perf_counter() - t0
    t0 = time.perf_counter()
    tok = prompt[-1]
    for _ in range(32):
        llm.eval([tok])
    l_decode = (time.perf_counter() - t0) / 32

    ids = ",".join(map(str, prompt))
    base = [ggflow, "run", "--engine", engine, "-m", path, "--tokens"]
    t_small = wall(base + [str(prompt[0]), "-n", "1"])   # load + 1-token prefill
    t_1 = wall(base + [ids, "-n", "1"])                  # load + prefill
    t_33 = wall(base + [ids, "-n", "33"])                # load + prefill + 32 decodes
    g_decode = (t_33 - t_1) / 32
    g_prefill = t_1 - t_small + g_decode                 # remove load (a 1-token step ~ one decode)
    return l_prefill, l_decode, g_prefill, g_decode, t_small


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", required=True)
    ap.add_argument("--engine", default="paged")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    print("| model | engine | prefill 32 tok: llama.cpp / ggflow (ratio) | decode per token: llama.cpp / ggflow (ratio) | ggflow load |")
    print("|---|---|---|---|---|")
    for m in a.models:
        lp, ld, gp, gd, load = bench(a.ggflow, a.engine, m)
        print(f"| {m.split('/')[-1]} | {a.engine} | {lp*1e3:.1f} ms / {gp*1e3:.0f} ms ({gp/lp:.0f}x) | "
              f"{ld*1e3:.2f} ms / {gd*1e3:.1f} ms ({gd/ld:.0f}x) | {load:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
