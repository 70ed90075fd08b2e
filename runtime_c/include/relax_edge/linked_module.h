/*
 * The model a runner or an RPC server serves: RXE_LINKED_MODULE, a
 * const rxe_module_t*.
 *
 * Compiled with -DRXE_MODULE=<prefix>_module it is that module. Without it,
 * it is the pointer rxe_linked_module, which tools/linked_module.c (compiled
 * with -DRXE_MODULE) defines: the runner and the server then compile once
 * per toolchain and flags, not once per model, and a one-line object binds
 * each build to its model.
 */
#ifndef RELAX_EDGE_LINKED_MODULE_H_
#define RELAX_EDGE_LINKED_MODULE_H_

#include "relax_edge/abi.h"

#ifdef RXE_MODULE
extern const rxe_module_t RXE_MODULE;
#define RXE_LINKED_MODULE (&RXE_MODULE)
#else
extern const rxe_module_t* const rxe_linked_module;
#define RXE_LINKED_MODULE rxe_linked_module
#endif

#endif /* RELAX_EDGE_LINKED_MODULE_H_ */
