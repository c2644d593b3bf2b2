#!/usr/bin/env python3
"""Speculative decoding: ggflow's plain decode, its prompt lookup and draft-model speculation, and
llama.cpp's speculative example (llama-speculative) with the same target and draft, on a prompt set.

    bench/speculative.py [--ggflow build/ggflow] [--llama-speculative PATH] [-t 2] [-n 128] [--rounds 3]
                         [--prompts bench/spec_prompts.json] [--lookup 3] [--draft-vocab 16384] [--draft-quant q4_0]
                         TARGET.gguf DRAFT.gguf

Single stream, greedy, 2 threads by default; every figure is decode tokens/s summed over the
prompts (the tokens after the first / their time; prompt processing is not counted), the median
over --rounds rounds in which the tools alternate: ggflow (plain and lookup, one pipeline,
alternating prompt by prompt), ggflow (plain and draft), llama.cpp (each prompt). ggflow's bench
checks that every speculative answer equals the plain one. llama-speculative gets the prompt
rendered by the target's chat template (`ggflow template`), the same draft file, -n tokens,
greedy sampling, its default draft settings (--llama-draft-max 3 tokens per step: its best of 3, 8
and 16 on these files) and the same thread count for both models. ggflow's draft has its LM head
cut to the first --draft-vocab rows (prompt lookup gives the ids beyond; answers stay the target's)
and its matrices requantized at load to --draft-quant (q4_0; "none" keeps the file's types);
llama-speculative then drafts with the same weights: the draft requantized by llama-quantize to
Q4_0 (bit for bit what ggflow's --draft-quant makes: python/check_dequant.py --to q4_0), its LM head
whole (it has no cut).
The table also gives the acceptance rates,
the tokens per target pass, and the roofline of plain decode: read bandwidth (build/bench/
matmul_kernels bandwidth) / the target's file size, the tokens/s a one-token step cannot pass.
Never run it beside a build or a test suite on the same cores.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from compare_llamacpp import host_lines, spread  # noqa: E402


def llama_speculative_path(given):
    if given:
        return given
    out = subprocess.run([str(ROOT / "bench" / "install_llamacpp.sh")], check=True, capture_output=True, text=True)
    return str(Path(out.stdout.strip().splitlines()[-1]) / "llama-speculative")


def ggflow_bench(a, flags):
    cmd = [a.ggflow, "bench", "-m", a.target, "--prompts", a.prompts, "-n", str(a.n), "-t", str(a.threads), "-r", "1",
           "--json", *flags]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {r["mode"]: r for r in json.loads(out)}


def llama_draft(a, bin_, tmp):
    """The draft file llama-speculative gets: ggflow's draft weights (--draft-quant) as a file."""
    if a.draft_quant == "none":
        return a.draft
    out = str(Path(tmp) / "draft-q4_0.gguf")
    subprocess.run([str(Path(bin_).parent / "llama-quantize"), "--allow-requantize", a.draft, out, "q4_0"],
                   check=True, capture_output=True)
    return out


