#!/usr/bin/env python3
"""Scale-out benchmark: a multi-turn chat workload over replicas behind vllm-router (python/cluster.py).

    bench/cluster.py [--model M] [--rounds 2] [--conversations 16] [--turns 4] [--clients 8]
                     [--max-tokens 32] [--context-words 0] [--json OUT.json]
    make bench-cluster

The workload: --conversations chats, each opened by one of four long system prompts (shared by a
quarter of the chats each) and going on for --turns user turns; every turn sends the whole
history so far (system, earlier user turns, the answers the server gave) and streams a greedy
answer of exactly --max-tokens tokens (`ignore_eos`). With --context-words N, each chat's first
user turn also pastes N words of notes of its own (a document, code): the history then holds
more that only the replica that saw it has cached. --clients threads take chats from a queue
and run each chat's turns one after the other, so the replicas always hold several chats at once.

Configurations, each on freshly started processes (empty prefix caches), alternating round by round:
  cache_aware  2 replicas x 1 thread, vllm-router --policy cache_aware
  round_robin  2 replicas x 1 thread, vllm-router --policy round_robin
  one_replica  1 replica  x 2 threads, behind the same router (so both pay the same hop)
Every configuration has 512 MiB of KV cache in all (--kv-cache split between its replicas).

Per configuration: prefix-cache hit ratio (prompt tokens found in the replicas' prefix caches /
prompt tokens, from their vllm:prefix_cache_* counters), TTFT p50/p99 (request sent -> first
content chunk, through the router), aggregate generated tokens/s (completion tokens / wall
time), requests failed. Medians over the rounds. A benchmark, not a test: nothing is asserted.
Never run it beside a build, a test suite or another benchmark on the same cores.
"""
import argparse
import json
import queue
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from cluster import Cluster, http_get  # noqa: E402

TOPICS = ["a bakery", "a railway company", "a public library", "a bicycle repair shop"]
USER_TURNS = ["What should a new customer know first?", "Give me two more details about that.",
              "How would you say it more briefly?", "What is one common mistake people make?",
              "Summarise our conversation in one sentence.", "What would you ask me next?"]


def system_prompt(i):
    topic = TOPICS[i % len(TOPICS)]
    rules = " ".join(f"Rule {k}: when asked about {topic}, stay polite, answer with facts about {topic}, "
                     f"and keep every answer short and clear." for k in range(1, 13))
    return f"You are the help desk assistant of {topic}. {rules}"


WORDS = ("order delivery invoice ticket refund schedule window counter branch supplier recipe member "
         "shelf route platform station catalogue return repair wheel chain brake tyre account note").split()


def document(c, words):
    """What a user pastes into chat `c`'s first turn: `words` words (about as many tokens) of its own."""
    if words <= 0:
        return ""
    rng = [(c * 7919 + k * 104729) % len(WORDS) for k in range(words)]
    lines = [" ".join(WORDS[i] for i in rng[k:k + 12]) for k in range(0, words, 12)]
    return f"Here are my notes (chat {c}):\n" + "\n".join(f"{n + 1}. {l}" for n, l in enumerate(lines)) + "\n\n"


def counters(replicas):
    out = []
    for r in replicas:
        text = http_get(r.url + "/metrics")[1].decode()
        vals = {}
        for line in text.splitlines():
            for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
                if line.startswith(name + "{"):
                    vals[name] = float(line.rsplit(" ", 1)[1])
        out.append(vals)
    return out


