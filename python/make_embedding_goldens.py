#!/usr/bin/env python3
"""Golden sentence embeddings from llama.cpp, the oracle for ggflow's /v1/embeddings: for each
sentence below, the token ids llama.cpp's tokenizer produced and the mean-pooled, L2-normalized
vector (all n_embd floats) that its `llama-embedding` prints.

Each sentence is embedded by its own llama-embedding run (one sequence in the batch, as a single
request computes it), with the prompt passed as one argv string, escapes off and a separator
that never occurs, so whitespace and newlines reach the tokenizer as written:

    llama-embedding -m MODEL -p TEXT --pooling mean --embd-normalize 2 --embd-output-format json
        --embd-separator <#ggflow-sep#> --no-escape --verbose-prompt -c 512 -b 512 -ub 512 -t 2 -fa off

The token ids are the ones `--verbose-prompt` lists for that same run (`ID -> 'piece'` lines before
the JSON), so they are exactly the tokens whose vector is recorded. The vectors are printed with
7 decimals (%1.7f), which is below 1e-12 NMSE for a unit vector of 384 values.

Checks before writing: every vector has unit norm, the token lists start with [CLS] and end with
[SEP], and each paraphrase pair is closer (cosine) than the unrelated sentences.
--check-batched also embeds all sentences in one run (one batch, several sequences) and prints the
NMSE of each against its own run.

    bench/install_llamacpp.sh     # builds llama-embedding among llama.cpp's tools
    .venv/bin/python python/make_embedding_goldens.py [--model models/all-minilm-l6-v2-f16.gguf]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from link_models import sha256  # noqa: E402  (python/, next to this script)

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CPP_VERSION = "0.3.36"  # llama-cpp-python's sdist, as bench/install_llamacpp.sh builds it
DEFAULT_BIN = Path.home() / ".cache/ggflow" / f"llama.cpp-{LLAMA_CPP_VERSION}" / "build/bin"
SEP = "<#ggflow-sep#>"
# Flash attention off, as the other goldens' oracle: with it on (llama-embedding's default, auto), the
# graph casts K and V to F16 before attention when there is no KV cache, which moves the vectors by
# an NMSE of about 4e-7 (--flash-attn on writes those instead).
FLASH_ATTN = "off"

LONG = (
    "The history of computing is a story of abstraction. Early machines were programmed by "
    "rewiring panels of cables, and every new problem meant a new arrangement of hardware. Stored "
    "programs changed that: instructions became data, kept in the same memory as the numbers they "
    "worked on, and a single machine could run any procedure that fit. Assemblers gave names to "
    "the instructions, compilers turned formulas into sequences of them, and operating systems "
    "shared one processor among many users who never saw each other. Each layer hid the one below "
    "it and let people think about their own problem instead of the machine. Networks joined the "
    "machines together, and the web turned the network into a library that anyone could read and "
    "write. Today a phone in a pocket holds more memory than the rooms of equipment that guided "
    "the first missions to the Moon, and software written by thousands of people cooperates in "
    "ways none of them fully understands. Machine learning adds another layer: instead of writing "
    "the rules, we show examples and let the program find them. Whether this layer will be as "
    "dependable as the ones beneath it is one of the open questions of the field, and answering it "
    "will take careful measurement, honest comparison, and a great deal of patience."
)

# (name, text). The pairs in PARAPHRASES must come out closer than the pairs in UNRELATED.
CASES = [
    ("ascii", "The quick brown fox jumps over the lazy dog."),
    ("ascii_paraphrase", "A fast brown fox leaps over a lazy dog."),
    ("question", "How do I reset my password?"),
    ("question_paraphrase", "What are the steps to change my account password?"),
    ("unrelated", "Mitochondria are the powerhouse of the cell."),
    ("numbers", "Revenue rose 12.5% to $4,300,000 in Q3 2023 (up from 3.8M)."),
    ("punctuation", "Wait... what?! \"Quoted\", [bracketed] & {braced} -- hyphen-ated; colon: done."),
    ("accents_case", "Cr\u00e8me BR\u00dbL\u00c9E at the Caf\u00e9 in S\u00e3o Paulo, na\u00efve ZO\u00cb and jalape\u00f1o."),
    ("cjk", "\u6211\u559c\u6b22\u5728\u5317\u4eac\u5b66\u4e60\u673a\u5668\u5b66\u4e60\u3002\u6771\u4eac\u30bf\u30ef\u30fc"),
    ("emoji", "I love pizza \U0001f355 so much! \U0001f44d"),
    ("whitespace", "  \t leading and trailing   whitespace \n\n "),
    ("long", LONG),
]
PARAPHRASES = [("ascii", "ascii_paraphrase"), ("question", "question_paraphrase")]
UNRELATED = [("ascii", "unrelated"), ("question", "unrelated"), ("ascii", "question"), ("question", "numbers")]

TOKEN_LINE = re.compile(r"^\s*(\d+) -> '(.*)'$")


def embedding_args(binary: Path, model: Path, prompt: str, threads: int, flash_attn: str) -> list:
    return [str(binary), "-m", str(model), "-p", prompt, "--pooling", "mean", "--embd-normalize", "2",
            "--embd-output-format", "json", "--embd-separator", SEP, "--no-escape", "--verbose-prompt",
            "-c", "512", "-b", "512", "-ub", "512", "-t", str(threads), "-fa", flash_attn]


def run_embedding(binary: Path, model: Path, prompts: list, threads: int, flash_attn: str,
                  tries: int = 5) -> tuple:
    """(token id lists, vectors) for the prompts, from one llama-embedding run.

    llama.cpp's logger (which prints the tokens and the JSON too) is never destroyed, so what its
    worker thread has not written when main() returns is lost (common/log.cpp, issue 22142): 1 to 4
    runs in 30 ended in truncated JSON here. The output is deterministic, so a run whose JSON
    is cut is simply repeated; a complete one has every vector and every token line."""
    args = embedding_args(binary, model, SEP.join(prompts), threads, flash_attn)
    why = ""
    for _ in range(tries):
        p = subprocess.run(args, capture_output=True, text=True, encoding="utf-8", errors="replace")
        if p.returncode != 0:
            raise RuntimeError(f"llama-embedding failed (exit status {p.returncode}):\n{p.stderr[-3000:]}")
        try:
            return parse_output(p.stdout, p.stderr, len(prompts))
        except ValueError as e:  # json.JSONDecodeError included
            why = str(e)
    raise RuntimeError(f"llama-embedding's output was incomplete {tries} times: {why}")


def parse_output(out: str, err: str, n_prompts: int) -> tuple:
    start = out.find("{\n")
    if start < 0:
        raise ValueError("no JSON in the output")
    data = json.loads(out[start:])["data"]
    # --verbose-prompt: "prompt i: ..." and "number of tokens in prompt = N" go to the log (stderr),
    # then N lines "   ID -> 'piece'" per prompt on stdout, before the JSON.
    counts = [int(n) for n in re.findall(r"number of tokens in prompt = (\d+)", err + out)]
    ids = [int(m.group(1)) for line in out[:start].splitlines() if (m := TOKEN_LINE.match(line))]
    if len(counts) != n_prompts or sum(counts) != len(ids) or len(data) != n_prompts:
        raise ValueError(f"could not read {n_prompts} prompts' tokens from --verbose-prompt "
                         f"(counts {counts}, {len(ids)} token lines, {len(data)} vectors)")
    tokens, at = [], 0
    for n in counts:
        tokens.append(ids[at:at + n])
        at += n
    return tokens, [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]


def llama_version(binary: Path) -> str:
    p = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
    return " ".join(line.strip() for line in (p.stdout + p.stderr).splitlines() if line.strip())


def cos(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "models/all-minilm-l6-v2-f16.gguf")
    ap.add_argument("--llama-bin", type=Path, default=DEFAULT_BIN, help=f"default {DEFAULT_BIN}")
    ap.add_argument("--out", type=Path, default=ROOT / "tests/conformance/goldens/embedding-all-minilm-l6-v2.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check-batched", action="store_true")
    ap.add_argument("--flash-attn", choices=("on", "off"), default=FLASH_ATTN,
                    help=f"llama-embedding's -fa (default {FLASH_ATTN})")
    args = ap.parse_args()

    binary = args.llama_bin / "llama-embedding"
    if not os.access(binary, os.X_OK):
        print(f"make_embedding_goldens: {binary} is missing (hint: bench/install_llamacpp.sh builds it)",
              file=sys.stderr)
        return 1
    if not args.model.is_file():
        print(f"make_embedding_goldens: {args.model} is missing (hint: scripts/setup.sh converts it; "
              f"see models/{args.model.name}.missing)", file=sys.stderr)
        return 1

    cases = []
    for name, text in CASES:
        (tokens,), (vec,) = run_embedding(binary, args.model, [text], args.threads, args.flash_attn)
        cases.append(dict(name=name, text=text, tokens=tokens, embedding=vec))
        print(f"make_embedding_goldens: {name}: {len(tokens)} tokens", file=sys.stderr)

    by_name = {c["name"]: c for c in cases}
    problems = []
    for c in cases:
        norm = float(np.linalg.norm(c["embedding"]))
        if abs(norm - 1.0) > 1e-5:
            problems.append(f"{c['name']}: norm {norm}")
        if c["tokens"][0] != 101 or c["tokens"][-1] != 102:
            problems.append(f"{c['name']}: tokens do not run from [CLS] to [SEP]: {c['tokens'][:3]}...")
    sims = {f"{a}~{b}": cos(by_name[a]["embedding"], by_name[b]["embedding"]) for a, b in PARAPHRASES + UNRELATED}
    for k, v in sims.items():
        print(f"make_embedding_goldens: cosine {k}: {v:.4f}", file=sys.stderr)
    worst_paraphrase = min(sims[f"{a}~{b}"] for a, b in PARAPHRASES)
    best_unrelated = max(sims[f"{a}~{b}"] for a, b in UNRELATED)
    if worst_paraphrase <= best_unrelated:
        problems.append(f"a paraphrase pair ({worst_paraphrase:.4f}) is not closer than the unrelated "
                        f"pairs ({best_unrelated:.4f})")
    if problems:
        print("make_embedding_goldens: not written:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1

    if args.check_batched:
        tokens, vecs = run_embedding(binary, args.model, [t for _, t in CASES], args.threads, args.flash_attn)
        for c, t, v in zip(cases, tokens, vecs):
            a, b = np.asarray(v), np.asarray(c["embedding"])
            print(f"make_embedding_goldens: batched {c['name']}: tokens {'equal' if t == c['tokens'] else 'DIFFER'}, "
                  f"NMSE {float(((a - b) ** 2).sum() / (b ** 2).sum()):.3e}", file=sys.stderr)

    cmd = embedding_args(Path("llama-embedding"), Path("models") / args.model.name, "TEXT", args.threads,
                         args.flash_attn)
    golden = {
        "model": f"models/{args.model.name}",
        "model_sha256": sha256(args.model),
        "llama_cpp": {"source": f"llama-cpp-python {LLAMA_CPP_VERSION} sdist (bench/install_llamacpp.sh)",
                      "version": llama_version(binary)},
        "command": " ".join(a if a != "TEXT" else "<text>" for a in cmd),
        "one_run_per_case": True,
        "token_ids_source": "llama-embedding --verbose-prompt of the same run (the tokens embedded)",
        "pooling": "mean",
        "normalize": "L2 (--embd-normalize 2)",
        "vector_format": "%1.7f as llama-embedding prints it",
        "n_embd": len(cases[0]["embedding"]),
        "cosine": {k: round(v, 6) for k, v in sims.items()},
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    compact = dict(ensure_ascii=False, separators=(",", ":"))
    header = {k: v for k, v in golden.items() if k != "cases"}
    with open(args.out, "w", encoding="utf-8") as f:  # one line per case, like the other goldens' rows
        f.write(json.dumps(header, **compact)[:-1] + ',"cases":[\n')
        f.write(",\n".join(json.dumps(c, **compact) for c in cases))
        f.write("]}\n")
    print(f"make_embedding_goldens: wrote {args.out} ({len(cases)} cases)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
