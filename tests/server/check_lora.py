#!/usr/bin/env python3
"""LoRA adapters in `ggflow serve` through the official `openai` client: `--lora-modules NAME=FILE`
serves each adapter as a model of its own (vLLM's convention), `--lora FILE` puts one on for every
request.

    check_lora.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

The adapters are models/smollm2-lora-{a,b}.gguf (python/make_lora_adapters.py, written at set-up);
their goldens are llama.cpp's (tests/conformance/goldens/lora-smollm2-*.json,
python/make_lora_goldens.py). One line per check; exit 0 when all pass, 1 otherwise, 77 when a file
(or the `openai` package) is missing, unless GGFLOW_REQUIRE_MODELS=1. The contract is
docs/SERVER.md (LoRA adapters):
- /v1/models lists each adapter with its parent model and its file;
- greedy text of each adapter (a, b, a at scale 0.5) is llama.cpp's with that adapter, and each
  step's top-2 log-probability gap is llama.cpp's logit margin within 0.5 (the fast path's int8
  activations against llama.cpp's; test_lora bounds the whole logit rows by NMSE); the base model's is
  llama.cpp's without adapters, also right after the same prompt ran under an adapter (the prefix
  cache keeps the two apart); answers name the adapter as their model, streamed or not;
- requests to the base model and to every adapter at once (one batch mixing adapters) answer
  what each answers alone: the same text and log-probabilities bit for bit; meanwhile /metrics'
  vllm:lora_requests_info names their adapters (max_lora: those served), none once idle;
- `--lora FILE` answers as adapter a for the model's own name;
- refused: an unknown adapter name (404 naming the served ones, the server alive); at start, with
  the cause: a model file given as an adapter, a missing file, NAME=FILE malformed, a name taken,
  a name twice, adapters with two models served.
"""
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from server_util import TEST_FLAGS, Checker, Server, loopback_only, require_model, require_packages, setup  # noqa: E402

loopback_only()
(openai,) = require_packages("openai")
OpenAI = openai.OpenAI

c = Checker()
GOLDENS = ROOT / "tests" / "conformance" / "goldens"
MARGIN_TOLERANCE = 0.5


def client_of(srv):
    return OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)


def greedy(cl, model, prompt, n=16):
    """Text, token strings and top-2 log-probabilities of a greedy completion."""
    r = cl.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0, logprobs=2)
    ch = r.choices[0]
    return r.model, ch.text, ch.logprobs.tokens, [sorted(t.values(), reverse=True) for t in ch.logprobs.top_logprobs]


def golden(name):
    import json
    return json.loads((GOLDENS / f"lora-smollm2-{name}.json").read_text())


def check_models(cl, base, adapters):
    listed = {m.id: m.model_extra or {} for m in cl.models.list().data}
    want = {base: (None, None)} | {k: (base, str(v)) for k, v in adapters.items()}
    got = {k: (v.get("parent"), v.get("root") if v.get("parent") else None) for k, v in listed.items()}
    c.check(got == want, "/v1/models lists the model and each adapter with its parent and file", f"{got}")


def check_goldens(cl, base, prompt_ids):
    for model, g in (("a", golden("a")), ("b", golden("b")), ("a-half", golden("a-half"))):
        name, text, _, top = greedy(cl, model, prompt_ids)
        gaps = [t[0] - t[1] for t in top]
        worst = max(abs(x - y) for x, y in zip(gaps, g["greedy_margins"]))
        c.check(name == model and text == g["greedy_text"] and worst < MARGIN_TOLERANCE,
                f"adapter {model} (scale {g['scale']}): llama.cpp's greedy text, top-2 gaps within {worst:.3f} of its margins",
                f"model {name!r}, text {text!r} vs {g['greedy_text']!r}, worst gap difference {worst}")
    name, text, _, _ = greedy(cl, base, prompt_ids)
    c.check(name == base and text == golden("a")["base_greedy_text"],
            "the base model, right after the same prompt ran under the adapters: llama.cpp's text without them",
            f"{text!r}")
    chunks = list(cl.chat.completions.create(model="b", messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                             temperature=0, stream=True))
    c.check(chunks and all(k.model == "b" for k in chunks), "a streamed chat answer names the adapter as its model",
            f"{[k.model for k in chunks]}")


def lora_info(srv):
    """vllm:lora_requests_info's labels, from /metrics."""
    import re
    text = srv.request("GET", "/metrics", timeout=10).body.decode()
    m = re.search(r'^vllm:lora_requests_info\{([^}]*)\}', text, re.M)
    return dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))) if m else {}


