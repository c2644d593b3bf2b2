#!/usr/bin/env python3
"""Golden rerank scores from llama.cpp, the oracle for ggflow's /v1/rerank: llama-server started
with --reranking on the synthetic reranker (python/make_reranker.py writes
models/minilm-reranker-f16.gguf), asked POST /v1/rerank for each case below. Recorded per case: the
query, the documents, each document's score (by index: llama-server answers sorted by score) and
the prompt tokens of the whole request; per document also the tokens of its pair alone (a request
with that one document), which pins the framing llama.cpp gives a pair ([CLS] query [SEP] doc
[SEP] for this file's tokenizer flags).

    bench/install_llamacpp.sh     # builds llama-server among llama.cpp's tools
    .venv/bin/python python/make_rerank_goldens.py [--bin DIR] [--model models/minilm-reranker-f16.gguf]

Flash attention off, as the embedding goldens (python/make_embedding_goldens.py). Writes
tests/conformance/goldens/rerank-minilm.json.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from link_models import sha256  # noqa: E402  (python/, next to this script)
from make_embedding_goldens import DEFAULT_BIN, FLASH_ATTN, LLAMA_CPP_VERSION  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "conformance" / "goldens" / "rerank-minilm.json"

CASES = [
    ("What is a panda?", [
        "hi",
        "The giant panda (Ailuropoda melanoleuca), sometimes called a panda bear or simply panda, is a bear species endemic to China.",
        "Paris is the capital and most populous city of France.",
        "Pandas eat bamboo.",
        "pandas is a Python library for data analysis.",
    ]),
    ("How do I sort a list in Python?", [
        "Use sorted(xs) for a new list, or xs.sort() to sort in place.",
        "  Whitespace\tand\nnewlines   inside a document.  ",
        "def quicksort(xs):\n    return xs if len(xs) < 2 else quicksort([x for x in xs[1:] if x < xs[0]]) + [xs[0]] + quicksort([x for x in xs[1:] if x >= xs[0]])",
        "Le tri d'une liste se fait avec sorted().",
    ]),
    ("Café crème brûlée — naïve résumé?", [
        "Crème brûlée is a dessert of rich custard topped with caramelised sugar.",
        "日本語のテキストも並べ替えられます。",
        "A résumé lists one's education and work experience.",
    ]),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/rerank", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(DEFAULT_BIN), help="llama.cpp's build/bin (llama-server)")
    ap.add_argument("--model", default=str(ROOT / "models" / "minilm-reranker-f16.gguf"))
    args = ap.parse_args()
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=args.bin)
    cmd = [os.path.join(args.bin, "llama-server"), "-m", args.model, "--reranking", "--port", str(port), "-t", "2",
           "-c", "2048", "-b", "512", "-ub", "512", "-fa", FLASH_ATTN, "-np", "1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.1)
        cases = []
        for query, docs in CASES:
            r = post(port, {"query": query, "documents": docs})
            scores = [None] * len(docs)
            for x in r["results"]:
                scores[x["index"]] = x["relevance_score"]
            pair_tokens = [post(port, {"query": query, "documents": [d]})["usage"]["prompt_tokens"] for d in docs]
            if sum(pair_tokens) != r["usage"]["prompt_tokens"]:
                raise SystemExit(f"pair tokens {pair_tokens} do not add up to {r['usage']['prompt_tokens']}")
            cases.append({"query": query, "documents": docs, "scores": scores, "pair_tokens": pair_tokens,
                          "prompt_tokens": r["usage"]["prompt_tokens"]})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    rel = os.path.relpath(args.model, ROOT)
    g = {"model": "minilm-reranker", "file": rel, "sha256": sha256(args.model),
         "oracle": f"llama-server from llama-cpp-python {LLAMA_CPP_VERSION}'s source, --reranking, -fa {FLASH_ATTN}, -t 2, POST /v1/rerank",
         "cases": cases}
    OUT.write_text(json.dumps(g, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}: {sum(len(c['documents']) for c in cases)} documents in {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
