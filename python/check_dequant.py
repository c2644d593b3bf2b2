#!/usr/bin/env python3
"""Compare ggflow's reference dequantization with the gguf package's, bit for bit.

    check_dequant.py --ggflow build/ggflow FILE.gguf [...]   every tensor of each file
    check_dequant.py --ggflow build/ggflow --random          random blocks of every type
    check_dequant.py --ggflow build/ggflow --to q4_0 FILE.gguf [...]

`ggflow dequant FILE` streams every dequantizable tensor as raw f32 in file order; this script
dequantizes the same tensors with gguf.quants.dequantize and compares the bytes. With --to,
`ggflow dequant --to TYPE` streams each tensor whose rows are whole 32-value blocks requantized
(a draft model's matrices under --draft-quant), compared with gguf.quants.quantize of the gguf
package's dequantization (the bytes llama-quantize writes for that type). Exit 0 when all
match, 1 on a mismatch, 77 (ctest's skip code) when a model file is absent.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
np.seterr(all="ignore")  # random blocks hold inf/nan scales on purpose
import gguf
from gguf import GGMLQuantizationType as Q

SUPPORTED = {Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0,
             Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K}


def end_of_stream(proc, label: str, checked: int, failures: int) -> int:
    """The stream must end where the tensors do, and ggflow exit 0; prints the summary."""
    rest = proc.stdout.read()
    rc = proc.wait()
    if rc != 0 or rest:
        print(f"ggflow dequant exited {rc} with {len(rest)} unexpected bytes left")
        failures += 1
    print(f"{label}: {checked - failures} tensors identical, {failures} failed")
    return failures


def check_requant(ggflow: str, path: Path, to: str) -> int:
    reader = gguf.GGUFReader(path)
    qt = {"q4_0": Q.Q4_0}[to]
    proc = subprocess.Popen([ggflow, "dequant", str(path), "--to", to], stdout=subprocess.PIPE)
    failures, checked = 0, 0
    for t in reader.tensors:
        if t.tensor_type not in SUPPORTED or int(t.shape[0]) % 32 != 0:
            continue
        vals = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1, 32)
        want = np.asarray(gguf.quants.quantize(vals, qt)).view(np.uint8).reshape(-1)
        got = np.frombuffer(proc.stdout.read(want.size), dtype=np.uint8)
        checked += 1
        if not np.array_equal(got, want):
            _, size = gguf.GGML_QUANT_SIZES[qt]
            bad = np.nonzero((got.reshape(-1, size) != want.reshape(-1, size)).any(axis=1))[0] if got.size == want.size else []
            print(f"MISMATCH {path.name}:{t.name} ({t.tensor_type.name} -> {qt.name}): "
                  f"{len(bad)} of {want.size // size} blocks differ; first {bad[0] if len(bad) else '?'}")
            failures += 1
    return end_of_stream(proc, f"{path.name} -> {to}", checked, failures)


def check_file(ggflow: str, path: Path) -> int:
    reader = gguf.GGUFReader(path)
    proc = subprocess.Popen([ggflow, "dequant", str(path)], stdout=subprocess.PIPE)
    failures, checked = 0, 0
    for t in reader.tensors:
        if t.tensor_type not in SUPPORTED:
            continue
        want = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
        got = np.frombuffer(proc.stdout.read(want.size * 4), dtype=np.float32)
        checked += 1
        if got.size != want.size or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0] if got.size == want.size else []
            first = bad[0] if len(bad) else -1
            print(f"MISMATCH {path.name}:{t.name} ({t.tensor_type.name}) "
                  f"{len(bad)} of {want.size} differ; first at {first}: "
                  f"ggflow {got[first] if first >= 0 else '?'} gguf {want[first] if first >= 0 else '?'}")
            failures += 1
    return end_of_stream(proc, path.name, checked, failures)


def random_file(dir: Path) -> Path:
    """One tensor of random bytes per supported block type (f16 scales included), 64 blocks each."""
    rng = np.random.default_rng(20261129)
    w = gguf.GGUFWriter(dir / "random.gguf", arch="random")
    for qt in sorted(SUPPORTED, key=lambda q: q.value):
        block, size = gguf.GGML_QUANT_SIZES[qt]
        n_blocks = 64
        raw = rng.integers(0, 256, size=n_blocks * size, dtype=np.uint8)
        if qt in (Q.F32, Q.F16, Q.BF16):  # keep plain types finite but cover signs and subnormals
            vals = rng.standard_normal(n_blocks).astype(np.float32) * np.float32(1e-3)
            vals[:4] = [0.0, -0.0, 1e-7, -6.0e-8]
            raw = gguf.quants.quantize(vals, qt).view(np.uint8)
            w.add_tensor(f"t_{qt.name}", raw, raw_shape=raw.shape, raw_dtype=qt)
            continue
        raw = raw.reshape(n_blocks // 8, 8 * size)
        w.add_tensor(f"t_{qt.name}", raw, raw_shape=raw.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dir / "random.gguf"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", required=True)
    ap.add_argument("--random", action="store_true")
    ap.add_argument("--to", choices=["q4_0"], help="check requantization to this type instead")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    failures = 0
    if args.random:
        with tempfile.TemporaryDirectory() as d:
            failures += check_file(args.ggflow, random_file(Path(d)))
    for f in args.files:
        if not f.exists():
            if os.environ.get("GGFLOW_REQUIRE_MODELS") == "1":  # CI: setup installs every model
                print(f"FAIL: {f} is not available and GGFLOW_REQUIRE_MODELS=1")
                return 1
            print(f"SKIP: {f} is not available (see models/*.missing; run scripts/setup.sh)")
            return 77
        failures += check_requant(args.ggflow, f, args.to) if args.to else check_file(args.ggflow, f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
