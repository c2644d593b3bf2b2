#!/usr/bin/env python3
"""Fill-in-the-middle (`suffix` on /v1/completions) on Qwen2.5-Coder 0.5B, with the official openai client.

    check_fim.py --ggflow build/ggflow --model models/smollm2-135m-instruct-q4_1.gguf --out-dir DIR

(--model is the suite's default file; FIM needs a code model, so this check serves
models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf beside it.)
1. The prompt ids (/v1/completions/render) are <|fim_prefix|> prompt <|fim_suffix|> suffix
   <|fim_middle|>: the three ids found by text in the file's token list (the gguf package), the
   text pieces as /tokenize gives them without special tokens.
2. Greedy infill of a function body between its signature and a call: the middle starts with
   `return a + b`.
3. Refusals: echo with suffix, token-id prompts with suffix (400 naming the field); on SmolLM2,
   which has no FIM tokens, a suffix is a 400 that names them.

Exit 0: all passed; 1: a check failed; 77: a model or a package is missing.
"""
import sys
from pathlib import Path

from server_util import TEST_FLAGS, Checker, Server, loopback_only, require_model, require_packages, setup

ROOT = Path(__file__).resolve().parents[2]
CODER = ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
PREFIX, SUFFIX = "def add(a, b):\n    ", "\n\nprint(add(2, 3))\n"


def main():
    ggflow, small, _ = setup(__doc__)
    loopback_only()
    openai, gguf = require_packages("openai", "gguf")
    coder = str(require_model(CODER))
    c = Checker()
    tokens = gguf.GGUFReader(coder).fields["tokenizer.ggml.tokens"].contents()
    fim = [tokens.index(t) for t in ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")]
    name = Path(coder).name[:-5]
    with Server(ggflow, coder, TEST_FLAGS, name="server (Qwen2.5-Coder 0.5B)") as srv:
        def plain(text):
            r = srv.request("POST", "/tokenize", {"model": name, "prompt": text, "add_special_tokens": False}, timeout=30)
            return r.json()["tokens"]
        r = srv.request("POST", "/v1/completions/render", {"model": name, "prompt": PREFIX, "suffix": SUFFIX}, timeout=30)
        want = [fim[0]] + plain(PREFIX) + [fim[1]] + plain(SUFFIX) + [fim[2]]
        got = r.json()[0]["token_ids"] if r.status == 200 else None
        c.check(got == want, "render: <|fim_prefix|> prompt <|fim_suffix|> suffix <|fim_middle|>", f"{got} vs {want}")
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        out = client.completions.create(model=name, prompt=PREFIX, suffix=SUFFIX, max_tokens=16, temperature=0)
        text = out.choices[0].text
        c.check(text.startswith("return a + b"), "greedy infill of the body: 'return a + b'", repr(text))
        c.check(out.usage.prompt_tokens == len(want), "usage.prompt_tokens counts the FIM prompt",
                f"{out.usage.prompt_tokens} vs {len(want)}")
        for what, body, field in (("echo with suffix", {"prompt": PREFIX, "suffix": SUFFIX, "echo": True}, "echo"),
                                  ("token ids with suffix", {"prompt": plain(PREFIX), "suffix": SUFFIX}, "suffix")):
            r = srv.request("POST", "/v1/completions", dict(body, model=name, max_tokens=4), timeout=30)
            err = r.json().get("error", {}) if r.status == 400 else {}
            c.check(r.status == 400 and err.get("param") == field, f"{what}: 400 naming '{field}'", repr(r))
    with Server(ggflow, small, TEST_FLAGS, name="server (SmolLM2)") as srv:
        r = srv.request("POST", "/v1/completions", {"prompt": "x = ", "suffix": "\n", "max_tokens": 4}, timeout=30)
        err = r.json().get("error", {}) if r.status == 400 else {}
        c.check(r.status == 400 and err.get("param") == "suffix" and "fim_prefix" in err.get("message", ""),
                "no FIM tokens: suffix is a 400 that names them", repr(r))
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