def llama_speculative(a, bin_, prompts, draft):
    tokens = seconds = drafted = accepted = 0
    for p in prompts:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump([{"role": "user", "content": p["content"]}], f)
            f.flush()
            text = subprocess.run([a.ggflow, "template", "-m", a.target, "--messages", f.name, "--add-generation-prompt"],
                                  check=True, capture_output=True, text=True).stdout
        cmd = [bin_, "-m", a.target, "-md", draft, "-p", text, "-n", str(a.n), "-t", str(a.threads), "-td",
               str(a.threads), "--temp", "0", "--top-k", "1", "-c", "4096", "--seed", "1", "--spec-draft-n-max", str(a.llama_draft_max)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        log = p.stdout + p.stderr
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", log)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"llama-speculative failed ({p.returncode}):\n{log[-2000:]}")
        tokens += int(m.group(1))
        seconds += float(m.group(2))
        d = re.search(r"n_drafted\s*=\s*(\d+)", log)
        acc = re.search(r"n_accept\s*=\s*(\d+)", log)
        drafted += int(d.group(1)) if d else 0
        accepted += int(acc.group(1)) if acc else 0
    return tokens / seconds, drafted, accepted


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--llama-speculative")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lookup", type=int, default=3)
    ap.add_argument("--draft-max", type=int, default=8, help="ggflow: draft tokens per step at most (its default)")
    ap.add_argument("--draft-vocab", type=int, default=16384,
                    help="ggflow: the draft's LM head cut to its first N rows (0: all)")
    ap.add_argument("--draft-quant", default="q4_0", choices=["q4_0", "none"],
                    help="ggflow: the draft's matrices requantized at load (llama.cpp gets the same weights as a file)")
    ap.add_argument("--llama-draft-max", type=int, default=3,
                    help="llama-speculative --spec-draft-n-max (its default, 3, was its best of 3, 8, 16 here)")
    ap.add_argument("--prompts", default=str(ROOT / "bench" / "spec_prompts.json"))
    ap.add_argument("--no-llama", action="store_true", help="ggflow only")
    ap.add_argument("target")
    ap.add_argument("draft")
    a = ap.parse_args()
    prompts = json.load(open(a.prompts))
    bin_ = None if a.no_llama else llama_speculative_path(a.llama_speculative)
    rows = {k: [] for k in ("plain (lookup run)", "lookup", "plain (draft run)", "draft", "llama.cpp speculative")}
    stats = {"lookup": [0, 0, []], "draft": [0, 0, []], "llama.cpp speculative": [0, 0, []]}
    tmp = tempfile.TemporaryDirectory()
    llama_draft_file = llama_draft(a, bin_, tmp.name) if bin_ else None
    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}", file=sys.stderr)
        lk = ggflow_bench(a, ["--lookup", str(a.lookup)])
        rows["plain (lookup run)"].append(lk["plain"]["avg_ts"])
        rows["lookup"].append(lk["lookup"]["avg_ts"])
        quant = [] if a.draft_quant == "none" else ["--draft-quant", a.draft_quant]
        dr = ggflow_bench(a, ["--draft-model", a.draft, "--spec-tokens", str(a.draft_max), "--draft-vocab", str(a.draft_vocab),
                              *quant])
        rows["plain (draft run)"].append(dr["plain"]["avg_ts"])
        rows["draft"].append(dr["draft"]["avg_ts"])
        for mode, rec in (("lookup", lk["lookup"]), ("draft", dr["draft"])):
            stats[mode][0] += rec["draft_tokens"]
            stats[mode][1] += rec["accepted_tokens"]
            stats[mode][2].append(rec["tokens_per_step"])
        if bin_:
            ts, drafted, accepted = llama_speculative(a, bin_, prompts, llama_draft_file)
            rows["llama.cpp speculative"].append(ts)
            stats["llama.cpp speculative"][0] += drafted
            stats["llama.cpp speculative"][1] += accepted
    host = host_lines(a.ggflow)
    print("\n".join(host))
    bw = None
    for line in host:
        m = re.search(r"([\d.]+) GB/s", line)
        if m and "2 thread" in line:
            bw = float(m.group(1))
    size = Path(a.target).stat().st_size
    print(f"\ntarget {Path(a.target).name}, draft {Path(a.draft).name}, {len(prompts)} prompts x {a.n} tokens, "
          f"{a.threads} threads, {a.rounds} rounds (median, spread = (max - min) / median)\n")
    print("| mode | decode t/s | spread | accepted | tokens / target pass |\n|---|---:|---:|---:|---:|")
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    for k, v in rows.items():
        if not v:
            continue
        s = stats.get(k)
        acc = f"{100 * s[1] / s[0]:.0f}%" if s and s[0] else "–"
        tps = f"{statistics.median(s[2]):.2f}" if s and s[2] else ("1.00" if k.startswith("plain") else "–")
        print(f"| {k} | {med[k]:.2f} | {spread(v)} | {acc} | {tps} |")
    print()
    print(f"lookup / plain: {med['lookup'] / med['plain (lookup run)']:.2f}x; "
          f"draft / plain: {med['draft'] / med['plain (draft run)']:.2f}x")
    if "llama.cpp speculative" in med:
        print(f"ggflow draft / llama.cpp speculative: {med['draft'] / med['llama.cpp speculative']:.2f}x")
    if bw:
        roof = bw * 1e9 / size
        print(f"plain decode roofline: {bw:.1f} GB/s / {size / 1e9:.2f} GB = {roof:.1f} t/s; "
              f"lookup {med['lookup'] / roof:.2f}x and draft {med['draft'] / roof:.2f}x of it")


if __name__ == "__main__":
    main()
