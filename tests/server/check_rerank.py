#!/usr/bin/env python3
"""POST /v1/rerank (llama-server's and Jina's shape) on the synthetic reranker served beside an
embedding model (`ggflow serve -m minilm-reranker-f16.gguf -m all-minilm-l6-v2-f16.gguf`).

    check_rerank.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

The reranker is models/minilm-reranker-f16.gguf (python/make_reranker.py, written at set-up); its
goldens are llama-server's (tests/conformance/goldens/rerank-minilm.json,
python/make_rerank_goldens.py). One line per check; exit 0 when all pass, 1 otherwise, 77 when a
file is missing, unless GGFLOW_REQUIRE_MODELS=1. The contract is docs/SERVER.md (Rerank):
- each case's scores are llama-server's within NMSE 1e-4, sorted highest first, usage its tokens;
  /rerank and /v1/reranking answer the same; top_n and return_documents; {"text": ...} documents;
- refusals as 400 naming the field: no query, a non-string query, no documents, an empty array, a
  number among them, top_n 0, an unknown field, a pair over the context; rerank on the embedding
  model and embeddings on the reranker; the server alive afterwards.
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from server_util import TEST_FLAGS, Checker, Server, loopback_only, require_model, setup  # noqa: E402

loopback_only()
c = Checker()
GOLDENS = ROOT / "tests" / "conformance" / "goldens" / "rerank-minilm.json"


def nmse(v, gold):
    mean = sum(gold) / len(gold)
    return sum((a - b) ** 2 for a, b in zip(v, gold)) / sum((b - mean) ** 2 for b in gold)


def check_goldens(srv, g):
    worst = 0.0
    for case in g["cases"]:
        r = srv.request("POST", "/v1/rerank", {"query": case["query"], "documents": case["documents"]})
        out = r.json()
        scores = [None] * len(case["documents"])
        for x in out["results"]:
            scores[x["index"]] = x["relevance_score"]
        ordered = [x["relevance_score"] for x in out["results"]]
        err = nmse(scores, case["scores"])
        worst = max(worst, err)
        c.check(r.status == 200 and None not in scores and err < 1e-4 and ordered == sorted(ordered, reverse=True)
                and out["usage"]["prompt_tokens"] == case["prompt_tokens"] and out["object"] == "list",
                f"'{case['query']}': llama-server's scores (NMSE {err:.1e}), highest first, {case['prompt_tokens']} tokens",
                f"{r.status} {out}")
        for path in ("/rerank", "/v1/reranking"):
            same = srv.request("POST", path, {"query": case["query"], "documents": case["documents"]}).json()
            c.check(same["results"] == out["results"], f"{path} answers as /v1/rerank", f"{same}")
    case = g["cases"][0]
    r = srv.request("POST", "/v1/rerank", {"query": case["query"], "documents": [{"text": d} for d in case["documents"]],
                                           "top_n": 2, "return_documents": True}).json()
    best = sorted(range(len(case["scores"])), key=lambda i: -case["scores"][i])[:2]
    c.check([x["index"] for x in r["results"]] == best and all(x["document"]["text"] == case["documents"][x["index"]] for x in r["results"]),
            "top_n 2 with return_documents: the two best, each with its text ({'text': ...} documents accepted)", f"{r}")


def check_refusals(srv, emb):
    cases = [
        ("no query", {"documents": ["a"]}, "query"),
        ("a non-string query", {"query": 5, "documents": ["a"]}, "query"),
        ("no documents", {"query": "q"}, "documents"),
        ("an empty documents array", {"query": "q", "documents": []}, "documents"),
        ("a number among the documents", {"query": "q", "documents": ["a", 5]}, "documents"),
        ("top_n 0", {"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
        ("an unknown field", {"query": "q", "documents": ["a"], "rank_fields": ["x"]}, "rank_fields"),
        ("a pair over the context", {"query": "q", "documents": ["word " * 600]}, "documents"),
        ("rerank on the embedding model", {"model": emb, "query": "q", "documents": ["a"]}, "model"),
    ]
    for what, body, param in cases:
        r = srv.request("POST", "/v1/rerank", body)
        err = r.json().get("error", {}) if r.status != 200 else {}
        c.check(r.status == 400 and err.get("param") == param, f"400 naming '{param}': {what}", f"{r.status} {r.body[:300]}")
    r = srv.request("POST", "/v1/embeddings", {"input": "a"})
    c.check(r.status == 400 and "reranker" in r.json()["error"]["message"], "embeddings on the reranker: 400", f"{r.status} {r.body[:300]}")
    c.check(srv.running() and srv.request("POST", "/v1/rerank", {"query": "q", "documents": ["a"]}).status == 200,
            "the server goes on ranking")


def main():
    ggflow, _, _ = setup(__doc__)
    reranker = str(require_model(ROOT / "models" / "minilm-reranker-f16.gguf"))
    embedder = str(require_model(ROOT / "models" / "all-minilm-l6-v2-f16.gguf"))
    g = json.loads(GOLDENS.read_text())
    with Server(ggflow, reranker, [*TEST_FLAGS, "-m", embedder], name="rerank") as srv:
        c.run("goldens", check_goldens, srv, g)
        c.run("refusals", check_refusals, srv, "all-minilm-l6-v2-f16")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
