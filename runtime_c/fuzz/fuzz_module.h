/*
 * fuzz: a hand-written module, laid out as the compiler lays out a model's
 * PREFIX.h and PREFIX.c (here PREFIX = fuzz). It is the module of the RPC
 * fuzz target (rpc_fuzz.c, scripts/fuzz_rpc.sh) and of the RPC server
 * tests, and the example to read for the ABI of relax_edge/abi.h:
 * fuzz_module.c says, part by part, what generated code does there and why.
 *
 *   main(x: float32 (n,)) -> y: float32 (n,), 1 <= n <= 4096
 *       y = x in a 64-byte workspace; fails with RXE_ERR_INDEX, after
 *       writing y[0], when x[0] == -1 (a data-dependent failure, like a
 *       gather's index check).
 *   count(x: float32 (n,)) -> y: float32 (n,), 0 <= n <= 2^20
 *       y = x + r, where r counts the runs of `count` so far (this one
 *       included): a client sees how often the server ran it.
 *   step(input_ids: int64 (1, seq), attention_mask: int64 (1, total),
 *        state_0: float32 (1, 1, 8, 1)) -> logits: float32 (1, 1, 5)
 *       the `step` function of a toy KV-cache decoder (relax_edge/generate.h):
 *       writes the ids as floats at state[total - seq, total), and the next
 *       greedy token is (sum of state[0, total) + 1) % 5; an id outside
 *       [0, 5) fails with RXE_ERR_INDEX.
 *
 * Both carry their profiler entries (one each) in every build, so that the
 * PROFILE request is exercised without a second build; the compiler emits
 * them only under RXE_PROFILE. Built with RXE_PROFILE, the runs also time
 * their kernel (the platform provides rxe_profile_now_ns).
 *
 * Usage (the caller owns all memory), as for a compiled model:
 *   int64_t shapes[FUZZ_MAIN_OUTPUT_DIMS];
 *   uint64_t ws_bytes;
 *   fuzz_main_plan_shapes(inputs, shapes, &ws_bytes, &err);   // output shapes, workspace size
 *   ... allocate outputs and a 64-byte aligned workspace of ws_bytes ...
 *   fuzz_main(inputs, outputs, workspace, ws_bytes, &err);
 */
#ifndef RELAX_EDGE_FUZZ_MODULE_H_
#define RELAX_EDGE_FUZZ_MODULE_H_

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* main: x: Tensor((n,), "float32") -> Tensor((n,), "float32") */
#define FUZZ_MAIN_NUM_INPUTS 1
#define FUZZ_MAIN_NUM_OUTPUTS 1
#define FUZZ_MAIN_OUTPUT_DIMS 1
/* every size is bounded: the fixed arena */
#define FUZZ_MAIN_WORKSPACE_BYTES 64u
/* workspace bytes for given sizes, in the order n */
rxe_status_t fuzz_main_workspace_size(const int64_t* size_values, uint64_t* out_bytes, rxe_error_t* err);
rxe_status_t fuzz_main(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, void* workspace,
    uint64_t workspace_bytes, rxe_error_t* err);
rxe_status_t fuzz_main_plan_shapes(const rxe_tensor_t* inputs, int64_t* out_shapes,
    uint64_t* out_workspace_bytes, rxe_error_t* err);

/* count: x: Tensor((n,), "float32") -> Tensor((n,), "float32") */
#define FUZZ_COUNT_NUM_INPUTS 1
#define FUZZ_COUNT_NUM_OUTPUTS 1
#define FUZZ_COUNT_OUTPUT_DIMS 1
#define FUZZ_COUNT_WORKSPACE_BYTES 0u
rxe_status_t fuzz_count_workspace_size(const int64_t* size_values, uint64_t* out_bytes, rxe_error_t* err);
rxe_status_t fuzz_count(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, void* workspace,
    uint64_t workspace_bytes, rxe_error_t* err);
rxe_status_t fuzz_count_plan_shapes(const rxe_tensor_t* inputs, int64_t* out_shapes,
    uint64_t* out_workspace_bytes, rxe_error_t* err);

/* The module: what a loader (ctypes, the runner, the RPC server) looks up. */
extern const rxe_module_t rxe_fuzz_module;

/* Runs of `count` since the start or the last reset (not part of the ABI:
 * the fuzz target resets it between inputs). */
extern uint64_t rxe_fuzz_count_runs;

/* step: the toy decoder step, max_context 8, vocab 5 */
#define FUZZ_STEP_NUM_INPUTS 3
#define FUZZ_STEP_NUM_OUTPUTS 1
#define FUZZ_STEP_OUTPUT_DIMS 3
#define FUZZ_STEP_WORKSPACE_BYTES 64u
#define FUZZ_STATE_BYTES 64u
#define FUZZ_MAX_CONTEXT 8
#define FUZZ_VOCAB 5
rxe_status_t fuzz_step_workspace_size(const int64_t* size_values, uint64_t* out_bytes, rxe_error_t* err);
rxe_status_t fuzz_step(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, void* workspace,
    uint64_t workspace_bytes, rxe_error_t* err);
rxe_status_t fuzz_step_plan_shapes(const rxe_tensor_t* inputs, int64_t* out_shapes,
    uint64_t* out_workspace_bytes, rxe_error_t* err);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_FUZZ_MODULE_H_ */
