#!/usr/bin/env bash
# Set up the machine (scripts/setup.sh) and run the whole test suite.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m "not slow" -x`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
PY="${RXE_VENV:-$ROOT/.venv}/bin/python"
JOBS="${RXE_TEST_JOBS:-auto}"
echo "[test] ruff check (pyproject.toml [tool.ruff])"
"$(dirname "$PY")/ruff" check "$ROOT"
echo "[test] pytest with $JOBS workers"
set +e
# a watchdog below CI's 90 minutes: a hung run (pytest-xdist's scheduler has waited forever after a worker
# crash) is interrupted, and pytest still prints what failed and which test crashed its worker
timeout --signal=INT --kill-after=120 "${RXE_TEST_TIMEOUT:-80m}" "$PY" -m pytest -n "$JOBS" --dist loadgroup "$@"
status=$?
if [ "$status" -eq 124 ]; then
  echo "[test] pytest ran past ${RXE_TEST_TIMEOUT:-80m} and was interrupted (RXE_TEST_TIMEOUT)" >&2
fi
set -e
if [ "$status" -eq 5 ]; then
  echo "[test] pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$status"
