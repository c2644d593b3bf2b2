#!/usr/bin/env python3
"""POST /v1/embeddings through the official `openai` client, on an embedding model served beside a
generative one (`ggflow serve -m SmolLM2 -m all-MiniLM-L6-v2`).

    check_embeddings.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

The embedding model is models/all-minilm-l6-v2-f16.gguf; its goldens are llama.cpp's
(tests/conformance/goldens/embedding-all-minilm-l6-v2.json, python/make_embedding_goldens.py).
One line per check; exit 0 when all pass, 1 otherwise, 77 when a model (or the `openai` package)
is missing, unless GGFLOW_REQUIRE_MODELS=1. The contract is docs/SERVER.md (Embeddings):
- the vectors of the golden texts (one request with all of them) equal llama.cpp's within NMSE
  1e-5; usage counts their tokens; a single string, token ids and a list of id lists give the
  same vectors as the texts; base64 decodes to the float vectors bit for bit;
- refusals as 400 naming the field: an empty string, an empty array, a wrong type, an id outside
  the vocabulary, an input over the model's context, `dimensions` other than the model's width,
  an unknown `encoding_format`, an unknown field; chat on the embedding model and embeddings on
  the generative one; the server alive afterwards;
- embeddings and chat completions at the same time, all answered.
"""
import base64
import json
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from server_util import Checker, Server, loopback_only, require_model, require_packages, served_name, setup  # noqa: E402

loopback_only()
np, openai = require_packages("numpy", "openai")
OpenAI = openai.OpenAI

c = Checker()
GOLDENS = ROOT / "tests" / "conformance" / "goldens" / "embedding-all-minilm-l6-v2.json"