def run_workload(client, model, args):
    chats = queue.Queue()
    for c in range(args.conversations):
        chats.put(c)
    ttft, tokens, failed, lock = [], [0], [0], threading.Lock()

    def worker():
        while True:
            try:
                c = chats.get_nowait()
            except queue.Empty:
                return
            msgs = [{"role": "system", "content": system_prompt(c)}]
            for t in range(args.turns):
                pasted = document(c, args.context_words) if t == 0 else ""
                msgs.append({"role": "user", "content": pasted + f"(chat {c}) " + USER_TURNS[(c + t) % len(USER_TURNS)]})
                t0 = time.perf_counter()
                first, text, used = None, [], 0
                try:
                    s = client.chat.completions.create(
                        model=model, messages=msgs, max_tokens=args.max_tokens, temperature=0, stream=True,
                        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
                    for ch in s:
                        if ch.choices and ch.choices[0].delta.content:
                            first = first or time.perf_counter()
                            text.append(ch.choices[0].delta.content)
                        if ch.usage:
                            used = ch.usage.completion_tokens
                except Exception as e:  # noqa: BLE001
                    print(f"  request failed: {e}", file=sys.stderr)
                    with lock:
                        failed[0] += 1
                    break
                with lock:
                    tokens[0] += used
                    if first:
                        ttft.append(first - t0)
                msgs.append({"role": "assistant", "content": "".join(text)})

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    return ttft, tokens[0], failed[0], wall


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


CONFIGS = {"cache_aware": (2, 1, "cache_aware"), "round_robin": (2, 1, "round_robin"), "one_replica": (1, 2, "round_robin")}


def measure(name, args, openai, log_dir):
    replicas, threads, policy = CONFIGS[name]
    # The same KV memory in all: 512 MiB split between the replicas.
    flags = ["--parallel", "8", "--kv-cache", f"{512 // replicas}MiB", "--ctx-size", "2048"]
    router = args.router_flags.split() if policy == "cache_aware" else []
    with Cluster(args.ggflow, args.model, replicas=replicas, threads=threads, policy=policy, replica_flags=flags,
                 router_flags=router, log_dir=log_dir / name) as c:
        client = openai.OpenAI(base_url=c.url + "/v1", api_key="none", max_retries=0, timeout=600)
        model = client.models.list().data[0].id
        before = counters(c.replicas)
        ttft, tokens, failed, wall = run_workload(client, model, args)
        after = counters(c.replicas)
    q = sum(a.get("vllm:prefix_cache_queries_total", 0) - b.get("vllm:prefix_cache_queries_total", 0)
            for a, b in zip(after, before))
    h = sum(a.get("vllm:prefix_cache_hits_total", 0) - b.get("vllm:prefix_cache_hits_total", 0)
            for a, b in zip(after, before))
    per_replica = [a.get("vllm:prefix_cache_queries_total", 0) - b.get("vllm:prefix_cache_queries_total", 0)
                   for a, b in zip(after, before)]
    return {"config": name, "hit_ratio": h / q if q else 0.0, "ttft_p50": percentile(ttft, 0.5),
            "ttft_p99": percentile(ttft, 0.99), "tokens_per_s": tokens / wall, "tokens": tokens, "wall_s": wall,
            "requests": len(ttft), "failed": failed, "prompt_tokens_per_replica": per_replica}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf"))
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=16)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--context-words", type=int, default=0, help="words each chat's first turn pastes (its own)")
    ap.add_argument("--router-flags", default="", help="extra vllm-router flags for cache_aware")
    ap.add_argument("--configs", default="cache_aware,round_robin,one_replica")
    ap.add_argument("--log-dir", default="/tmp/ggflow-bench-cluster")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    import openai
    log_dir = Path(args.log_dir)
    names = args.configs.split(",")
    runs = {n: [] for n in names}
    for rnd in range(args.rounds):
        for n in (names if rnd % 2 == 0 else names[::-1]):
            r = measure(n, args, openai, log_dir / f"round{rnd}")
            runs[n].append(r)
            print(f"round {rnd} {n}: hit ratio {r['hit_ratio']:.3f}, TTFT p50 {r['ttft_p50'] * 1000:.0f} ms "
                  f"p99 {r['ttft_p99'] * 1000:.0f} ms, {r['tokens_per_s']:.1f} tok/s, {r['requests']} requests, "
                  f"{r['failed']} failed, prompt tokens per replica {r['prompt_tokens_per_replica']}", flush=True)
    med = {n: {k: statistics.median(x[k] for x in runs[n])
               for k in ("hit_ratio", "ttft_p50", "ttft_p99", "tokens_per_s")} | {"failed": sum(x["failed"] for x in runs[n])}
           for n in names}
    print(f"\n{args.conversations} chats x {args.turns} turns, {args.context_words} words pasted per chat, "
          f"{args.clients} clients, {args.max_tokens} tokens per answer, {Path(args.model).name}, "
          f"median of {args.rounds} rounds\n")
    print("| configuration | prefix-cache hit ratio | TTFT p50 | TTFT p99 | generated tok/s | failed |")
    print("|---|---:|---:|---:|---:|---:|")
    labels = {"cache_aware": "2 replicas x 1 thread, cache_aware", "round_robin": "2 replicas x 1 thread, round_robin",
              "one_replica": "1 replica x 2 threads"}
    for n in names:
        m = med[n]
        print(f"| {labels[n]} | {m['hit_ratio']:.3f} | {m['ttft_p50'] * 1000:.0f} ms | {m['ttft_p99'] * 1000:.0f} ms "
              f"| {m['tokens_per_s']:.1f} | {m['failed']} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs, "median": med}, indent=1))


if __name__ == "__main__":
    main()
