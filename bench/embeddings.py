#!/usr/bin/env python3
"""Embeddings per second: ggflow serve against llama.cpp's llama-server (--embedding), same file,
same threads, same run, alternating.

    bench/embeddings.py [--ggflow build/ggflow] [--llama-server PATH] [-t 2] [--texts 256]
                        [--rounds 5] [MODEL.gguf]    (default: models/all-minilm-l6-v2-f16.gguf)

Both servers run at once (each idle while the other works); each round sends both the same one
POST /v1/embeddings with --texts short texts (4 to 12 words drawn with a fixed seed: ~10 tokens
each), the two alternating, and times the answer. A server's figure is the median over the rounds
of texts / wall time; its spread is (max - min) / median. The vectors of the two are compared
(worst NMSE) so a fast wrong answer cannot pass. Never run it beside a build or a test suite.
"""
import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from structured_decode import Server, free_port, post  # noqa: E402

WORDS = ("the a cat dog runs quickly over under blue red house tree river city small large bright dark music "
         "code data").split()


def texts(n):
    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(n)]


def embed(port, model, inputs):
    t = time.perf_counter()
    d = post(port, "/v1/embeddings", {"model": model, "input": inputs})
    return time.perf_counter() - t, [x["embedding"] for x in sorted(d["data"], key=lambda x: x["index"])]


def nmse(a, b):
    num = sum((x - y) ** 2 for x, y in zip(a, b))
    mean = sum(b) / len(b)
    return num / sum((y - mean) ** 2 for y in b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--llama-server", default=None)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("model", nargs="?", default=str(ROOT / "models" / "all-minilm-l6-v2-f16.gguf"))
    a = ap.parse_args()
    llama = a.llama_server
    if llama is None:
        out = subprocess.run([str(ROOT / "bench" / "install_llamacpp.sh")], check=True, capture_output=True, text=True)
        llama = str(Path(out.stdout.strip().splitlines()[-1]) / "llama-server")
    inputs = texts(a.texts)
    name = Path(a.model).name.removesuffix(".gguf")
    gp, lp = free_port(), free_port()
    g = Server([a.ggflow, "serve", "-m", a.model, "--port", str(gp), "-t", str(a.threads)], gp, "/ready")
    try:
        l = Server([llama, "-m", a.model, "--port", str(lp), "-t", str(a.threads), "--embedding", "--pooling", "mean",
                    "-c", "8192", "-b", "8192", "-ub", "8192", "--no-webui", "-ngl", "0"], lp, "/health")
        try:
            embed(gp, name, inputs[:16]), embed(lp, name, inputs[:16])  # warm-up
            gt, lt, worst = [], [], 0.0
            for _ in range(a.rounds):
                t, gv = embed(gp, name, inputs)
                gt.append(a.texts / t)
                t, lv = embed(lp, name, inputs)
                lt.append(a.texts / t)
                worst = max(worst, max(nmse(x, y) for x, y in zip(gv, lv)))
        finally:
            l.stop()
    finally:
        g.stop()
    gm, lm = statistics.median(gt), statistics.median(lt)
    spread = lambda v: (max(v) - min(v)) / statistics.median(v)  # noqa: E731
    print(f"{a.texts} texts per request, {a.threads} threads, {a.rounds} rounds, alternating; vectors: worst NMSE "
          f"{worst:.1e} between the two")
    print("| model | llama.cpp texts/s | ggflow texts/s | ggflow / llama.cpp | llama.cpp spread | ggflow spread |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| {name} | {lm:.0f} | {gm:.0f} | {gm / lm:.2f}x | {spread(lt):.0%} | {spread(gt):.0%} |")


if __name__ == "__main__":
    main()