def nmse(v, gold):
    v, gold = np.asarray(v, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    return float(((v - gold) ** 2).sum() / ((gold - gold.mean()) ** 2).sum())


def check_vectors(cl, emb, g):
    cases = g["cases"]
    texts = [x["text"] for x in cases]
    r = cl.embeddings.create(model=emb, input=texts)
    worst = max(nmse(d.embedding, x["embedding"]) for d, x in zip(r.data, cases))
    n_tokens = sum(len(x["tokens"]) for x in cases)
    c.check(len(r.data) == len(cases) and [d.index for d in r.data] == list(range(len(cases))) and worst < 1e-5
            and r.usage.prompt_tokens == n_tokens and r.model == emb,
            f"{len(cases)} golden texts in one request: llama.cpp's vectors (worst NMSE {worst:.1e}), usage {n_tokens} tokens",
            f"{len(r.data)} vectors, worst NMSE {worst}, usage {r.usage}")
    one = cl.embeddings.create(model=emb, input=texts[0]).data[0].embedding
    ids = cl.embeddings.create(model=emb, input=cases[0]["tokens"]).data[0].embedding
    many = [d.embedding for d in cl.embeddings.create(model=emb, input=[x["tokens"] for x in cases[:3]]).data]
    c.check(one == r.data[0].embedding and ids == one and many == [d.embedding for d in r.data[:3]],
            "a single string, token ids and a list of id lists give the texts' vectors exactly")
    b64 = cl.embeddings.create(model=emb, input=texts[:2], encoding_format="base64").data
    decoded = [np.frombuffer(base64.b64decode(d.embedding), dtype="<f4").tolist() for d in b64]
    floats = [np.asarray(d.embedding, dtype=np.float32).tolist() for d in r.data[:2]]
    c.check(decoded == floats, "encoding_format base64: little-endian f32 bytes of the same vectors")
    same = cl.embeddings.create(model=emb, input=texts[0], dimensions=len(one)).data[0].embedding
    c.check(same == one and len(one) == g["n_embd"], f"dimensions = the model's width ({len(one)}) is accepted")
    cos = {k: float(np.dot(r.data[i].embedding, r.data[j].embedding)) for k, (i, j) in
           {"paraphrase": (0, 1), "unrelated": (0, 4)}.items()}
    c.check(cos["paraphrase"] > 0.8 > cos["unrelated"], "paraphrases are close, unrelated texts are not", f"{cos}")


def check_refusals(srv, cl, emb, gen):
    cases = [
        ("an empty string", {"input": ""}, "input"),
        ("an empty array", {"input": []}, "input"),
        ("a number", {"input": 5}, "input"),
        ("an array mixing strings and numbers", {"input": ["a", 5]}, "input"),
        ("an id outside the vocabulary", {"input": [101, 1000000]}, "input"),
        ("an input over the context", {"input": "word " * 600}, "input"),
        ("dimensions other than the width", {"input": "a", "dimensions": 128}, "dimensions"),
        ("an unknown encoding_format", {"input": "a", "encoding_format": "int8"}, "encoding_format"),
        ("an unknown field", {"input": "a", "pooling": "cls"}, "pooling"),
        ("no input", {}, "input"),
    ]
    bad = []
    for what, body, param in cases:
        r = srv.request("POST", "/v1/embeddings", {"model": emb, **body})
        err = r.json().get("error", {}) if r.body.startswith(b"{") else {}
        if r.status != 400 or err.get("param") != param or not err.get("message"):
            bad.append(f"{what}: {r.status} {err}")
    c.check(not bad, f"{len(cases)} bad embedding requests: 400 naming the field", "; ".join(bad))
    try:
        cl.chat.completions.create(model=emb, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        c.fail("chat on the embedding model is a 400", "answered")
    except openai.BadRequestError as e:
        c.check("embedding model" in str(e), "chat on the embedding model is a 400 that says so", str(e))
    try:
        cl.embeddings.create(model=gen, input="hi")
        c.fail("embeddings on the generative model are a 400", "answered")
    except openai.BadRequestError as e:
        c.check("no embedding output" in str(e), "embeddings on the generative model are a 400 that says so", str(e))
    r = cl.embeddings.create(model=emb, input="still here")
    c.check(len(r.data) == 1 and srv.running(), "the server answers after the refusals")


def check_concurrent(cl, emb, gen, g):
    texts = [x["text"] for x in g["cases"]]
    alone = [d.embedding for d in cl.embeddings.create(model=emb, input=texts).data]
    errors, results = [], {}

    def embed(k):
        try:
            results[("e", k)] = [d.embedding for d in cl.embeddings.create(model=emb, input=texts).data] == alone
        except Exception as e:  # noqa: BLE001
            errors.append(f"embeddings: {type(e).__name__}: {e}")

    def chat(k):
        try:
            r = cl.chat.completions.create(model=gen, messages=[{"role": "user", "content": "Name a color."}], max_tokens=8,
                                           temperature=0)
            results[("c", k)] = bool(r.choices[0].message.content)
        except Exception as e:  # noqa: BLE001
            errors.append(f"chat: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=embed, args=(k,)) for k in range(4)] + \
              [threading.Thread(target=chat, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    c.check(not errors and len(results) == 6 and all(results.values()),
            "4 embedding requests and 2 chats at once: all answered, the vectors as alone", "; ".join(errors) or f"{results}")


def main():
    ggflow, gen_path, gen = setup(__doc__)
    emb_path = str(require_model(ROOT / "models" / "all-minilm-l6-v2-f16.gguf"))
    emb = served_name(emb_path)
    g = json.loads(GOLDENS.read_text())
    with Server(ggflow, gen_path, ["-m", emb_path, "--kv-cache", "32MiB"], name="embeddings") as srv:
        cl = OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)
        ids = [m.id for m in cl.models.list().data]
        c.check(ids == [gen, emb], "/v1/models lists the generative and the embedding model", f"{ids}")
        c.run("vectors", check_vectors, cl, emb, g)
        c.run("refusals", check_refusals, srv, cl, emb, gen)
        c.run("concurrent", check_concurrent, cl, emb, gen, g)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
