#!/usr/bin/env bash
# Fuzz the RPC protocol core (runtime_c/fuzz/rpc_fuzz.c: sequences of good
# and bad requests against one live server) with libFuzzer (clang) under
# AddressSanitizer and UndefinedBehaviorSanitizer, once per module:
#   handwritten  the module of runtime_c/fuzz/fuzz_module.h
#   mlp          a 3-layer MLP over an unbounded symbolic batch (ONNX, tests/onnx_models.py)
#   bert         a 2-layer BERT over a bounded symbolic sequence (ONNX, seq <= 64)
#
#   bash scripts/fuzz_rpc.sh [SECONDS] [TARGET...]   (60 seconds per target; all targets)
#
# SECONDS is wall-clock time per target. Each target starts from the
# checked-in regression inputs (tests/runtime/rpc_corpus) and keeps its
# corpus and any crashing input under build/fuzz/TARGET/. The compiled
# models come from rxe.build on the host (build/fuzz/models/). Prints each
# target's stat::number_of_executed_units and the total. The ONNX exports
# need torch the first time (then they are cached, see tests/onnx_models.py).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TO_RUN="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(handwritten mlp bert)
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
OUT="$ROOT/build/fuzz"
RT="$ROOT/runtime_c"
# Instrumentation: the protocol core gets all of libFuzzer's (comparisons
# traced); the runtime, the kernels and the model get edge coverage only
# (their copy and compute loops would be traced byte by byte); the harness
# none. All of it runs under ASan + UBSan.
SAN=(-std=c99 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -I"$RT/include" -I"$RT/fuzz")
EDGES=(-fsanitize=fuzzer-no-link -fno-sanitize-coverage=trace-cmp)
mkdir -p "$OUT/models"

# rxe.build writes OUT/models/NAME/NAME.c and NAME_weights.{S,bin}
generate_model() {
  (cd "$ROOT" && "$PYTHON" - "$1" "$OUT/models/$1" <<'PY'
import sys
from pathlib import Path
import relax_edge as rxe
from relax_edge.toolchain import Toolchain
from relax_edge.target import load_board
from tests.onnx_models import get_model
name, out = sys.argv[1], Path(sys.argv[2])
path, _ = get_model(name)
mod = rxe.from_onnx(str(path), dim_bounds={"seq": 64} if name == "bert" else None)   # the MLP's batch: unbounded
rxe.build(mod, board="host", out_dir=out, name=name)
flags = Toolchain.for_board(load_board("host")).cflags   # the code is scheduled for these (vector width)
(out / "cflags").write_text(" ".join(f for f in flags if f.startswith(("-m", "-fno-math"))))
PY
  )
}

compile() {   # compile OBJ FLAGS... SOURCE...
  local obj="$1"
  shift
  clang "${SAN[@]}" "$@" -c -o "$obj"
}

build_target() {
  local name="$1" dir="$OUT/$1/obj"
  local objs=("$dir/harness.o" "$dir/protocol.o" "$dir/status.o" "$dir/check.o" "$dir/module.o" "$dir/math.o"
              "$dir/generate.o" "$dir/sample.o")
  mkdir -p "$OUT/$name/corpus" "$dir"
  compile "$dir/protocol.o" -fsanitize=fuzzer-no-link "$RT/rpc/protocol.c"
  for src in status check module math generate sample; do compile "$dir/$src.o" "${EDGES[@]}" "$RT/src/$src.c"; done
  if [ "$name" = handwritten ]; then
    compile "$dir/harness.o" -DRXE_LIBFUZZER "$RT/fuzz/rpc_fuzz.c"
    compile "$dir/fuzz_module.o" -fsanitize=fuzzer-no-link "$RT/fuzz/fuzz_module.c"
    objs+=("$dir/fuzz_module.o")
  else
    generate_model "$name"
    local model="$OUT/models/$name" k
    local flags=($(cat "$model/cflags") "${EDGES[@]}")   # the code is scheduled for the board's flags
    compile "$dir/harness.o" -DRXE_LIBFUZZER -DRXE_MODULE="${name}_module" "$RT/fuzz/rpc_fuzz.c"
    compile "$dir/model.o" "${flags[@]}" -DRXE_PROFILE "$model/$name.c"
    compile "$dir/weights.o" -Wa,-I"$model" "$model/${name}_weights.S"
    compile "$dir/threads.o" "${flags[@]}" "$RT/src/threads.c"
    objs+=("$dir/model.o" "$dir/weights.o" "$dir/threads.o")
    for k in "$RT"/kernels/*.c; do
      compile "$dir/kernel_$(basename "$k" .c).o" "${flags[@]}" "$k"
      objs+=("$dir/kernel_$(basename "$k" .c).o")
    done
  fi
  clang -fsanitize=fuzzer,address,undefined "${objs[@]}" -o "$OUT/$name/rpc_fuzz" -lm -lpthread
}

total=0
for name in "${TARGETS[@]}"; do
  case "$name" in handwritten|mlp|bert) ;; *) echo "unknown target $name (handwritten, mlp, bert)" >&2; exit 2 ;; esac
  echo "== $name: building"
  build_target "$name"
  cd "$OUT/$name"
  set +e
  ./rpc_fuzz -max_total_time="$SECONDS_TO_RUN" -max_len=1024 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$OUT/$name/" corpus "$ROOT/tests/runtime/rpc_corpus" > fuzz.log 2>&1
  rc=$?
  set -e
  tail -8 fuzz.log
  if [ $rc -ne 0 ]; then
    echo "== $name: FAILED (exit $rc); the input is in $OUT/$name/, the log in $OUT/$name/fuzz.log"
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' fuzz.log | tail -1)
  echo "== $name: ${runs:-0} executions"
  total=$((total + ${runs:-0}))
done
echo "== total: $total executions"
