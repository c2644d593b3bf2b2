#!/usr/bin/env python3
"""`ggflow serve` through the official `openai` client, as a user of the OpenAI API drives it.

    check_openai.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

One line per check (`ok` / `FAIL`); exit 0 when all pass, 1 otherwise, 77 when the model (or the
`openai` package) is missing, unless GGFLOW_REQUIRE_MODELS=1. The contract is docs/SERVER.md:
- /v1/models; chat and completions, streaming and not, usage; completions with a string, a list of
  strings, token ids, echo, logprobs, echo with logprobs (the prompt scored); n with the prefix cache and `seed + i`; chat logprobs; stop
  strings; seed reproducibility;
- errors as the client's exception types (400, 404, 401 with `--api-key`, 429 with `--max-queue`);
- greedy through the server equals `ggflow run` (text, and the ids of `ggflow run --tokens`), and
  equals itself in a batch of 8 concurrent streams (batch invariance through HTTP, sampled too);
- a KV pool too small for the batch: preemption, and still each request's alone tokens;
- /metrics has every series of the contract; once idle, no running request and no KV block held;
- SIGTERM during a long stream: 503 for new requests, the stream ends with a final chunk and
  [DONE], the process exits 0; past --shutdown-timeout a running stream and a waiting request
  end with finish_reason cancelled.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from server_util import (DEFAULT_MODEL, SKIP_RC, Checker, Server, TEST_FLAGS, eos_id, idle_detail,  # noqa: E402
                         require_model, setup, run_ggflow, served_name, set_log_dir, sse_events)

# Loopback only: never let a proxy from the environment see these requests.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
for v in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(v, None)

try:
    import openai
    from openai import OpenAI
except ImportError as e:  # setup installs it into .venv
    if os.environ.get("GGFLOW_REQUIRE_MODELS") == "1":
        print(f"FAIL the openai package: {e} (run scripts/setup.sh)")
        sys.exit(1)
    print(f"skip the openai package is missing ({e}); run scripts/setup.sh")
    sys.exit(SKIP_RC)

c = Checker()

LONG_PROMPT = (
    "You are reading a long note about lighthouses. Lighthouses were built along dangerous coasts to "
    "warn ships of rocks, reefs and shallow water. Early lighthouses burned wood or coal in open fires; "
    "later ones used oil lamps with polished reflectors, and in the nineteenth century the Fresnel lens "
    "made the light visible from far out at sea. Keepers lived in small houses beside the towers, "
    "trimming wicks, cleaning the glass and winding the clockwork that turned the lens every night. "
    "Today most lighthouses are automated. Summarize the note in one sentence.")

PROMPT = "What is the capital of France?"
OTHER_PROMPTS = [
    "Name three colors.",
    "Write a haiku about autumn leaves falling in a quiet park.",
    "What is 2 plus 2?",
    "Explain in two sentences why the sky is blue, for a child who is five years old.",
    "Hi!",
    "List the planets of the solar system in order from the sun, with one fact about each.",
]


def run_check(what, fn, *args):
    """Runs one group of checks; an exception is a failure of that group, the others go on."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 — report and go on
        c.fail(what, f"{type(e).__name__}: {e}")
        traceback.print_exc(limit=3)
        for srv in Server.instances:
            why = srv.crashed()
            if why:
                print(why)
        return None


def usage_ok(u, max_tokens=None):
    if u is None:
        return False, "no usage"
    if u.total_tokens != u.prompt_tokens + u.completion_tokens:
        return False, f"total {u.total_tokens} != {u.prompt_tokens} + {u.completion_tokens}"
    if u.prompt_tokens <= 0 or u.completion_tokens < 0:
        return False, f"prompt {u.prompt_tokens}, completion {u.completion_tokens}"
    if max_tokens is not None and u.completion_tokens > max_tokens:
        return False, f"completion {u.completion_tokens} > max_tokens {max_tokens}"
    return True, ""


def extra(obj, name):
    """An extension field (return_token_ids) of a response object."""
    v = getattr(obj, name, None)
    if v is None and getattr(obj, "model_extra", None):
        v = obj.model_extra.get(name)
    return v


def msgs(text):
    return [{"role": "user", "content": text}]


# ---- the checks --------------------------------------------------------------------------------
def check_models(client, name):
    ids = [m.id for m in client.models.list()]
    c.check(name in ids, f"models.list() lists {name!r}", f"got {ids}")
    m = client.models.retrieve(name)
    c.check(m.id == name, f"models.retrieve({name!r})", f"got {m.id!r}")


