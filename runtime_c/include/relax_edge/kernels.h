/*
 * Library micro-kernels (runtime_c/kernels/) that generated host code calls
 * through call_extern. Each one has the calling convention of a generated
 * kernel: tensor pointers (inputs, then the output, then the scratch buffer
 * when the kernel declares one), then int64_t sizes, then the error record;
 * it returns a status. Scratch sizes and packed weight layouts are mirrored
 * in Python (relax_edge/library/kernels.py), which the memory planner and
 * the weight packer use.
 *
 * Activation codes (`act`): 0 none, 1 relu, 2 relu6 (clip to [0, 6]).
 *
 * The architecture path is chosen at compile time: aarch64 NEON
 * (__aarch64__), x86-64 AVX2+FMA (__AVX2__ && __FMA__), else generic C.
 */
#ifndef RELAX_EDGE_KERNELS_H_
#define RELAX_EDGE_KERNELS_H_

#include <stdint.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RXE_ACT_NONE 0
#define RXE_ACT_RELU 1
#define RXE_ACT_RELU6 2

/* Declarations of each kernel follow (see runtime_c/kernels/). */

#ifdef __cplusplus
}
#endif

#endif /* RELAX_EDGE_KERNELS_H_ */
