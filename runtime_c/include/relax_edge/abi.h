/*
 * relax_edge ABI: the contract between generated model code and the runtime.
 *
 * This header is standalone (stdint.h and stddef.h only) and versioned: a
 * module records RXE_ABI_VERSION and a loader refuses a module built against
 * another version. It is mirrored in Python by relax_edge/codegen/abi.py;
 * change both together and bump the version.
 *
 * A compiled model exports one rxe_module_t. Each function of the module has
 * two entry points:
 *   plan(inputs, out_shapes, out_workspace_bytes, err)
 *       checks the inputs against the signature, binds the symbolic sizes and
 *       reports every output's shape and the workspace the run needs;
 *   run(inputs, outputs, workspace, workspace_bytes, err)
 *       checks again and computes. The caller owns all memory: outputs are
 *       caller-allocated tensors and the workspace is caller memory of at
 *       least the planned size. Nothing is allocated on the run path.
 *
 * Data-dependent output sizes (NonZero, NonMaxSuppression, Unique, Compress,
 * an If whose branches differ in a dim): plan reports such a dim at its
 * upper bound, the capacity, and the caller allocates that much; run checks
 * the caller's outputs[k].shape against the capacity, computes, and then
 * writes the actual dims into outputs[k].shape (the caller's shape array,
 * so it must be writable), the data compact for those dims (row-major, at
 * the start of the buffer). Such a dim is printed with its size variable in
 * the arg info ("(2, nz)"). Before reusing an output tensor for another run,
 * set its shape back to the planned capacity. The workspace never depends
 * on a data-dependent size: it is planned at the capacities, so a bounded
 * function's fixed_workspace_bytes stays fixed.
 * Every entry point returns a status; on failure err->message names the
 * input, the dimension and the expected value.
 */
#ifndef RELAX_EDGE_ABI_H_
#define RELAX_EDGE_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: the runtime's exported functions are named rxe_<module>_<verb>
 * (rxe_tensor_check, rxe_dim_bind, rxe_threads_parallel_for, rxe_arena_alloc,
 * rxe_rpc_server_init, rxe_status_name). Two families keep a fixed form: the
 * portable math functions take libm's names behind the prefix (rxe_expf,
 * rxe_tanh: kernel.h; their single-precision helpers rxe_f32_<fn>), and the
 * library kernels are rxe_lib_<op>_<dtype> (kernels.h; s8 for the int8
 * kernels). */
/* 3: data-dependent output dims: plan reports the capacity, run writes the
 * actual dims into the outputs' shape arrays (above). */
#define RXE_ABI_VERSION 3u

/* Limits (compile-time configuration). */
#ifndef RXE_MAX_NDIM
#define RXE_MAX_NDIM 8
#endif
#ifndef RXE_ERROR_MESSAGE_BYTES
#define RXE_ERROR_MESSAGE_BYTES 256
#endif
#define RXE_WORKSPACE_ALIGNMENT 64

typedef enum {
  RXE_OK = 0,
  RXE_ERR_ARGUMENT_COUNT = 1, /* wrong number of inputs or outputs */
  RXE_ERR_DTYPE = 2,          /* an input or output has the wrong dtype */
  RXE_ERR_RANK = 3,           /* ... the wrong number of dimensions */
  RXE_ERR_SHAPE = 4,          /* a dimension contradicts the signature */
  RXE_ERR_BOUND = 5,          /* a size variable is outside its bounds */
  RXE_ERR_WORKSPACE = 6,      /* the workspace is too small or misaligned */
  RXE_ERR_NULL = 7,           /* a required pointer is NULL */
  RXE_ERR_NOT_FOUND = 8,      /* no function of that name */
  RXE_ERR_ABI = 9,            /* module built against another ABI version */
  RXE_ERR_INTERNAL = 10,
  RXE_ERR_INDEX = 11,         /* an index read from a tensor is out of range */
  RXE_ERR_PROTOCOL = 12,      /* a malformed RPC frame, or a request out of order */
  RXE_ERR_NO_MEMORY = 13,     /* an allocation failed (the RPC server's inputs, outputs, replies) */
  RXE_ERR_DEVICE = 14,        /* no usable Vulkan device, a requirement the device lacks, or a failed Vulkan call */
  RXE_ERR_TIMEOUT = 15,       /* a fence wait timed out */
  RXE_ERR_NO_VULKAN = 16      /* libvulkan could not be loaded */
} rxe_status_t;

/* DLPack-compatible dtype: code 0 int, 1 uint, 2 float, 4 bfloat, 6 bool. */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} rxe_dtype_t;

enum { RXE_DTYPE_INT = 0, RXE_DTYPE_UINT = 1, RXE_DTYPE_FLOAT = 2, RXE_DTYPE_BFLOAT = 4, RXE_DTYPE_BOOL = 6 };

/* DLPack DLTensor layout (device fields kept for compatibility; CPU = 1). */
typedef struct {
  void* data;
  int32_t device_type;
  int32_t device_id;
  int32_t ndim;
  rxe_dtype_t dtype;
  int64_t* shape;
  int64_t* strides; /* NULL: compact row-major (the only layout accepted) */
  uint64_t byte_offset;
} rxe_tensor_t;

typedef struct {
  rxe_status_t status;
  char message[RXE_ERROR_MESSAGE_BYTES];
} rxe_error_t;

/* One parameter or result of a function, as declared at compile time. */
typedef struct {
  const char* name;
  rxe_dtype_t dtype;
  int32_t ndim;
  const char* shape; /* printable, e.g. "(n, 784)" */
} rxe_arg_info_t;

typedef rxe_status_t (*rxe_plan_fn)(const rxe_tensor_t* inputs, int64_t* out_shapes,
                                    uint64_t* out_workspace_bytes, rxe_error_t* err);
typedef rxe_status_t (*rxe_run_fn)(const rxe_tensor_t* inputs, rxe_tensor_t* outputs,
                                   void* workspace, uint64_t workspace_bytes, rxe_error_t* err);
/* Workspace bytes for given values of the size variables (in size_names
 * order), without inputs: what a caller asks before the first run. */
typedef rxe_status_t (*rxe_workspace_fn)(const int64_t* size_values, uint64_t* out_bytes,
                                         rxe_error_t* err);

/* Per-kernel time of the last runs, kept by models built with RXE_PROFILE. */
typedef struct {
  const char* kernel; /* the kernel's symbol */
  const char* span;   /* where it comes from: the ONNX node, or the binding */
  uint64_t calls;
  uint64_t total_ns;
} rxe_profile_entry_t;

typedef struct {
  const char* name;
  int32_t num_inputs;
  int32_t num_outputs;
  const rxe_arg_info_t* inputs;
  const rxe_arg_info_t* outputs;
  rxe_plan_fn plan; /* out_shapes: the outputs' dims, concatenated (a data-dependent one: its capacity) */
  rxe_run_fn run;
  rxe_workspace_fn workspace;
  int32_t num_sizes;
  const char* const* size_names; /* the size variables, as workspace() takes them */
  /* The fixed arena when every size is bounded (a compile-time constant);
   * 0 when the workspace depends on unbounded sizes (ask workspace()). */
  uint64_t fixed_workspace_bytes;
  int32_t num_profile_entries;  /* 0 and NULL unless built with RXE_PROFILE */
  rxe_profile_entry_t* profile;
} rxe_function_t;

typedef struct {
  uint32_t abi_version;
  const char* name;
  int32_t num_functions;
  const rxe_function_t* functions;
} rxe_module_t;

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_ABI_H_ */
