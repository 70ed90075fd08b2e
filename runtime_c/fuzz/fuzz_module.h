/*
 * A hand-written module for the RPC fuzz target and the RPC server tests
 * (what the compiler would emit, kept small):
 *   main(x: float32 (n,)) -> y: float32 (n,), 1 <= n <= 4096
 *       y = x; fails with RXE_ERR_INDEX, after writing part of y, when
 *       x[0] == -1 (a data-dependent failure, like a gather's index check).
 *   count(x: float32 (n,)) -> y: float32 (n,), 0 <= n <= 2^20
 *       y = x + r, where r counts the runs of `count` so far (this one
 *       included): a client sees how often the server ran it.
 * Both are built with the profiler (one entry each).
 */
#ifndef RELAX_EDGE_FUZZ_MODULE_H_
#define RELAX_EDGE_FUZZ_MODULE_H_

#include "relax_edge/abi.h"

extern const rxe_module_t rxe_fuzz_module;

/* Runs of `count` since the start or the last reset. */
extern uint64_t rxe_fuzz_count_runs;

#endif /* RELAX_EDGE_FUZZ_MODULE_H_ */
