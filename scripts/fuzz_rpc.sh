#!/usr/bin/env bash
# Fuzz the RPC frame parser and request handlers with libFuzzer (clang) under
# AddressSanitizer and UndefinedBehaviorSanitizer.
#   bash scripts/fuzz_rpc.sh [SECONDS]     (default 60)
# The corpus and any crashing input go to build/fuzz/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TO_RUN="${1:-60}"
OUT="$ROOT/build/fuzz"
mkdir -p "$OUT/corpus"
clang -std=c99 -g -O1 -DRXE_LIBFUZZER -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$ROOT/runtime_c/include" "$ROOT/runtime_c/fuzz/rpc_fuzz.c" "$ROOT/runtime_c/rpc/protocol.c" \
  "$ROOT"/runtime_c/src/{status,check,module}.c -o "$OUT/rpc_fuzz"
cd "$OUT"
./rpc_fuzz -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -print_final_stats=1 corpus 2>&1 | tail -25
