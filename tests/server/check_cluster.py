"""Scale-out: two `ggflow serve` replicas behind vllm-router on loopback (python/cluster.py).

- the router finds what it reads from a backend: /v1/models, vLLM's metric names with the model
  label, /get_load, vLLM's /tokenize and the render endpoints (the prompt ids cache-aware
  routing uses are the ids generation runs);
- the official openai client through the router gets the same streamed greedy answers as from a
  replica directly, and cache-aware routing sends a repeated conversation to the replica that
  holds its prefix;
- (round-robin routing from here) SIGTERM on a replica while requests stream through the router: no request fails (its running
  ones finish, new ones go to the other replica), and it exits 0;
- SIGKILL on a replica mid-run: at most the requests it held fail, and every later request
  through the router succeeds on the other.

    .venv/bin/python tests/server/check_cluster.py [--ggflow build/ggflow] [--model M] [--out-dir D]
"""
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import server_util as su  # noqa: E402
from cluster import Cluster, http_get  # noqa: E402

PROMPTS = ["Name three colours.", "What is 2 + 2?", "Write a haiku about the sea.", "Say hello in French.",
           "List two planets.", "What is the capital of Italy?"]


def metric(text, name):
    """The value of the first sample of `name` (any labels) in Prometheus text, else None."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def stream_chat(client, model, prompt, max_tokens, out, key, long=False):
    """Streams one greedy chat answer into out[key]: its text, or the exception. long: exactly
    max_tokens tokens (ignore_eos), so the request is still running when a replica is stopped."""
    try:
        s = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                           max_tokens=max_tokens, temperature=0, stream=True,
                                           extra_body={"ignore_eos": True} if long else None)
        out[key] = "".join((ch.choices[0].delta.content or "") for ch in s if ch.choices)
    except Exception as e:  # noqa: BLE001
        out[key] = e


def in_parallel(jobs):
    threads = [threading.Thread(target=fn, args=args) for fn, args in jobs]
    for t in threads:
        t.start()
    return threads


def check_backend_protocol(ck, c, name):
    r = c.replicas[0]
    import json
    import urllib.request
    status, body = http_get(r.url + "/metrics")
    text = body.decode()
    for m in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
              "vllm:lora_requests_info", "vllm:cache_config_info"):
        ck.check(status == 200 and metric(text, m) is not None, f"replica /metrics has {m}")
    ck.check(f'vllm:num_requests_waiting{{model_name="{name}"}} 0' in text, "vLLM series carry the model_name label",
             [l for l in text.splitlines() if l.startswith("vllm:num_requests_waiting")])
    status, body = http_get(r.url + "/get_load")
    ck.check(status == 200 and json.loads(body).get("load") == 0, "GET /get_load: {'load': 0} when idle", body[:200])

    def post(path, payload):
        req = urllib.request.Request(r.url + path, data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())
    messages = [{"role": "user", "content": "Hello there"}]
    tok = post("/tokenize", {"model": name, "messages": messages})
    rendered = post("/v1/chat/completions/render", {"model": name, "messages": messages})
    ck.check(tok["tokens"] == rendered["token_ids"] and tok["count"] == len(tok["tokens"]) > 0,
             "vLLM /tokenize of messages = /v1/chat/completions/render's token_ids", (tok, rendered))
    answer = post("/v1/chat/completions", {"model": name, "messages": messages, "max_tokens": 1})
    ck.check(answer["usage"]["prompt_tokens"] == tok["count"], "those are the prompt ids generation runs",
             (answer["usage"], tok["count"]))
    comp = post("/tokenize", {"model": name, "prompt": "The sky is"})
    ck.check(comp["tokens"] == post("/v1/completions/render", {"model": name, "prompt": "The sky is"})[0]["token_ids"],
             "vLLM /tokenize of a prompt = /v1/completions/render's token_ids")
    detok = post("/detokenize", {"model": name, "tokens": comp["tokens"]})
    ck.check(detok.get("prompt", "").endswith("The sky is"), "vLLM /detokenize answers 'prompt'", detok)


def check_streamed_answers(ck, c, openai, name):
    direct = openai.OpenAI(base_url=c.replicas[1].url + "/v1", api_key="none", max_retries=0)
    routed = openai.OpenAI(base_url=c.url + "/v1", api_key="none", max_retries=0)
    ck.check([m.id for m in routed.models.list().data] == [name], "GET /v1/models through the router")
    want, got = {}, {}
    for i, p in enumerate(PROMPTS):
        stream_chat(direct, name, p, 24, want, i)
    for t in in_parallel([(stream_chat, (routed, name, p, 24, got, i)) for i, p in enumerate(PROMPTS)]):
        t.join()
    ck.check(all(isinstance(want[i], str) and want[i] for i in want), "direct answers", want)
    ck.check(got == want, "6 concurrent streamed greedy answers through the router = the replica's own", (got, want))
    # Cache-aware: the same long conversation again lands where its prefix is cached.
    system = "You are a careful assistant. " * 20
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "One word for happy?"}]
    before = [metric(http_get(r.url + "/metrics")[1].decode(), "vllm:prefix_cache_hits_total") for r in c.replicas]
    for _ in range(3):
        routed.chat.completions.create(model=name, messages=msgs, max_tokens=2, temperature=0)
    after = [metric(http_get(r.url + "/metrics")[1].decode(), "vllm:prefix_cache_hits_total") for r in c.replicas]
    hits = [a - b for a, b in zip(after, before)]
    ck.check(max(hits) >= 2 * 100 and min(hits) == 0,
             "cache-aware routing: a repeated conversation goes to one replica and hits its prefix cache",
             f"prefix-cache hit tokens per replica: {hits}")


def fresh(tag, i):
    """A prompt no replica has cached (cache-aware routing then balances instead of following a prefix)."""
    return f"[{tag} {i} {time.monotonic_ns()}] {PROMPTS[i % len(PROMPTS)]}"


def check_sigterm_drain(ck, c, openai, name):
    routed = openai.OpenAI(base_url=c.url + "/v1", api_key="none", max_retries=0)
    out = {}
    running = in_parallel([(stream_chat, (routed, name, fresh("drain", i), 96, out, f"run{i}", True))
                           for i in range(4)])
    time.sleep(0.5)
    victim = c.replicas[0]
    status, body = http_get(victim.url + "/metrics")
    held = metric(body.decode(), "vllm:num_requests_running") or 0
    victim.signal(signal.SIGTERM)
    # New requests while it drains: the router must not lose any of them.
    later = in_parallel([(stream_chat, (routed, name, fresh("during drain", i), 16, out, f"new{i}"))
                         for i in range(6)])
    for t in running + later:
        t.join()
    failed = {k: v for k, v in out.items() if not isinstance(v, str)}
    ck.check(not failed, f"SIGTERM on a replica holding {held:.0f} running requests: all 10 requests through the "
                         "router succeed", failed)
    rc = victim.wait(60)
    ck.check(rc == 0, "the drained replica exits 0", f"exit {rc}\n{victim.log_tail()}")


def served_by(replica):
    return metric(http_get(replica.url + "/metrics")[1].decode(), "vllm:generation_tokens_total") or 0


def check_sigkill(ck, c, openai, name):
    c.restart(0)
    routed = openai.OpenAI(base_url=c.url + "/v1", api_key="none", max_retries=0)
    # The router's health check takes the restarted replica back: wait until it gets requests.
    deadline = time.monotonic() + 30
    while served_by(c.replicas[0]) == 0 and time.monotonic() < deadline:
        routed.chat.completions.create(model=name, messages=[{"role": "user", "content": fresh("probe", 0)}],
                                       max_tokens=1, temperature=0)
        time.sleep(0.2)
    ck.check(served_by(c.replicas[0]) > 0, "the restarted replica is back in the router's rotation")
    out = {}
    running = in_parallel([(stream_chat, (routed, name, fresh("kill", i), 160, out, f"run{i}", True))
                           for i in range(6)])
    time.sleep(0.8)
    victim = c.replicas[0]
    body = http_get(victim.url + "/metrics")[1].decode()
    held = (metric(body, "vllm:num_requests_running") or 0) + (metric(body, "vllm:num_requests_waiting") or 0)
    victim.signal(signal.SIGKILL)
    for t in running:
        t.join()
    lost = [k for k, v in out.items() if not isinstance(v, str)]
    ck.check(held > 0, "the killed replica held requests", held)
    ck.check(len(lost) <= held, f"SIGKILL mid-run: {len(lost)} requests lost, at most the {held:.0f} it held",
             {k: repr(out[k]) for k in lost})
    later = {}
    for t in in_parallel([(stream_chat, (routed, name, p, 16, later, i)) for i, p in enumerate(PROMPTS * 2)]):
        t.join()
    failed = {k: repr(v) for k, v in later.items() if not isinstance(v, str)}
    ck.check(not failed and len(later) == 12, "after the kill, 12 later requests through the router all succeed", failed)


def main():
    ggflow, model, name = su.setup(__doc__)
    su.loopback_only()
    (openai,) = su.require_packages("openai")
    try:
        import cluster  # noqa: F401
        cluster.router_binary()
    except RuntimeError as e:
        su.require_packages("vllm_router")  # skips (or fails under GGFLOW_REQUIRE_MODELS=1) with the reason
        raise e
    ck = su.Checker()
    out_dir = Path(sys.argv[sys.argv.index("--out-dir") + 1]) if "--out-dir" in sys.argv else None
    flags = ["--parallel", "8", "--kv-cache", "64MiB", "--ctx-size", "1024", "--shutdown-timeout", "30"]
    with Cluster(ggflow, model, replicas=2, threads=1, policy="cache_aware", replica_flags=flags,
                 log_dir=out_dir and out_dir / "cache_aware", served_name=name) as c:
        ck.run("backend protocol", check_backend_protocol, ck, c, name)
        ck.run("streamed answers", check_streamed_answers, ck, c, openai, name)
    # Failures on round-robin routing, which spreads the requests over both replicas whatever
    # they have cached (cache-aware would follow the prefixes: the victim might hold nothing).
    with Cluster(ggflow, model, replicas=2, threads=1, policy="round_robin", replica_flags=flags,
                 log_dir=out_dir and out_dir / "round_robin", served_name=name) as c:
        ck.run("SIGTERM drain", check_sigterm_drain, ck, c, openai, name)
        ck.run("SIGKILL", check_sigkill, ck, c, openai, name)
    sys.exit(ck.finish(f"{ck.passed} passed, {len(ck.failures)} failed"))


if __name__ == "__main__":
    main()
