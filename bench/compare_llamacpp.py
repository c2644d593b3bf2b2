#!/usr/bin/env python3
"""ggflow bench against llama.cpp's llama-bench: same .gguf file, same thread count, one run.

    bench/compare_llamacpp.py [--ggflow build/ggflow] [--llama-bench PATH] [-t 2] [-p 512] [-n 128]
                              [-r 3] [--rounds 2] [--batch 8] [-d 4096] [--kv-type f16] [--isa avx2]
                              MODEL.gguf [...]

llama-bench comes from bench/install_llamacpp.sh (llama.cpp's own tools, built outside the
repository from the source llama-cpp-python vendors); without --llama-bench the script runs it.
For each model the two tools alternate (llama.cpp, ggflow, llama.cpp, ggflow, ... --rounds
times), each running its prompt-processing test (pp<P>) and its generation test (tg<N>) with -r
repetitions; a tool's figure is the median over the rounds of its average tokens/s. With --batch
B, ggflow's paged engine also decodes 1 and B sequences together (aggregate tokens/s, "tg<N> x1",
"tg<N> xB", each sequence from a one-token prompt), and llama.cpp's llama-batched-bench does the
same (-npp 1 -ntg N -npl 1,B: its S_TG, the aggregate generation speed; found beside llama-bench);
the row "tg<N> xB / x1" is each tool's batch scaling, the median over the rounds of the round's
xB / x1 (ggflow's bench alternates its batch sizes repetition by repetition).
With -d D both tools run pp and tg after D tokens of context ("pp<P> @ d<D>", llama-bench's -d).
--kv-type f16 gives ggflow llama.cpp's default KV cache type (llama-bench's cache is f16; ggflow's
default is f32); --kv-type q8_0 gives both tools a q8_0 cache (llama-bench -ctk q8_0 -ctv q8_0 -fa 1).
--isa avx2 measures both tools' AVX2 paths on an AVX-512 host, standing in for an AVX2-only host:
ggflow under GGFLOW_ISA=avx2 (no AVX-512, no VNNI, no AMX) and llama-bench built for AVX2 without
AVX-512 or AVX-VNNI (LLAMA_ISA=avx2 bench/install_llamacpp.sh).
Prints the host first (CPU model, SIMD flags, transparent huge pages, the vCPUs' core topology as
the guest sees it, read bandwidth measured by build/bench/matmul_kernels when it is built), then a Markdown table: llama.cpp t/s, ggflow t/s, the
ratio ggflow / llama.cpp (> 1: ggflow is faster) and each tool's spread over the rounds ((max - min)
/ median of its per-round figures: variance is a figure too), and last the CPU steal time while
each tool ran (/proc/stat: on a VM, a noisy neighbour slows whichever tool it hits). `make bench` runs it on the default
files. Never run it beside a build or a test suite on the same cores.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def llama_bench_path(given, isa):
    if given:
        return given
    env = dict(os.environ, LLAMA_ISA=isa or "native")
    out = subprocess.run([str(ROOT / "bench" / "install_llamacpp.sh")], check=True, capture_output=True, text=True,
                         env=env)
    return str(Path(out.stdout.strip().splitlines()[-1]) / "llama-bench")


def run_llama(bin_, model, a):
    cmd = [bin_, "-m", model, "-t", str(a.threads), "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "-o", "json"]
    if a.depth:
        cmd += ["-d", str(a.depth)]
    if a.kv_type == "q8_0":  # the same cache type (llama.cpp's quantized V cache needs flash attention)
        cmd += ["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "1"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = {}
    for rec in json.loads(out):
        test = f"pp{rec['n_prompt']}" if rec["n_prompt"] else f"tg{rec['n_gen']}"
        if rec.get("n_depth", 0):
            test += f" @ d{rec['n_depth']}"
        res[test] = rec["avg_ts"]
    return res


def run_llama_batched(bin_, model, a):
    """llama-batched-bench's aggregate generation speed for 1 and B sequences (one-token prompts)."""
    cmd = [bin_, "-m", model, "-t", str(a.threads), "-c", str(a.batch * (a.n + 2) + 64), "-b", "2048", "-ub", "512",
           "-npp", "1", "-ntg", str(a.n), "-npl", f"1,{a.batch}", "--output-format", "jsonl"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{") and '"speed_tg"' in line:
            rec = json.loads(line)
            res[f"tg{a.n} x{rec['pl']}"] = rec["speed_tg"]
    return res


def run_ggflow(bin_, model, a):
    cmd = [bin_, "bench", "-m", model, "-t", str(a.threads), "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "--json"]
    if a.batch:
        cmd += ["--batch", f"1,{a.batch}"]
    if a.depth:
        cmd += ["-d", str(a.depth)]
    if a.kv_type:
        cmd += ["--kv-type", a.kv_type]
    env = dict(os.environ, GGFLOW_ISA=a.isa) if a.isa else None
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return {rec["test"]: rec["avg_ts"] for rec in json.loads(out)}


def host_lines(ggflow_bin):
    """The host beside every table: CPU, the SIMD flags that matter here, THP, bandwidth."""
    info = {}
    for line in open("/proc/cpuinfo"):
        k, _, v = line.partition(":")
        info.setdefault(k.strip(), v.strip())
    flags = info.get("flags", "").split()
    simd = [f for f in flags if f in ("avx2", "fma", "f16c") or f.startswith(("avx512", "amx", "avx_vnni"))]
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        thp = "?"
    lines = [f"CPU: {info.get('model name', '?')}; {os.cpu_count()} cores",
             f"SIMD: {' '.join(simd) or 'none'}", f"THP: {thp}", topology_line()]
    kernels = Path(ggflow_bin).resolve().parent / "bench" / "matmul_kernels"
    if kernels.exists():
        out = subprocess.run([str(kernels), "bandwidth"], capture_output=True, text=True).stdout
        lines += [l.strip() for l in out.splitlines() if l.startswith("read bandwidth")]
    return lines


def topology_line():
    """Which vCPUs the guest sees as one core (thread siblings): two threads on one core share it."""
    cores = []
    for cpu in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*"), key=lambda p: int(p.name[3:])):
        try:
            sib = (cpu / "topology" / "thread_siblings_list").read_text().strip()
            core = (cpu / "topology" / "core_id").read_text().strip()
        except OSError:
            continue
        cores.append(f"{cpu.name}: core {core}, siblings {sib}")
    return "topology: " + ("; ".join(cores) or "?")


def cpu_times():
    """(steal, total) jiffies of all CPUs so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[7] if len(v) > 7 else 0), sum(v[:8])


class Steal:
    """The share of CPU time the hypervisor gave to others while a tool ran (a noisy neighbour)."""

    def __init__(self):
        self.steal = self.total = 0

    def run(self, fn, *args):
        s0, t0 = cpu_times()
        try:
            return fn(*args)
        finally:
            s1, t1 = cpu_times()
            self.steal += s1 - s0
            self.total += t1 - t0

    def __str__(self):
        return f"{100 * self.steal / self.total:.1f}%" if self.total else "?"


def spread(values):
    """(max - min) / median, in percent: how far the rounds of one tool lie apart."""
    values = [v for v in values if v]
    if len(values) < 2:
        return "–"
    return f"{100 * (max(values) - min(values)) / statistics.median(values):.0f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--llama-bench")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("-d", "--depth", type=int, default=0, help="context tokens before each test (llama-bench -d)")
    ap.add_argument("--kv-type", help="ggflow's KV cache type (f32 default, f16: llama.cpp's default; q8_0: both tools)")
    ap.add_argument("--isa", choices=["avx2"], help="both tools on their AVX2 paths (see above)")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    lb = llama_bench_path(a.llama_bench, a.isa)
    for line in host_lines(a.ggflow):
        print(line)
    isa = "; both tools on AVX2 only (GGFLOW_ISA=avx2, llama.cpp built without AVX-512)" if a.isa else ""
    print(f"{a.threads} threads; {a.rounds} rounds, alternating; llama-bench: {lb}{isa}\n")
    print("| model | test | llama.cpp t/s | ggflow t/s | ggflow / llama.cpp | llama.cpp spread | ggflow spread |")
    print("|---|---|---:|---:|---:|---:|---:|")
    steal_notes = []
    for m in a.models:
        runs = {"llama": [], "ggflow": []}
        steal = {"llama": Steal(), "ggflow": Steal()}
        for k in range(a.rounds):
            print(f"round {k + 1}/{a.rounds}: {Path(m).name}", file=sys.stderr)
            lr = steal["llama"].run(run_llama, lb, m, a)
            if a.batch:
                lr.update(steal["llama"].run(run_llama_batched, str(Path(lb).parent / "llama-batched-bench"), m, a))
            runs["llama"].append(lr)
            runs["ggflow"].append(steal["ggflow"].run(run_ggflow, a.ggflow, m, a))
        steal_notes.append(f"{Path(m).name}: llama.cpp {steal['llama']}, ggflow {steal['ggflow']}")
        med = {tool: {t: statistics.median(r[t] for r in rs) for t in rs[0]} for tool, rs in runs.items()}
        for test in med["ggflow"]:
            g = med["ggflow"][test]
            l = med["llama"].get(test)
            ratio = f"{g / l:.2f}x" if l else "–"
            print(f"| {Path(m).name} | {test} | {l:.1f} |" if l else f"| {Path(m).name} | {test} | – |", end="")
            print(f" {g:.1f} | {ratio} | {spread([r.get(test) for r in runs['llama']])} |"
                  f" {spread([r.get(test) for r in runs['ggflow']])} |")
        if a.batch:  # batch scaling: each round's xB / x1 (measured together), median over the rounds
            one, many = f"tg{a.n} x1", f"tg{a.n} x{a.batch}"
            cell = {}
            for tool, rs in runs.items():
                per = [r[many] / r[one] for r in rs if r.get(one) and r.get(many)]
                cell[tool] = f"{statistics.median(per):.2f} ({', '.join(f'{x:.2f}' for x in per)})" if per else "–"
            print(f"| {Path(m).name} | {many} / x1 (rounds) | {cell['llama']} | {cell['ggflow']} | – | | |")
    print("\nCPU steal while each tool ran (time the hypervisor gave to other guests): " + "; ".join(steal_notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
