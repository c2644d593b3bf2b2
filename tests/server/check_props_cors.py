#!/usr/bin/env python3
"""llama-server's /props and /slots, and CORS (--cors-origin), on a real `ggflow serve`.

    check_props_cors.py --ggflow build/ggflow --model models/smollm2-135m-instruct-q4_1.gguf --out-dir DIR

1. `--cors-origin https://app.example --api-key k`:
   - /props: the slots (--parallel), the context (--ctx-size), the model path and name, and the
     chat template, equal to the file's tokenizer.chat_template read with the gguf package;
   - /slots: --parallel idle slots; while an answer streams (the official openai client), one
     slot is processing with the request's prompt length and a growing n_decoded; idle again after;
   - both need the API key (401 without), like the model routes;
   - a preflight (OPTIONS with Access-Control-Request-Method) from the allowed origin: 204 with the
     methods and the requested headers, without the key; from another origin: 403 naming the flag;
   - a request with the allowed Origin gets Access-Control-Allow-Origin: that origin and Vary:
     Origin; another origin gets none.
2. `--cors-origin '*'`: Access-Control-Allow-Origin: * for any origin.
3. No --cors-origin: no CORS header, OPTIONS stays 405.

Exit 0: all passed; 1: a check failed; 77: the model or a package is missing.
"""
import sys
import threading
import time

from server_util import TEST_FLAGS, Checker, Server, loopback_only, require_packages, setup

ORIGIN, OTHER = "https://app.example", "https://evil.example"
KEY = {"Authorization": "Bearer k"}


def check_props(c, srv, model, name):
    (gguf,) = require_packages("gguf")
    r = srv.request("GET", "/props", timeout=10)
    c.check(r.status == 401, "/props without the key: 401", repr(r))
    r = srv.request("GET", "/props", headers=KEY, timeout=10)
    if not c.check(r.status == 200, "/props with the key: 200", repr(r)):
        return
    p = r.json()
    c.check(p.get("total_slots") == 8, "/props: total_slots = --parallel 8", str(p.get("total_slots")))
    c.check(p.get("default_generation_settings", {}).get("n_ctx") == 1024, "/props: n_ctx = --ctx-size 1024",
            str(p.get("default_generation_settings")))
    c.check(p.get("model_path") == model and p.get("model_alias") == name, "/props: model path and name",
            f"{p.get('model_path')} {p.get('model_alias')}")
    field = gguf.GGUFReader(model).fields.get("tokenizer.chat_template")
    want = field.contents() if field is not None else ""
    c.check(want != "" and p.get("chat_template") == want, "/props: chat_template is the file's tokenizer.chat_template",
            f"{len(p.get('chat_template', ''))} vs {len(want)} characters")


def check_slots(c, srv, name):
    (openai,) = require_packages("openai")
    r = srv.request("GET", "/slots", timeout=10)
    c.check(r.status == 401, "/slots without the key: 401", repr(r))
    r = srv.request("GET", "/slots", headers=KEY, timeout=10)
    slots = r.json() if r.status == 200 else []
    c.check(len(slots) == 8 and all(not s["is_processing"] and s["id_task"] == -1 for s in slots),
            "/slots: 8 idle slots before any request", repr(r))
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="k")
    done = {}

    def stream():
        chunks = client.completions.create(model=name, prompt="Write a long story about a lighthouse keeper.",
                                           max_tokens=160, temperature=0, stream=True, extra_body={"ignore_eos": True},
                                           stream_options={"include_usage": True})
        for ch in chunks:
            if ch.usage:
                done["usage"] = ch.usage

    t = threading.Thread(target=stream)
    t.start()
    seen = []
    deadline = time.monotonic() + 60
    while t.is_alive() and time.monotonic() < deadline:
        busy = [s for s in srv.request("GET", "/slots", headers=KEY, timeout=10).json() if s["is_processing"]]
        if busy:
            seen.append(busy)
        time.sleep(0.02)
    t.join()
    usage = done.get("usage")
    c.check(usage is not None and usage.completion_tokens == 160, "the streamed answer finished (160 tokens)", repr(usage))
    c.check(len(seen) > 0 and all(len(b) == 1 for b in seen), "/slots: one slot processing while the answer streams",
            f"{len(seen)} polls saw a busy slot")
    if seen and usage is not None:
        c.check(all(b[0]["n_prompt_tokens"] == usage.prompt_tokens and b[0]["state"] == "running" for b in seen),
                "/slots: the busy slot holds the request's prompt length", f"{seen[-1][0]} vs {usage.prompt_tokens}")
        decoded = [b[0]["n_decoded"] for b in seen]
        c.check(decoded == sorted(decoded) and decoded[-1] > decoded[0], "/slots: n_decoded grows while it streams",
                f"{decoded[:3]} .. {decoded[-3:]}")
    slots = srv.request("GET", "/slots", headers=KEY, timeout=10).json()
    c.check(all(not s["is_processing"] for s in slots), "/slots: idle again after the answer", str(slots[:2]))