def check_mixed(srv, cl, base):
    prompts = ["The capital of France is", "def fibonacci(n):", "Three primary colors are"]
    models = [base, "a", "b", "a-half"]
    alone = {(m, p): greedy(cl, m, p, 12) for m in models for p in prompts}
    together, threads = {}, []

    def one(m, p):
        together[(m, p)] = greedy(cl, m, p, 12)

    seen, stop = set(), threading.Event()

    def watch():  # the adapters /metrics reports while the requests run
        while not stop.is_set():
            info = lora_info(srv)
            for key in ("running_lora_adapters", "waiting_lora_adapters"):
                seen.update(x for x in info.get(key, "").split(",") if x)

    watcher = threading.Thread(target=watch)
    watcher.start()
    for key in alone:
        threads.append(threading.Thread(target=one, args=key))
        threads[-1].start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    differ = [k for k in alone if together.get(k) != alone[k]]
    distinct = len({alone[(m, prompts[0])][1] for m in models})
    c.check(not differ and distinct == len(models),
            f"{len(alone)} requests to the model and its adapters at once: each one's text and log-probabilities "
            f"bit for bit as alone ({distinct} different answers to one prompt)",
            f"differ: {differ}")
    srv.wait_idle()
    after = lora_info(srv)
    c.check(seen and seen <= {"a", "b", "a-half"} and after.get("max_lora") == "3"
            and after.get("running_lora_adapters") == after.get("waiting_lora_adapters") == "",
            "vllm:lora_requests_info: max_lora 3, the adapters of the running and waiting requests (none once idle)",
            f"seen {seen}, after {after}")


def check_unknown(srv, cl):
    try:
        cl.completions.create(model="c", prompt="hi", max_tokens=2)
        c.fail("an unknown adapter name is a 404", "answered")
    except openai.APIStatusError as e:
        c.check(e.status_code == 404 and "'a' (an adapter on" in str(e),
                "an unknown adapter name is a 404 naming the served adapters", str(e))
    c.check(srv.running() and greedy(cl, "a", "hi", 2)[1] != "", "the server goes on serving the adapters")


def check_global(ggflow, model, base, prompt_ids, a_path):
    with Server(ggflow, model, [*TEST_FLAGS, "--lora", a_path], name="lora-global") as srv:
        name, text, _, _ = greedy(client_of(srv), base, prompt_ids)
        c.check(name == base and text == golden("a")["greedy_text"],
                "--lora FILE: the model's own name answers with the adapter on (llama.cpp's text)", f"{text!r}")


def check_refusals(ggflow, model, a_path):
    gemma = ROOT / "models" / "gemma3-270m-q4_k_m.gguf"
    cases = [
        ("a model file given as an adapter", ["--lora", model], "general.type is 'model', not 'adapter'"),
        ("a missing adapter file", ["--lora-modules", "x=models/no-such-adapter.gguf"], "cannot open"),
        ("NAME=FILE malformed", ["--lora-modules", a_path], "not NAME=FILE"),
        ("a name taken by the model", ["--lora-modules", f"{Path(model).stem}={a_path}"], "is taken by"),
        ("a name twice", ["--lora-modules", f"x={a_path}", f"x={a_path}"], "two adapters are named 'x'"),
        ("adapters with two models served", ["-m", str(gemma), "--lora", a_path], "attach to one model"),
    ]
    for what, flags, want in cases:
        r = subprocess.run([ggflow, "serve", "-m", model, "--port", "0", *TEST_FLAGS, *flags], capture_output=True,
                           timeout=120)
        err = r.stderr.decode(errors="replace")
        c.check(r.returncode == 1 and want in err and "hint:" in err, f"refused at start, with the cause: {what}",
                f"exit {r.returncode}: {err[-400:]}")


def main():
    ggflow, model, base = setup(__doc__)
    a_path = str(require_model(ROOT / "models" / "smollm2-lora-a.gguf"))
    b_path = str(require_model(ROOT / "models" / "smollm2-lora-b.gguf"))
    g = golden("a")
    prompt_ids = g["tokens"][:g["n_prompt"]]
    adapters = {"a": a_path, "b": b_path, "a-half": a_path + ":0.5"}
    flags = [*TEST_FLAGS, "--lora-modules", *[f"{k}={v}" for k, v in adapters.items()]]
    with Server(ggflow, model, flags, name="lora-modules") as srv:
        cl = client_of(srv)
        c.run("models", check_models, cl, base, {"a": a_path, "b": b_path, "a-half": a_path})
        c.run("goldens", check_goldens, cl, base, prompt_ids)
        c.run("mixed batch", check_mixed, srv, cl, base)
        c.run("unknown", check_unknown, srv, cl)
    c.run("--lora", check_global, ggflow, model, base, prompt_ids, a_path)
    c.run("refusals", check_refusals, ggflow, model, a_path)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
