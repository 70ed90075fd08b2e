# The C runtime's source files, relative to runtime_c/: the one list that
# CMakeLists.txt (include()) and relax_edge/toolchain.py (which reads each
# set(NAME ...) block, one path per line) build from.
#
#   RXE_CORE_SOURCES    the runtime core; C99, freestanding with RXE_NO_LIBM
#   RXE_THREAD_SOURCES  the thread pool (serial under RXE_NO_THREADS)
#   RXE_KERNEL_SOURCES  the library micro-kernels
#   RXE_GENERATE_SOURCES  a decoder's token loop and sampler (generate.h); freestanding,
#                       linked like the kernels (a static link keeps them only when used)
#   RXE_RPC_SOURCES     the RPC protocol and the POSIX server (not in rxe_runtime)
#
# A new .c file under src/ or kernels/ is listed here
# (tests/runtime/test_c_runtime.py checks that none is missing).

set(RXE_CORE_SOURCES
  src/status.c
  src/check.c
  src/module.c
  src/math.c
  src/half.c
)

set(RXE_GENERATE_SOURCES
  src/sample.c
  src/generate.c
)

set(RXE_THREAD_SOURCES
  src/threads.c
)

set(RXE_KERNEL_SOURCES
  kernels/attention.c
  kernels/conv.c
  kernels/depthwise.c
  kernels/detect.c
  kernels/gemm.c
  kernels/gemv.c
  kernels/qconv.c
  kernels/qdepthwise_dsp.c
  kernels/qdynamic.c
  kernels/qeltwise.c
  kernels/qgemm.c
  kernels/matmul_nbits.c
  kernels/trig_math.c
)

set(RXE_RPC_SOURCES
  rpc/protocol.c
  rpc/server_posix.c
)
