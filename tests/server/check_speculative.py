#!/usr/bin/env python3
"""Speculative decoding through `ggflow serve` and the official `openai` client.

    check_speculative.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

One line per check (`ok` / `FAIL`); exit 0 when all pass, 1 otherwise, 77 when the model (or the
`openai` package) is missing, unless GGFLOW_REQUIRE_MODELS=1. A plain server and two speculative
ones (--lookup 3, and --draft-model with the model as its own draft) on --model:
- greedy answers (chat and completions, blocking and streamed) of the speculative servers are the
  plain server's, character for character, also for 8 requests at once (continuous batching);
- /metrics counts verifications, draft and accepted tokens (some accepted);
- a seeded sampled request gives the same answer twice; a JSON-mode request (grammar-constrained:
  never speculated) still answers valid JSON;
- bad flags (two proposers, a draft of another vocabulary when the Qwen file is there) make
  `ggflow serve` exit with a clear error.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from server_util import Checker, loopback_only, require_packages, Server, TEST_FLAGS, setup  # noqa: E402

loopback_only()
(openai,) = require_packages("openai")
OpenAI = openai.OpenAI
c = Checker()
QWEN = ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

PROMPTS = [
    "Rename the variable x to value in this code and reply with the code only:\n\nx = 3\nfor i in range(x):\n    print(i * x)\n",
    "Repeat exactly: one two three, one two three, one two three.",
    "What is the capital of France?",
    "Write a short story about a robot who learns to paint.",
]


def chat(client, name, prompt, stream=False, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 64)
    msgs = [{"role": "user", "content": prompt}]
    if not stream:
        return client.chat.completions.create(model=name, messages=msgs, **kw).choices[0].message.content
    parts = client.chat.completions.create(model=name, messages=msgs, stream=True, **kw)
    return "".join(ch.choices[0].delta.content or "" for ch in parts if ch.choices)


def complete(client, name, prompt, **kw):
    return client.completions.create(model=name, prompt=prompt, max_tokens=48, temperature=0, **kw).choices[0].text


def metrics(srv):
    with urllib.request.urlopen(srv.url + "/metrics", timeout=30) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line.startswith("ggflow:spec_decode"):
                k, v = line.split()
                out[k] = float(v)
        return out


def answers(client, name):
    """Every greedy answer the comparison needs, in a fixed order."""
    out = {}
    for i, p in enumerate(PROMPTS):
        out[f"chat {i}"] = chat(client, name, p)
        out[f"chat {i} streamed"] = chat(client, name, p, stream=True)
        out[f"completion {i}"] = complete(client, name, p)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:  # all at once: batched
        futs = [ex.submit(chat, client, name, PROMPTS[i % len(PROMPTS)], max_tokens=40 + i) for i in range(8)]
        for i, f in enumerate(futs):
            out[f"batched {i}"] = f.result()
    return out


def check_server(srv, name, plain, tag):
    client = OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=600)
    got = answers(client, name)
    for k, v in plain.items():
        c.check(got.get(k) == v, f"{tag}: {k} equals the plain server's answer", f"{got.get(k)!r} vs {v!r}")
    m = metrics(srv)
    c.check(m.get("ggflow:spec_decode_num_verifications_total", 0) > 0, f"{tag}: /metrics counts verifications", str(m))
    c.check(0 < m.get("ggflow:spec_decode_num_accepted_tokens_total", 0) <= m.get("ggflow:spec_decode_num_draft_tokens_total", 0),
            f"{tag}: /metrics counts accepted <= draft tokens, some accepted", str(m))
    c.check(0 < m.get("ggflow:spec_decode_acceptance_rate", 0) <= 1, f"{tag}: acceptance rate in (0, 1]", str(m))
    seeded = [chat(client, name, PROMPTS[3], temperature=0.8, seed=42) for _ in range(2)]
    c.check(seeded[0] == seeded[1] and seeded[0], f"{tag}: a seeded sampled answer is reproducible", str(seeded))
    r = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Give a JSON object with a name."}],
                                       response_format={"type": "json_object"}, max_tokens=48, temperature=0)
    text = r.choices[0].message.content
    ok = True
    if r.choices[0].finish_reason == "stop":
        try:
            json.loads(text)
        except ValueError:
            ok = False
    c.check(ok, f"{tag}: JSON mode answers valid JSON", text)


def bad_flags(ggflow, model):
    def exits_with(flags, needle, what):
        p = subprocess.run([ggflow, "serve", "-m", model, "--port", "0", *flags], capture_output=True, text=True, timeout=300)
        c.check(p.returncode != 0 and needle in p.stderr, what, p.stderr[-400:])
    exits_with(["--lookup", "3", "--draft-model", model], "one proposer", "two proposers: a clear error")
    exits_with(["--spec-tokens", "4"], "needs a proposer", "--spec-tokens alone: a clear error")
    if QWEN.exists():
        exits_with(["--draft-model", str(QWEN)], "vocabulary", "a draft of another vocabulary: a clear error")


def main():
    ggflow, model, name = setup(__doc__)
    t0 = time.monotonic()
    with Server(ggflow, model, TEST_FLAGS, name="server plain") as srv:
        plain = answers(OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=600), name)
    for tag, flags in (("lookup", ["--lookup", "3"]), ("draft", ["--draft-model", model, "--spec-tokens", "3"])):
        with Server(ggflow, model, TEST_FLAGS + flags, name=f"server {tag}") as srv:
            c.run(tag, check_server, srv, name, plain, tag)
    c.run("bad flags", bad_flags, ggflow, model)
    print(f"check_speculative: {time.monotonic() - t0:.0f} s")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
