#!/usr/bin/env bash
# Installs OpenVINO GenAI from PyPI into its own virtual environment outside the repository, for
# bench/compare_openvino.py (never part of the build or the tests). OpenVINO GenAI reads GGUF files
# itself (SmolLM2's Q4_1 included) and runs them on its CPU plugin.
#   bench/install_openvino.sh [DIR]      default DIR: ~/.cache/ggflow/openvino-genai-$VERSION
# Prints the venv's python. Idempotent.
set -euo pipefail
VERSION=${OPENVINO_GENAI_VERSION:-2026.4.1.0}
DIR=${1:-$HOME/.cache/ggflow/openvino-genai-$VERSION}
if [ -x "$DIR/bin/python" ] && "$DIR/bin/python" -c "import openvino_genai" 2>/dev/null; then
  echo "$DIR/bin/python"; exit 0
fi
python3 -m venv "$DIR" >&2
"$DIR/bin/pip" install --quiet "openvino-genai==$VERSION" >&2
echo "$DIR/bin/python"