def check_cors(c, srv):
    pre = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
    r = srv.request("OPTIONS", "/v1/chat/completions", headers=pre, timeout=10)
    c.check(r.status == 204 and r.header("access-control-allow-origin") == ORIGIN
            and "POST" in (r.header("access-control-allow-methods") or "")
            and r.header("access-control-allow-headers") == "authorization, content-type",
            "CORS: a preflight from the allowed origin is 204 with the methods and headers, without the key",
            f"{r.status} {r.headers}")
    r = srv.request("OPTIONS", "/v1/chat/completions", headers=dict(pre, Origin=OTHER), timeout=10)
    c.check(r.status == 403 and "--cors-origin" in r.body.decode() and r.header("access-control-allow-origin") is None,
            "CORS: a preflight from another origin is 403 naming --cors-origin", repr(r))
    r = srv.request("GET", "/v1/models", headers=dict(KEY, Origin=ORIGIN), timeout=10)
    c.check(r.status == 200 and r.header("access-control-allow-origin") == ORIGIN and r.header("vary") == "Origin",
            "CORS: a request from the allowed origin gets Access-Control-Allow-Origin and Vary", f"{r.status} {r.headers}")
    r = srv.request("GET", "/v1/models", headers=dict(KEY, Origin=OTHER), timeout=10)
    c.check(r.status == 200 and r.header("access-control-allow-origin") is None,
            "CORS: a request from another origin gets no Access-Control-Allow-Origin", str(r.headers))
    r = srv.request("GET", "/v1/models", headers=dict(Origin=ORIGIN), timeout=10)
    c.check(r.status == 401, "CORS: the allowed origin still needs the API key", repr(r))


def main():
    ggflow, model, name = setup(__doc__)
    loopback_only()
    c = Checker()
    with Server(ggflow, model, TEST_FLAGS + ["--cors-origin", ORIGIN, "--api-key", "k"], name="server --cors-origin") as srv:
        c.run("props", check_props, c, srv, model, name)
        c.run("slots", check_slots, c, srv, name)
        c.run("cors", check_cors, c, srv)
        c.check(srv.stop() == 0, "the server exits 0 on SIGTERM")
    with Server(ggflow, model, TEST_FLAGS + ["--cors-origin", "*"], name="server --cors-origin '*'") as srv:
        r = srv.request("GET", "/v1/models", headers={"Origin": OTHER}, timeout=10)
        c.check(r.header("access-control-allow-origin") == "*", "CORS '*': any origin gets Access-Control-Allow-Origin: *",
                str(r.headers))
    with Server(ggflow, model, TEST_FLAGS, name="server") as srv:
        r = srv.request("GET", "/v1/models", headers={"Origin": ORIGIN}, timeout=10)
        c.check(r.status == 200 and r.header("access-control-allow-origin") is None,
                "no --cors-origin: no Access-Control-Allow-Origin", str(r.headers))
        r = srv.request("OPTIONS", "/v1/chat/completions",
                        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}, timeout=10)
        c.check(r.status == 405, "no --cors-origin: a preflight is 405 as any OPTIONS", repr(r))
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