def check_chat(client, name):
    params = dict(model=name, messages=msgs("Write one sentence about the sea."), max_tokens=24, temperature=0)
    r = client.chat.completions.create(**params)
    ch = r.choices[0] if r.choices else None
    text = ch.message.content if ch else None
    ok, why = usage_ok(r.usage, 24)
    c.check(ch is not None and len(r.choices) == 1 and bool(text) and ch.finish_reason in ("stop", "length")
            and ch.message.role == "assistant" and r.object == "chat.completion" and r.id.startswith("chatcmpl-")
            and r.model == name and ok,
            "chat, not streamed, temperature 0: content, finish_reason, usage",
            f"{why} text={text!r} finish={ch.finish_reason if ch else None} object={r.object} id={r.id} model={r.model}")

    stream = client.chat.completions.create(**params, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    content = [k for k in chunks if k.choices]
    first = content[0].choices[0].delta if content else None
    c.check(first is not None and first.role == "assistant", "chat streamed: the first delta has role assistant",
            f"first delta {first}")
    got = "".join(k.choices[0].delta.content or "" for k in content)
    finishes = [k.choices[0].finish_reason for k in content if k.choices[0].finish_reason]
    c.check(got == text and finishes == [ch.finish_reason], "chat streamed: chunks assemble into the non-streamed text",
            f"streamed {got!r} ({finishes}) vs {text!r} ({ch.finish_reason})")
    last = chunks[-1] if chunks else None
    lu = last.usage if last else None
    others_null = all(k.usage is None for k in chunks[:-1])
    c.check(last is not None and last.choices == [] and lu is not None and others_null
            and lu.completion_tokens == r.usage.completion_tokens and lu.prompt_tokens == r.usage.prompt_tokens
            and usage_ok(lu, 24)[0] and all(k.object == "chat.completion.chunk" for k in chunks),
            "chat streamed with include_usage: the last chunk has choices [] and the usage",
            f"last={last} usage on the others: {[k.usage for k in chunks[:-1] if k.usage]}")


def tokenize(srv, text, add_special=True):
    r = srv.request("POST", "/tokenize", {"content": text, "add_special": add_special})
    if r.status != 200:
        raise RuntimeError(f"/tokenize: {r}")
    return r.json()["tokens"]


def check_completions(client, name, srv):
    p1, p2 = "The capital of France is", "Once upon a time, in a small village,"
    kw = dict(model=name, max_tokens=8, temperature=0)
    r1 = client.completions.create(prompt=p1, **kw)
    t1 = r1.choices[0].text if r1.choices else None
    ok, why = usage_ok(r1.usage, 8)
    c.check(len(r1.choices) == 1 and r1.choices[0].index == 0 and isinstance(t1, str) and t1 != ""
            and r1.choices[0].finish_reason in ("stop", "length") and r1.object == "text_completion" and ok,
            "completions: a string prompt", f"{why} {r1}")
    r2 = client.completions.create(prompt=p2, **kw)
    t2 = r2.choices[0].text

    rl = client.completions.create(prompt=[p1, p2], **kw)
    idx = [x.index for x in rl.choices]
    texts = {x.index: x.text for x in rl.choices}
    c.check(len(rl.choices) == 2 and sorted(idx) == [0, 1] and texts.get(0) == t1 and texts.get(1) == t2
            and rl.usage.completion_tokens == r1.usage.completion_tokens + r2.usage.completion_tokens,
            "completions: a list of 2 prompts gives choices 0 and 1, each as alone",
            f"indexes {idx}, texts {texts} vs {[t1, t2]}, usage {rl.usage}")

    ids1, ids2 = tokenize(srv, p1), tokenize(srv, p2)
    rt = client.completions.create(prompt=ids1, **kw)
    rtt = client.completions.create(prompt=[ids1, ids2], **kw)
    tt = {x.index: x.text for x in rtt.choices}
    c.check(rt.choices[0].text == t1 and rt.usage.prompt_tokens == len(ids1) and tt == {0: t1, 1: t2},
            "completions: token-id prompts (one, and a list of two) as the text prompts",
            f"{rt.choices[0].text!r} / {tt} vs {t1!r}, {t2!r}; prompt_tokens {rt.usage.prompt_tokens} vs {len(ids1)}")

    re_ = client.completions.create(prompt=p1, echo=True, **kw)
    te = re_.choices[0].text
    c.check(te.startswith(p1) and te == p1 + t1, "completions: echo puts the prompt before the completion",
            f"{te!r}")

    rp = client.completions.create(prompt=p1, logprobs=2, **kw)
    lp = rp.choices[0].logprobs
    n = rp.usage.completion_tokens
    problems = []
    if lp is None:
        problems.append("no logprobs")
    else:
        lens = [len(lp.tokens or []), len(lp.token_logprobs or []), len(lp.top_logprobs or []), len(lp.text_offset or [])]
        if len(set(lens)) != 1 or lens[0] != n or n == 0:
            problems.append(f"lengths tokens/token_logprobs/top_logprobs/text_offset {lens}, completion_tokens {n}")
        else:
            for i in range(n):
                v, top = lp.token_logprobs[i], lp.top_logprobs[i]
                if not v <= 0:
                    problems.append(f"token_logprobs[{i}] = {v} > 0")
                if not top or len(top) > 2 or any(x > 0 for x in top.values()):
                    problems.append(f"top_logprobs[{i}] = {top}")
                elif abs(max(top.values()) - v) > 1e-4:
                    problems.append(f"greedy token {i} ({v}) is not the top-1 ({top})")
            if rp.choices[0].text != t1:
                problems.append(f"text {rp.choices[0].text!r} != {t1!r}")
    c.check(not problems, "completions: logprobs=2 (lengths match, logprobs <= 0, greedy = top-1)", "; ".join(problems))


def check_n(client, name):
    kw = dict(model=name, messages=msgs(LONG_PROMPT), temperature=1, max_tokens=12)
    r = client.chat.completions.create(n=2, seed=4242, **kw)
    idx = sorted(x.index for x in r.choices)
    d = r.usage.prompt_tokens_details if r.usage else None
    cached = d.cached_tokens if d is not None else None
    c.check(len(r.choices) == 2 and idx == [0, 1], "n=2: two choices, indexes 0 and 1", f"indexes {idx}")
    c.check(r.usage.prompt_tokens > 64 and cached is not None and cached > 0,
            "n=2: usage.prompt_tokens_details.cached_tokens > 0 (the choices share the prompt's blocks)",
            f"prompt_tokens {r.usage.prompt_tokens}, cached_tokens {cached}")
    by = {x.index: x.message.content for x in r.choices}
    a = client.chat.completions.create(n=1, seed=4242, **kw).choices[0].message.content
    b = client.chat.completions.create(n=1, seed=4243, **kw).choices[0].message.content
    c.check(by.get(0) == a and by.get(1) == b, "n=2: choice i is what seed + i gives alone",
            f"n=2 gave {by}; seed 4242 alone {a!r}, seed 4243 alone {b!r}")


def check_best_of(client, name):
    """best_of > n: the n of best_of candidates with the highest cumulative log-probability, most
    likely first. The candidates themselves are what n = best_of gives (candidate i: seed + i)."""
    kw = dict(model=name, prompt="Once upon a time", temperature=1.0, max_tokens=10, seed=777)
    r = client.completions.create(best_of=4, n=2, **kw)
    cands = client.completions.create(n=4, logprobs=0, **kw)
    ranked = sorted(cands.choices, key=lambda ch: (-sum(ch.logprobs.token_logprobs), ch.index))
    want = [ch.text for ch in ranked[:2]]
    got = [ch.text for ch in sorted(r.choices, key=lambda ch: ch.index)]
    c.check(got == want and len(set(x.text for x in cands.choices)) > 2,
            "best_of=4, n=2: the two candidates with the highest cumulative logprob, most likely first",
            f"got {got}, want {want}, sums {[round(sum(ch.logprobs.token_logprobs), 3) for ch in cands.choices]}")
    c.check(all(ch.logprobs is None for ch in r.choices), "best_of: no logprobs in the answer unless asked",
            str([ch.logprobs for ch in r.choices]))
    c.check(r.usage.completion_tokens == cands.usage.completion_tokens,
            "best_of: usage counts every candidate's tokens", f"{r.usage.completion_tokens} vs {cands.usage.completion_tokens}")
    one = client.completions.create(best_of=3, logprobs=1, **kw)
    lp = one.choices[0].logprobs
    c.check(len(one.choices) == 1 and lp is not None and len(lp.top_logprobs or []) == len(lp.tokens),
            "best_of=3, n=1 with logprobs=1: one answer with its logprobs", repr(one.choices))


def check_chat_logprobs(client, name):
    r = client.chat.completions.create(model=name, messages=msgs("Tell me a story about a brave knight."),
                                       temperature=0, max_tokens=12, logprobs=True, top_logprobs=3)
    ch = r.choices[0]
    content = ch.logprobs.content if ch.logprobs else None
    problems = []
    if content is None:
        problems.append("no logprobs.content")
    else:
        if len(content) != r.usage.completion_tokens or not content:
            problems.append(f"{len(content)} entries, completion_tokens {r.usage.completion_tokens}")
        for i, e in enumerate(content):
            tops = e.top_logprobs or []
            vals = [t.logprob for t in tops]
            if len(tops) != 3:
                problems.append(f"[{i}] {len(tops)} top_logprobs")
            elif vals != sorted(vals, reverse=True):
                problems.append(f"[{i}] top_logprobs not sorted descending: {vals}")
            elif not e.logprob <= 0 or any(v > 0 for v in vals):
                problems.append(f"[{i}] logprob {e.logprob} > 0 ({vals})")
            elif tops[0].token != e.token or abs(tops[0].logprob - e.logprob) > 1e-4:
                problems.append(f"[{i}] greedy token {e.token!r} ({e.logprob}) is not the top-1 {tops[0].token!r} ({tops[0].logprob})")
        joined = "".join(e.token for e in content)
        if joined != ch.message.content and not ch.message.content.startswith(joined) and not joined.startswith(ch.message.content):
            problems.append(f"tokens {joined!r} vs content {ch.message.content!r}")
    c.check(not problems, "chat logprobs, top_logprobs=3: one entry per token, sorted, <= 0, greedy = top-1",
            "; ".join(problems[:5]))


def check_stop(client, name):
    kw = dict(model=name, messages=msgs("List five fruits, separated by commas, and say why you like each."),
              temperature=0, max_tokens=32)
    full = client.chat.completions.create(**kw).choices[0].message.content
    word = next((w for w in re.findall(r"[A-Za-z]{4,}", full) if full.index(w) > 0), None)
    if word is None:
        c.fail("stop: no word to stop at in the greedy output", repr(full))
        return
    want = full[:full.index(word)]
    r = client.chat.completions.create(stop=[word], **kw)
    got = r.choices[0].message.content
    c.check(got == want and r.choices[0].finish_reason == "stop", f"stop=[{word!r}]: the output stops before it",
            f"got {got!r} ({r.choices[0].finish_reason}), want {want!r}")
    s = client.chat.completions.create(stop=[word, "zzzz-never"], stream=True, **kw)
    got_s, fin = "", None
    for k in s:
        for ch in k.choices:
            got_s += ch.delta.content or ""
            fin = ch.finish_reason or fin
    c.check(got_s == want and fin == "stop", f"stop=[{word!r}, ...] streamed: the output stops before it",
            f"got {got_s!r} ({fin}), want {want!r}")


    # A stop string whose start appears but which never completes: the held-back text comes out.
    never = word + "QQZ"
    s = client.chat.completions.create(stop=[never], stream=True, **kw)
    got_s = "".join(ch.delta.content or "" for k in s for ch in k.choices)
    c.check(got_s == full, f"stop=[{never!r}] streamed (its prefix {word!r} appears): the whole text comes out",
            f"got {got_s!r}, want {full!r}")
    # A stop string across a token boundary (the end of one word, the space, the start of the next).
    i = full.index(word)
    across = full[max(0, i - 3):i + 2]
    want = full[:full.index(across)]
    r = client.chat.completions.create(stop=[across], **kw)
    s = client.chat.completions.create(stop=[across], stream=True, **kw)
    got_s = "".join(ch.delta.content or "" for k in s for ch in k.choices)
    c.check(r.choices[0].message.content == want and got_s == want and r.choices[0].finish_reason == "stop",
            f"stop=[{across!r}] (across tokens), streamed and not: the output stops before it",
            f"got {r.choices[0].message.content!r} / streamed {got_s!r}, want {want!r}")


def check_utf8(client, name, srv):
    """Characters split across tokens: decoded whole, streamed or not, and logprobs' bytes add up."""
    text = "I love 😀 and 中文 and émojis 🎉"
    ids = tokenize(srv, text)
    r = client.completions.create(model=name, prompt=ids, echo=True, max_tokens=1, temperature=0)
    c.check(r.choices[0].text.startswith(text), "utf-8: echo of a token-id prompt decodes split characters whole",
            repr(r.choices[0].text))
    kw = dict(model=name, messages=msgs("Use many emojis to describe a party 🎉🎂"), max_tokens=24, temperature=0)
    r = client.chat.completions.create(logprobs=True, **kw)
    t = r.choices[0].message.content
    st = "".join(ch.delta.content or "" for k in client.chat.completions.create(stream=True, **kw) for ch in k.choices)
    joined = b"".join(bytes(e.bytes or []) for e in (r.choices[0].logprobs.content or []))
    c.check(st == t and any(ord(ch) > 0xFFFF for ch in t) and joined.decode(errors="ignore") == t.replace("\ufffd", ""),
            "utf-8: emoji output, streamed = not streamed, logprobs bytes concatenate to the content",
            f"non-streamed {t!r}, streamed {st!r}, bytes {joined!r}")


def check_seed(client, name):
    kw = dict(model=name, messages=msgs("Invent a name for a new planet and describe it."), temperature=0.9,
              seed=1234, max_tokens=24)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    c.check(a == b and a, "seed 1234, temperature 0.9, twice: the same text", f"{a!r} vs {b!r}")


def check_errors(client, name):
    try:
        client.chat.completions.create(model=name, messages=msgs("hi"), temperature=5, max_tokens=4)
        c.fail("temperature 5: openai.BadRequestError", "no error")
    except openai.BadRequestError as e:
        c.check(e.status_code == 400 and e.param == "temperature" and e.code == "invalid_value",
                "temperature 5: openai.BadRequestError (param temperature, code invalid_value)",
                f"param {e.param!r} code {e.code!r}")
    except openai.APIError as e:
        c.fail("temperature 5: openai.BadRequestError", f"{type(e).__name__}: {e}")
    try:
        client.chat.completions.create(model="no-such-model", messages=msgs("hi"), max_tokens=4)
        c.fail("unknown model: openai.NotFoundError", "no error")
    except openai.NotFoundError as e:
        c.check(e.status_code == 404 and e.code == "model_not_found",
                "unknown model: openai.NotFoundError (code model_not_found)", f"code {e.code!r}")
    except openai.APIError as e:
        c.fail("unknown model: openai.NotFoundError", f"{type(e).__name__}: {e}")


def stream_collect(client, name, prompt, barrier=None, **kw):
    """One streamed chat request: (text, token ids, finish_reason). Token ids: the per-chunk `token_ids`."""
    if barrier is not None:
        barrier.wait(timeout=60)
    s = client.chat.completions.create(model=name, messages=msgs(prompt), stream=True,
                                       extra_body={"return_token_ids": True}, **kw)
    text, ids, fin, saw_ids = "", [], None, False
    for k in s:
        for ch in k.choices:
            text += ch.delta.content or ""
            t = extra(ch, "token_ids")
            if t is not None:
                saw_ids = True
                ids += t
            fin = ch.finish_reason or fin
    return text, (ids if saw_ids else None), fin


def check_greedy_vs_run(client, name, ggflow, model):
    n = 32
    out = run_ggflow([ggflow, "run", "-m", model, "--chat", "-p", PROMPT, "-n", n, "--temperature", 0, "-t", 2])
    run_text = out[:-1] if out.endswith("\n") else out
    r = client.chat.completions.create(model=name, messages=msgs(PROMPT), max_tokens=n, temperature=0,
                                       extra_body={"return_token_ids": True})
    text = r.choices[0].message.content
    c.check(text == run_text, "greedy: the server's chat text equals `ggflow run --chat`",
            f"server {text!r} vs run {run_text!r}")
    ids = extra(r.choices[0], "token_ids")
    prompt_ids = extra(r, "prompt_token_ids")
    if c.check(isinstance(ids, list) and isinstance(prompt_ids, list) and len(ids) == r.usage.completion_tokens
               and len(prompt_ids) == r.usage.prompt_tokens,
               "return_token_ids: prompt_token_ids and choices[].token_ids, as many as the usage says",
               f"token_ids {ids}, prompt_token_ids {prompt_ids}, usage {r.usage}"):
        run_ids = [int(x) for x in run_ggflow([ggflow, "run", "-m", model, "--tokens", ",".join(map(str, prompt_ids)),
                                               "-n", n, "-t", 2]).split(",")]
        c.check(ids and ids == run_ids[:len(ids)],
                "greedy: the server's token ids equal `ggflow run --tokens` on its prompt ids",
                f"server {ids} vs run {run_ids}")

    # Alone, one at a time, then the same 8 requests as concurrent streams: each the same.
    reqs = [(PROMPT, dict(max_tokens=n, temperature=0))]
    reqs += [(p, dict(max_tokens=n, temperature=0)) for p in OTHER_PROMPTS]
    reqs += [("Describe a dragon in a few words.", dict(max_tokens=n, temperature=0.9, seed=99))]
    alone = [stream_collect(client, name, p, **kw) for p, kw in reqs]
    c.check(alone[0][0] == text and alone[0][1] == ids, "streamed alone: the same text and token ids as not streamed",
            f"streamed {alone[0][:2]} vs {text!r} {ids}")
    results = [None] * len(reqs)
    barrier = threading.Barrier(len(reqs))

    def worker(i):
        try:
            results[i] = stream_collect(client, name, reqs[i][0], barrier, **reqs[i][1])
        except Exception as e:  # noqa: BLE001
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    c.check(results[0] == alone[0], "8 concurrent streams: PROMPT's text and token ids equal the alone result",
            f"batched {results[0]} vs alone {alone[0]}")
    diff = [i for i in range(1, len(reqs)) if results[i] != alone[i]]
    c.check(not diff, "8 concurrent streams: every request (greedy and seeded) equals its alone result",
            "; ".join(f"#{i}: {results[i]} vs {alone[i]}" for i in diff))


def check_more_chat(client, name, srv):
    # max_completion_tokens, finish_reason length, system_fingerprint
    r = client.chat.completions.create(model=name, messages=msgs("Count from one to one hundred in words."),
                                       temperature=0, max_completion_tokens=5)
    c.check(r.usage.completion_tokens == 5 and r.choices[0].finish_reason == "length" and r.system_fingerprint,
            "chat: max_completion_tokens 5 gives 5 tokens, finish_reason length, a system_fingerprint",
            f"usage {r.usage}, finish {r.choices[0].finish_reason}, fingerprint {r.system_fingerprint!r}")

    # The prefix cache across requests: the same long prompt again is found in it.
    kw = dict(model=name, messages=msgs(LONG_PROMPT + " Then list three facts."), temperature=0, max_tokens=2)
    client.chat.completions.create(**kw)
    r = client.chat.completions.create(**kw)
    d = r.usage.prompt_tokens_details
    cached = d.cached_tokens if d is not None else None
    c.check(cached is not None and 32 <= cached <= r.usage.prompt_tokens,
            "prefix cache: a repeated long prompt reports cached_tokens >= 32",
            f"prompt_tokens {r.usage.prompt_tokens}, cached_tokens {cached}")

    # logit_bias +100 on one token: greedy picks it every time.
    tok = tokenize(srv, " banana", add_special=False)[-1]
    r = client.chat.completions.create(model=name, messages=msgs("Say something."), temperature=0, max_tokens=4,
                                       logit_bias={str(tok): 100}, extra_body={"return_token_ids": True})
    ids = extra(r.choices[0], "token_ids")
    c.check(ids == [tok] * 4, f"logit_bias {{{tok}: 100}}: every greedy token is {tok}", f"token ids {ids}")

    # n=2 streamed: each choice's first delta has the role, each choice ends once.
    s = client.chat.completions.create(model=name, messages=msgs("Name an animal."), n=2, seed=5, temperature=1,
                                       max_tokens=6, stream=True)
    firsts, texts, fins = {}, {0: "", 1: ""}, {}
    for k in s:
        for ch in k.choices:
            firsts.setdefault(ch.index, ch.delta.role)
            texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
            if ch.finish_reason:
                fins[ch.index] = fins.get(ch.index, []) + [ch.finish_reason]
    r = client.chat.completions.create(model=name, messages=msgs("Name an animal."), n=2, seed=5, temperature=1,
                                       max_tokens=6)
    want = {x.index: x.message.content for x in r.choices}
    c.check(firsts == {0: "assistant", 1: "assistant"} and all(len(v) == 1 for v in fins.values())
            and sorted(fins) == [0, 1] and texts == want,
            "n=2 streamed: both choices start with role assistant, end once, and equal the non-streamed choices",
            f"first roles {firsts}, finishes {fins}, streamed {texts} vs {want}")


def check_completions_stream(client, name):
    kw = dict(model=name, prompt="The three primary colors are", max_tokens=10, temperature=0)
    r = client.completions.create(**kw)
    s = client.completions.create(stream=True, stream_options={"include_usage": True}, **kw)
    chunks = list(s)
    text = "".join(ch.text for k in chunks for ch in k.choices)
    fins = [ch.finish_reason for k in chunks for ch in k.choices if ch.finish_reason]
    usage = chunks[-1].usage if chunks else None
    c.check(text == r.choices[0].text and fins == [r.choices[0].finish_reason] and usage is not None
            and usage.completion_tokens == r.usage.completion_tokens
            and all(k.object == "text_completion" for k in chunks),
            "completions streamed: the chunks assemble into the non-streamed text, usage last",
            f"streamed {text!r} {fins} usage {usage}; non-streamed {r.choices[0].text!r} {r.choices[0].finish_reason}")


def check_echo_logprobs(client, name, srv):
    """echo + logprobs scores the prompt: each prompt token's logprob and top-k are those of the
    request whose prompt stops just before it (exact: the engine is batch invariant)."""
    p = "The capital of France is"
    kw = dict(model=name, max_tokens=4, temperature=0, logprobs=3)
    r = client.completions.create(prompt=p, echo=True, **kw)
    plain = client.completions.create(prompt=p, **kw)
    ids = tokenize(srv, p)
    lp, n = r.choices[0].logprobs, r.usage.completion_tokens
    problems = []
    toks = lp.tokens or []
    if len(toks) != len(ids) + n or len(lp.token_logprobs) != len(toks) or len(lp.top_logprobs) != len(toks):
        problems.append(f"{len(toks)} tokens for {len(ids)} prompt + {n} generated")
    elif "".join(toks) != r.choices[0].text or r.choices[0].text != p + plain.choices[0].text:
        problems.append(f"tokens {toks} / text {r.choices[0].text!r} vs {p!r} + {plain.choices[0].text!r}")
    elif lp.token_logprobs[0] is not None or lp.text_offset[0] != 0:
        problems.append(f"first prompt token: logprob {lp.token_logprobs[0]}, offset {lp.text_offset[0]}")
    elif lp.token_logprobs[len(ids):] != plain.choices[0].logprobs.token_logprobs:
        problems.append(f"generated part {lp.token_logprobs[len(ids):]} vs {plain.choices[0].logprobs.token_logprobs}")
    else:
        for k in range(1, len(ids)):
            v = lp.token_logprobs[k]
            alone = client.completions.create(prompt=ids[:k], model=name, max_tokens=1, temperature=0, logprobs=3)
            top = alone.choices[0].logprobs.top_logprobs[0]
            if not (v is not None and v <= 0) or lp.top_logprobs[k] != top:
                problems.append(f"prompt token {k} ({toks[k]!r}): {v}, top {lp.top_logprobs[k]} vs alone {top}")
    again = client.completions.create(prompt=p, echo=True, **kw)
    cached = again.usage.prompt_tokens_details.cached_tokens if again.usage.prompt_tokens_details else None
    if again.choices[0].logprobs.token_logprobs != lp.token_logprobs or cached not in (0, None):
        problems.append(f"repeated: cached_tokens {cached}, logprobs equal "
                        f"{again.choices[0].logprobs.token_logprobs == lp.token_logprobs}")
    c.check(not problems, "completions: echo + logprobs=3 scores every prompt token as the shorter prompt alone",
            "; ".join(problems))

    s = list(client.completions.create(prompt=p, echo=True, stream=True, **kw))
    first = next((k.choices[0] for k in s if k.choices), None)
    text = "".join(ch.text for k in s for ch in k.choices)
    stoks = [t for k in s for ch in k.choices if ch.logprobs for t in (ch.logprobs.tokens or [])]
    c.check(first is not None and first.text == p and first.logprobs is not None
            and first.logprobs.tokens == toks[:len(ids)] and text == r.choices[0].text and stoks == toks,
            "completions streamed: echo + logprobs sends the scored prompt first, then the tokens",
            f"first {first}; text {text!r}; tokens {stoks} vs {toks}")


METRICS = {  # docs/SERVER.md's metrics table: name -> type
    "ggflow:num_requests_running": "gauge", "ggflow:num_requests_waiting": "gauge",
    "ggflow:kv_cache_usage_perc": "gauge", "ggflow:cache_config_info": "gauge",
    "ggflow:prefix_cache_queries_total": "counter", "ggflow:prefix_cache_hits_total": "counter",
    "ggflow:prefix_cache_hit_ratio": "gauge", "ggflow:num_preemptions_total": "counter",
    "ggflow:prompt_tokens_total": "counter", "ggflow:generation_tokens_total": "counter",
    "ggflow:request_success_total": "counter", "ggflow:time_to_first_token_seconds": "histogram",
    "ggflow:time_per_output_token_seconds": "histogram", "ggflow:e2e_request_latency_seconds": "histogram",
    "ggflow:http_requests_total": "counter", "ggflow:kv_cache_blocks_used": "gauge",
    "ggflow:kv_cache_reserved_bytes": "gauge", "ggflow:kv_cache_resident_bytes": "gauge",
}


def check_metrics_names(srv):
    r = srv.request("GET", "/metrics", timeout=10)
    text = r.body.decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    wrong = {k: types.get(k) for k, v in METRICS.items() if types.get(k) != v}
    c.check(r.status == 200 and not wrong and r.header("content-type", "").startswith("text/plain"),
            "/metrics: every series of docs/SERVER.md with its type (text/plain)", f"missing or mistyped: {wrong}")
    m = srv.metrics()
    info = [k for k in m if k.startswith("ggflow:cache_config_info{")]
    hist = [h for h in ("ggflow:time_to_first_token_seconds", "ggflow:e2e_request_latency_seconds")
            if not (m.get(h + "_count", 0) > 0 and any(k.startswith(h + "_bucket{") for k in m))]
    problems = []
    if not (info and 'block_size="32"' in info[0] and "num_gpu_blocks=" in info[0] and m[info[0]] == 1):
        problems.append(f"cache_config_info {info}")
    for k in ("ggflow:prefix_cache_hits_total", "ggflow:prompt_tokens_total", "ggflow:generation_tokens_total"):
        if not m.get(k, 0) > 0:
            problems.append(f"{k} {m.get(k)}")
    ratio = m.get("ggflow:prefix_cache_hit_ratio")
    q, h = m.get("ggflow:prefix_cache_queries_total"), m.get("ggflow:prefix_cache_hits_total")
    if ratio is None or not q or abs(ratio - h / q) > 1e-3:
        problems.append(f"hit ratio {ratio} vs {h}/{q}")
    if not m.get('ggflow:request_success_total{finished_reason="length"}', 0) > 0:
        problems.append("request_success_total{finished_reason=\"length\"} not > 0")
    for code in ("200", "400", "404"):
        if not m.get(f'ggflow:http_requests_total{{code="{code}"}}', 0) > 0:
            problems.append(f"http_requests_total{{code=\"{code}\"}} not > 0")
    if hist:
        problems.append(f"histograms without observations: {hist}")
    # The pool is reserved, not touched: requests were served, so some of it is resident, and never
    # more than the pool.
    reserved, resident = m.get("ggflow:kv_cache_reserved_bytes", 0), m.get("ggflow:kv_cache_resident_bytes", 0)
    if not (0 < resident <= reserved):
        problems.append(f"kv_cache_resident_bytes {resident} not in (0, reserved {reserved}]")
    c.check(not problems, "/metrics: cache_config_info labels, counters and histograms count what was served",
            "; ".join(problems))



def check_llama_routes(client, name, srv):
    """/apply-template, /tokenize and /detokenize agree with what the chat route feeds the model."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue?"}]
    r = srv.request("POST", "/apply-template", {"messages": messages})
    prompt = r.json().get("prompt") if r.status == 200 else None
    chat = client.chat.completions.create(model=name, messages=messages, max_tokens=1, temperature=0,
                                          extra_body={"return_token_ids": True})
    want = extra(chat, "prompt_token_ids")
    ids = tokenize(srv, prompt) if prompt else None
    c.check(prompt and "Why is the sky blue?" in prompt and ids == want,
            "/apply-template then /tokenize gives the chat request's prompt_token_ids",
            f"prompt {prompt!r}, ids {ids}, chat prompt ids {want}")
    text = "Hello, world! Ünïcödé 😀 text."
    ids = tokenize(srv, text, add_special=False)
    r = srv.request("POST", "/detokenize", {"tokens": ids})
    p = srv.request("POST", "/tokenize", {"content": text, "add_special": False, "with_pieces": True})
    pieces = p.json().get("tokens") if p.status == 200 else None
    c.check(r.status == 200 and r.json().get("content") == text and isinstance(pieces, list)
            and [x.get("id") for x in pieces] == ids and all(isinstance(x.get("piece"), str) for x in pieces),
            "/detokenize(/tokenize(text)) is the text; with_pieces gives the same ids with their pieces",
            f"{r} / {p}")


def check_idle_metrics(srv, what):
    m = srv.wait_idle(timeout=10)
    c.check(m.get("ggflow:kv_cache_usage_perc") == 0 and m.get("ggflow:num_requests_running") == 0
            and m.get("ggflow:num_requests_waiting") == 0,
            f"{what}: /metrics shows kv_cache_usage_perc 0 and no request running or waiting", idle_detail(m))


def check_preemption(ggflow, model, name):
    """A KV pool too small for the batch: sequences are preempted and recomputed, and each request
    still gets exactly its alone tokens (greedy and seeded)."""
    flags = ["-t", "2", "--parallel", "8", "--kv-cache", "40", "--ctx-size", "1024"]
    prompts = ["Tell me a story about a cat.", "Describe the ocean in detail.", "Write an essay about trains.",
               "Explain how computers work."]
    bias = {str(eos_id(ggflow, model)): -100}
    with Server(ggflow, model, flags, name="server --kv-cache 40") as srv:
        client = OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=300)

        def one(i):
            kw = dict(temperature=0) if i % 2 == 0 else dict(temperature=0.8, seed=100 + i)
            r = client.chat.completions.create(model=name, messages=msgs(prompts[i]), max_tokens=300, logit_bias=bias,
                                               extra_body={"return_token_ids": True}, **kw)
            return extra(r.choices[0], "token_ids"), r.choices[0].finish_reason

        alone = [one(i) for i in range(len(prompts))]
        before = srv.metrics().get("ggflow:num_preemptions_total", 0)
        batched = [None] * len(prompts)

        def worker(i):
            try:
                batched[i] = one(i)
            except Exception as e:  # noqa: BLE001
                batched[i] = e

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        pre = srv.metrics().get("ggflow:num_preemptions_total", 0) - before
        c.check(pre > 0, "--kv-cache 40 blocks, 4 concurrent requests of 300 tokens: sequences are preempted",
                f"num_preemptions_total grew by {pre}")
        diff = [i for i in range(len(prompts)) if batched[i] != alone[i]]
        c.check(not diff and all(a[0] and len(a[0]) == 300 for a in alone),
                "preempted and recomputed: every request's token ids equal its alone result",
                "; ".join(f"#{i}: {str(batched[i])[:200]} vs {str(alone[i])[:200]}" for i in diff))
        check_idle_metrics(srv, "after the preemption check")


def check_auth_and_queue(ggflow, model, name):
    flags = ["-t", "2", "--parallel", "1", "--max-queue", "1", "--kv-cache", "64MiB", "--ctx-size", "1024",
             "--api-key", "secret", "--shutdown-timeout", "1"]
    with Server(ggflow, model, flags, name="server --api-key --parallel 1 --max-queue 1") as srv:
        wrong = OpenAI(base_url=srv.url + "/v1", api_key="wrong", max_retries=0, timeout=60)
        try:
            wrong.models.list()
            c.fail("--api-key: a wrong key gives openai.AuthenticationError", "no error")
        except openai.AuthenticationError as e:
            c.check(e.code == "invalid_api_key", "--api-key: a wrong key gives openai.AuthenticationError",
                    f"code {e.code!r}")
        except openai.APIError as e:
            c.fail("--api-key: a wrong key gives openai.AuthenticationError", f"{type(e).__name__}: {e}")
        right = OpenAI(base_url=srv.url + "/v1", api_key="secret", max_retries=0, timeout=60)
        ids = [m.id for m in right.models.list()]
        r = right.chat.completions.create(model=name, messages=msgs("hi"), max_tokens=4, temperature=0)
        c.check(name in ids and r.choices and r.usage.completion_tokens >= 1, "--api-key: the right key works",
                f"models {ids}")

        # Queue full: 1 running + 1 waiting; the rest get 429 with Retry-After.
        eos = eos_id(ggflow, model)
        k = 5
        outcomes = [None] * k
        done = threading.Event()
        barrier = threading.Barrier(k)

        def worker(i):
            stream = None
            try:
                barrier.wait(timeout=30)
                stream = right.chat.completions.create(
                    model=name, messages=msgs("Tell me a very long story about the sea."), max_tokens=400,
                    temperature=0, stream=True, logit_bias={str(eos): -100})
                outcomes[i] = "ok"
                done.wait(timeout=60)
            except openai.RateLimitError as e:
                outcomes[i] = ("429", e.response.headers.get("retry-after"), e.code)
            except Exception as e:  # noqa: BLE001
                outcomes[i] = ("error", f"{type(e).__name__}: {e}")
            finally:
                if stream is not None:
                    stream.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(k)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while any(o is None for o in outcomes) and time.monotonic() < deadline:
            time.sleep(0.05)
        done.set()
        for t in threads:
            t.join(timeout=60)
        limited = [o for o in outcomes if isinstance(o, tuple) and o[0] == "429"]
        served = [o for o in outcomes if o == "ok"]
        c.check(len(limited) >= 1 and len(served) >= 1 and len(limited) + len(served) == k,
                f"--parallel 1 --max-queue 1, {k} concurrent streams: openai.RateLimitError for the overflow",
                f"outcomes {outcomes}")
        c.check(limited and all(o[1] is not None and o[1].strip().isdigit() and o[2] == "queue_full" for o in limited),
                "429: a Retry-After header (seconds) and code queue_full", f"{limited}")
        # The streams were closed by the client: the server cancels them.
        check_idle_metrics(srv, "after the clients closed their streams")
        check_drain_cancels(srv, name, eos, {"Authorization": "Bearer secret"})


def check_drain_cancels(srv, name, eos, headers):
    """--shutdown-timeout 1, SIGTERM with a running stream and a waiting non-streamed request: both
    end with finish_reason cancelled (the stream with [DONE]), the process exits 0."""
    res = {}

    def go(key, stream):
        # Greedy, with the end-of-sequence token and the first ids (SmolLM2's <|endoftext|>, <|im_start|>:
        # other end-of-generation tokens) biased away, so that the stream is still running at SIGTERM.
        body = {"model": name, "messages": msgs("Tell me a very long story about a castle."), "max_tokens": 900,
                "temperature": 0, "stream": stream, "logit_bias": {str(t): -100 for t in sorted({0, 1, 2, eos})}}
        conn = srv.connection(timeout=60)
        try:
            conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                         headers=dict(headers, **{"Content-Type": "application/json"}))
            r = conn.getresponse()
            if stream:
                evs = list(sse_events(r))
                fins = [ch.get("finish_reason") for e in evs if e != "[DONE]" for ch in json.loads(e).get("choices", [])
                        if ch.get("finish_reason")]
                res[key] = (r.status, fins, evs[-1] if evs else None)
            else:
                j = json.loads(r.read())
                res[key] = (r.status, [ch.get("finish_reason") for ch in j.get("choices", [])], j.get("usage"))
        except Exception as e:  # noqa: BLE001
            res[key] = f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    ta = threading.Thread(target=go, args=("running stream", True))
    ta.start()
    running = waiting = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and running != 1:
        running = srv.metrics().get("ggflow:num_requests_running")
        time.sleep(0.05)
    tb = threading.Thread(target=go, args=("waiting request", False))
    tb.start()
    while time.monotonic() < deadline and waiting != 1:
        waiting = srv.metrics().get("ggflow:num_requests_waiting")
        time.sleep(0.05)
    if not c.check(running == 1 and waiting == 1, "drain: one stream runs and one request waits before SIGTERM",
                   f"running {running}, waiting {waiting}, finished already: {res}"):
        srv.stop()
        return
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    ta.join(timeout=60)
    tb.join(timeout=60)
    a, b = res.get("running stream"), res.get("waiting request")
    c.check(isinstance(a, tuple) and a[0] == 200 and a[1] == ["cancelled"] and a[2] == "[DONE]",
            "drain past --shutdown-timeout: the running stream ends with finish_reason cancelled and [DONE]", str(a))
    c.check(isinstance(b, tuple) and b[0] == 200 and b[1] == ["cancelled"],
            "drain past --shutdown-timeout: the waiting non-streamed request answers finish_reason cancelled", str(b))
    rc = srv.wait(timeout=30)
    c.check(rc == 0, f"drain: the process exits 0 ({time.monotonic() - t0:.1f} s after SIGTERM)", f"exit {rc}")


def check_sigterm(srv, ggflow, model, name):
    """SIGTERM during a long stream: 503 for new requests, a final chunk and [DONE], exit 0."""
    body = {"model": name, "messages": msgs("Tell me a very long story about dragons and knights."),
            "stream": True, "temperature": 0.7, "seed": 1, "logit_bias": {str(eos_id(ggflow, model)): -100}}
    conn = srv.connection(timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if not c.check(resp.status == 200, "long stream for the SIGTERM check starts", f"status {resp.status}"):
        return
    events = sse_events(resp)
    state = {"chunks": [], "done": False, "after_done": [], "error": None}
    n_content = 0
    for ev in events:
        if ev == "[DONE]":
            state["done"] = True
            break
        k = json.loads(ev)
        state["chunks"].append(k)
        if any(ch.get("delta", {}).get("content") for ch in k.get("choices", [])):
            n_content += 1
        if n_content >= 3:
            break

    def reader():
        try:
            for ev in events:
                if state["done"]:
                    state["after_done"].append(ev)
                elif ev == "[DONE]":
                    state["done"] = True
                else:
                    state["chunks"].append(json.loads(ev))
        except Exception as e:  # noqa: BLE001
            state["error"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=reader)
    t.start()
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    time.sleep(0.2)
    try:
        ready = srv.request("GET", "/ready", timeout=10)
        new = srv.request("POST", "/v1/chat/completions", {"messages": msgs("hi"), "max_tokens": 4}, timeout=10)
        err = new.json().get("error", {}) if new.body.startswith(b"{") else {}
        c.check(ready.status == 503 and new.status == 503 and err.get("code") == "shutting_down",
                "while draining after SIGTERM: /ready 503, a new request 503 shutting_down",
                f"/ready {ready.status}, new request {new}")
    except OSError as e:
        c.fail("while draining after SIGTERM: /ready 503, a new request 503 shutting_down", f"{type(e).__name__}: {e}")
    t.join(timeout=60)
    conn.close()
    finals = [ch.get("finish_reason") for k in state["chunks"] for ch in k.get("choices", []) if ch.get("finish_reason")]
    c.check(state["done"] and not state["after_done"] and len(finals) == 1 and state["error"] is None
            and finals[0] in ("cancelled", "length", "stop"),
            f"SIGTERM during a long stream: a final chunk (finish_reason {finals[0] if finals else None!r}) then [DONE]",
            f"done={state['done']} finals={finals} error={state['error']} after [DONE]: {state['after_done'][:2]}")
    rc = srv.wait(timeout=30)
    c.check(rc == 0, f"SIGTERM: the process exits 0 ({time.monotonic() - t0:.1f} s)", f"exit {rc}")


def main():
    ggflow, model, name = setup(__doc__)
    t_start = time.monotonic()

    flags = TEST_FLAGS + ["--shutdown-timeout", "2"]
    with Server(ggflow, model, flags, name="server") as srv:
        client = OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        run_check("models", check_models, client, name)
        run_check("chat", check_chat, client, name)
        run_check("completions", check_completions, client, name, srv)
        run_check("n=2", check_n, client, name)
        run_check("best_of", check_best_of, client, name)
        run_check("chat logprobs", check_chat_logprobs, client, name)
        run_check("stop", check_stop, client, name)
        run_check("seed", check_seed, client, name)
        run_check("utf-8", check_utf8, client, name, srv)
        run_check("errors", check_errors, client, name)
        run_check("greedy vs ggflow run", check_greedy_vs_run, client, name, ggflow, model)
        run_check("more chat", check_more_chat, client, name, srv)
        run_check("completions streamed", check_completions_stream, client, name)
        run_check("echo + logprobs", check_echo_logprobs, client, name, srv)
        run_check("metrics names", check_metrics_names, srv)
        run_check("llama-server routes", check_llama_routes, client, name, srv)
        run_check("idle metrics", check_idle_metrics, srv, "after all requests")
        run_check("SIGTERM", check_sigterm, srv, ggflow, model, name)
    run_check("api key and queue", check_auth_and_queue, ggflow, model, name)
    run_check("preemption", check_preemption, ggflow, model, name)
    print(f"check_openai: {time.monotonic() - t_start:.0f} s")
    return c.finish(f"openai checks: {c.passed} passed, {len(c.failures)} failed")


if __name__ == "__main__":
    sys.exit(main())
