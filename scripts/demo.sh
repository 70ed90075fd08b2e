#!/usr/bin/env bash
# The README's main command: set up the machine, then run the main job.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
exec "${RXE_VENV:-$ROOT/.venv}/bin/python" "$ROOT/scripts/demo.py" "$@"
