#!/usr/bin/env bash
# Fuzz the ONNX importer: N mutated models (node tests of the onnx package and
# the exported MLP/BERT/GPT-2 of tests/onnx_models.py), each imported under a
# 10 s time limit in a process limited to 3 GiB of address space.
#   bash scripts/fuzz_onnx.sh [N] [SEED]     (default 100000 runs, seed 0)
# Exits 1 if anything but a clean import or a RelaxEdgeError happened; one
# input per kind of failure is saved to build/fuzz_onnx/. More options:
#   python scripts/fuzz_onnx.py --help
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
cd "$ROOT"
exec "$PYTHON" scripts/fuzz_onnx.py --runs "${1:-100000}" --seed "${2:-0}" --real mlp,bert,gpt2 \
  --time-limit 10 --mem-mb 3072 --out "$ROOT/build/fuzz_onnx"
