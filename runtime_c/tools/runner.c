/*
 * runner: runs a compiled model on tensors read from a file, writes the
 * outputs to a file. Hosted C99 (stdio, malloc). Build it with the model's
 * sources and -DRXE_MODULE=<prefix>_module, or without it and with
 * tools/linked_module.c compiled with it (relax_edge/linked_module.h).
 *
 *   runner [-f FUNCTION] [--threads N] [-t WARMUP REPEAT] [-p] INPUTS.rxt OUTPUTS.rxt
 *   runner [-f FUNCTION] -w SIZE...      prints "RXE_WORKSPACE <bytes>" for those sizes
 *   runner [-f FUNCTION] -g REQUEST.rxt RESULT.rxt
 *                                        generates with a KV-cache decoder's step
 *                                        function (default "step"; relax_edge/generate.h)
 *
 * A generate request holds four tensors: the prompt (int64, n), int64
 * (max_new_tokens, top_k, seed), float32 (temperature, top_p) and the stop
 * tokens (int64, k). The result: the new tokens (int64), each token's step
 * time (uint64 ns; 0 where the platform has no clock) and int64
 * (prompt_tokens, prefill_ns, decode_ns, stopped_by). It is written even when
 * generation ends in an error (the tokens made before it), then the error is
 * printed as for a run. The state, workspace and scratch are allocated once,
 * before the prompt; "RXE_MEMORY state=S workspace=W scratch=C" says how much.
 *
 * --threads N (1..RXE_MAX_THREADS; else RXE_NUM_THREADS from the
 * environment; else 1) sizes the runtime's thread pool. A runtime built
 * without threads (RXE_NO_THREADS, e.g. on a microcontroller) runs on one
 * thread and says so on stderr when more were asked for.
 *
 * Tensor file: "RXT1", uint32 count, then per tensor: uint8 dtype code,
 * uint8 bits, uint16 ndim, int64 dims[ndim], the data (little-endian,
 * compact row-major). Prints "RXE_OK" on success; on a model error prints
 * "RXE_ERROR <status>: <message>" to stderr and exits with 3 (usage or I/O
 * errors exit with 2).
 *
 * On a microcontroller under semihosting (RXE_SEMIHOST), the command line
 * comes from the host through SYS_GET_CMDLINE and files are the host's.
 *
 * -t WARMUP REPEAT runs the model WARMUP times, then REPEAT timed times,
 * printing "RXE_TIME <ns>" for each timed run; -p then runs it once more
 * with the per-kernel profiler (a model built with RXE_PROFILE) and prints
 * "RXE_PROFILE_RUN <ns>" and one "RXE_PROFILE <calls> <total_ns>
 * <kernel>\t<node>" line per row. The outputs are those of the last run.
 * The clock (rxe_profile_now_ns, defined here): CLOCK_MONOTONIC where there
 * is an OS; on a Cortex-M the SysTick counter of the core clock,
 * RXE_SYSTICK_HZ (default 25 MHz, the MPS2 boards') with its wraps counted
 * in its interrupt, so that under `qemu-system-arm -icount shift=0` (one
 * instruction per virtual nanosecond) a time in ns is an instruction count,
 * to the SysTick's resolution (1e9 / RXE_SYSTICK_HZ instructions); on a real
 * board with RXE_CLOCK_DWT, the DWT cycle counter at RXE_CORE_HZ. Without
 * any of these the clock reads 0.
 */
#if !defined(RXE_SEMIHOST) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200112L /* clock_gettime under -std=c99 */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax_edge/generate.h"
#include "relax_edge/linked_module.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

#ifdef RXE_SEMIHOST
#include <semihost.h>

/* argv from the semihosting command line ("prog in.rxt out.rxt") */
static int semihost_args(char*** out_argv) {
  static char line[512];
  static char* argv[8];
  int argc = 0;
  char* p = line;
  if (sys_semihost_get_cmdline(line, (int)sizeof(line)) != 0) return 0;
  while (*p && argc < 8) {
    while (*p == ' ') *p++ = '\0';
    if (!*p) break;
    argv[argc++] = p;
    while (*p && *p != ' ') ++p;
  }
  *out_argv = argv;
  return argc;
}
#endif

#if !defined(RXE_SEMIHOST) && (defined(__unix__) || defined(__APPLE__))
#include <time.h>

static void clock_start(void) {}

uint64_t rxe_profile_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#elif defined(RXE_SEMIHOST) && defined(RXE_CLOCK_DWT)
#ifndef RXE_CORE_HZ
#error "RXE_CLOCK_DWT needs the core clock: -DRXE_CORE_HZ=<Hz>"
#endif
#define DEMCR (*(volatile uint32_t*)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t*)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t*)0xE0001004u)
static uint64_t s_cycles;
static uint32_t s_last;

static void clock_start(void) {
  DEMCR |= 1u << 24; /* TRCENA */
  DWT_CYCCNT = 0;
  DWT_CTRL |= 1u; /* CYCCNTENA */
}

/* 32-bit cycles widened: read at least once per wrap (each kernel's start and end are) */
uint64_t rxe_profile_now_ns(void) {
  const uint32_t now = DWT_CYCCNT;
  s_cycles += (uint32_t)(now - s_last);
  s_last = now;
  return s_cycles * 1000000000u / RXE_CORE_HZ;
}
#elif defined(RXE_SEMIHOST) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#ifndef RXE_SYSTICK_HZ
#define RXE_SYSTICK_HZ 25000000u
#endif
#define SYST_CSR (*(volatile uint32_t*)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t*)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t*)0xE000E018u)
#define SYST_MAX 0x00FFFFFFu
static volatile uint32_t s_wraps;

void arm_systick_isr(void); /* the C library's vector table names it (weak there) */
void arm_systick_isr(void) { ++s_wraps; }

static void clock_start(void) {
  SYST_RVR = SYST_MAX;
  SYST_CVR = 0;
  SYST_CSR = 7u; /* the core clock, the wrap interrupt, enabled */
}

#define ICSR (*(volatile uint32_t*)0xE000ED04u)
#define ICSR_PENDSTSET (1u << 26)

uint64_t rxe_profile_now_ns(void) {
  uint32_t seen, wraps, value;
  do { /* a wrap counted between the reads: read again */
    seen = s_wraps;
    wraps = seen;
    value = SYST_CVR;
    if (ICSR & ICSR_PENDSTSET) { /* wrapped, its interrupt not taken yet: count it, read after it */
      wraps += 1;
      value = SYST_CVR;
    }
  } while (seen != s_wraps);
  return (((uint64_t)wraps << 24) + (SYST_MAX - value)) * (1000000000u / RXE_SYSTICK_HZ);
}
#else
static void clock_start(void) {}

uint64_t rxe_profile_now_ns(void) { return 0; }
#endif

typedef struct {
  rxe_tensor_t* tensors;
  int64_t* dims;
  void** blocks;
  uint32_t count;
} tensor_list_t;

static uint64_t numel(const rxe_tensor_t* t) {
  uint64_t n = 1;
  int32_t d;
  for (d = 0; d < t->ndim; ++d) n *= (uint64_t)t->shape[d];
  return n;
}

static int read_exact(FILE* f, void* dst, size_t bytes) { return fread(dst, 1, bytes, f) == bytes; }

/* Bytes of a tensor's data into *out_bytes; 0 when a dimension is negative
 * or the size does not fit in memory. */
static int data_bytes(const rxe_tensor_t* t, uint64_t* out_bytes) {
  uint64_t n = t->dtype.bits / 8u;
  int32_t d;
  for (d = 0; d < t->ndim; ++d) {
    if (t->shape[d] < 0 || (t->shape[d] > 0 && n > (uint64_t)SIZE_MAX / 2 / (uint64_t)t->shape[d])) return 0;
    n *= (uint64_t)t->shape[d];
  }
  *out_bytes = n;
  return 1;
}

/* malloc that says what it could not allocate */
static void* allocate(uint64_t bytes, const char* what, uint32_t index) {
  void* p = bytes <= (uint64_t)SIZE_MAX ? malloc(bytes > 0 ? (size_t)bytes : 1) : NULL;
  if (p == NULL)
    fprintf(stderr, "out of memory: %llu bytes for %s %u\n", (unsigned long long)bytes, what, (unsigned)index);
  return p;
}

static int read_tensors(const char* path, tensor_list_t* out) {
  FILE* f = fopen(path, "rb");
  char magic[4];
  uint32_t i;
  if (f == NULL) return 0;
  if (!read_exact(f, magic, 4) || memcmp(magic, "RXT1", 4) != 0 || !read_exact(f, &out->count, 4) ||
      out->count > 1024) {
    fclose(f);
    return 0;
  }
  out->tensors = (rxe_tensor_t*)calloc(out->count + 1, sizeof(rxe_tensor_t));
  out->dims = (int64_t*)calloc((size_t)(out->count + 1) * RXE_MAX_NDIM, sizeof(int64_t));
  out->blocks = (void**)calloc(out->count + 1, sizeof(void*));
  if (out->tensors == NULL || out->dims == NULL || out->blocks == NULL) {
    fprintf(stderr, "out of memory for %u tensor descriptors\n", (unsigned)out->count);
    fclose(f);
    return 0;
  }
  for (i = 0; i < out->count; ++i) {
    rxe_tensor_t* t = &out->tensors[i];
    uint8_t code, bits;
    uint16_t ndim;
    uint64_t bytes;
    if (!read_exact(f, &code, 1) || !read_exact(f, &bits, 1) || !read_exact(f, &ndim, 2) || ndim > RXE_MAX_NDIM) {
      fclose(f);
      return 0;
    }
    t->ndim = ndim;
    t->dtype.code = code;
    t->dtype.bits = bits;
    t->dtype.lanes = 1;
    t->device_type = 1;
    t->shape = out->dims + (size_t)i * RXE_MAX_NDIM;
    if (ndim > 0 && !read_exact(f, t->shape, sizeof(int64_t) * ndim)) {
      fclose(f);
      return 0;
    }
    if (!data_bytes(t, &bytes)) {
      fprintf(stderr, "input %u: the shape is negative or too large\n", (unsigned)i);
      fclose(f);
      return 0;
    }
    out->blocks[i] = allocate(bytes, "input", i);
    t->data = out->blocks[i];
    if (t->data == NULL || (bytes > 0 && !read_exact(f, t->data, (size_t)bytes))) {
      fclose(f);
      return 0;
    }
  }
  fclose(f);
  return 1;
}

static int write_tensors(const char* path, const rxe_tensor_t* tensors, uint32_t count) {
  FILE* f = fopen(path, "wb");
  uint32_t i;
  int ok;
  if (f == NULL) return 0;
  ok = fwrite("RXT1", 1, 4, f) == 4 && fwrite(&count, 4, 1, f) == 1;
  for (i = 0; ok && i < count; ++i) {
    const rxe_tensor_t* t = &tensors[i];
    uint16_t ndim = (uint16_t)t->ndim;
    size_t bytes = (size_t)(numel(t) * (t->dtype.bits / 8u));
    ok = fwrite(&t->dtype.code, 1, 1, f) == 1 && fwrite(&t->dtype.bits, 1, 1, f) == 1 && fwrite(&ndim, 2, 1, f) == 1 &&
         (ndim == 0 || fwrite(t->shape, sizeof(int64_t), ndim, f) == ndim) && fwrite(t->data, 1, bytes, f) == bytes;
  }
  return (fclose(f) == 0) && ok;
}

static void free_tensors(tensor_list_t* list) {
  uint32_t i;
  for (i = 0; list->blocks != NULL && i < list->count; ++i) free(list->blocks[i]);
  free(list->tensors);
  free(list->dims);
  free(list->blocks);
}

/* A count of runs (0..1000000) into *out; 0 if bad. */
static int count_arg(const char* text, const char* what, long* out) {
  char* end;
  long n = strtol(text, &end, 10);
  if (end == text || *end != '\0' || n < 0 || n > 1000000) {
    fprintf(stderr, "%s must be an integer in [0, 1000000], got '%s'\n", what, text);
    return 0;
  }
  *out = n;
  return 1;
}

/* The thread count from --threads or RXE_NUM_THREADS (`what`); 0 if bad. */
static int set_threads(const char* text, const char* what) {
  char* end;
  long n = strtol(text, &end, 10);
  if (end == text || *end != '\0' || n < 1 || n > RXE_MAX_THREADS) {
    fprintf(stderr, "%s must be an integer in [1, %d], got '%s'\n", what, RXE_MAX_THREADS, text);
    return 0;
  }
  rxe_threads_set_count((int)n);
  if (rxe_threads_get_count() < n)
    fprintf(stderr, "note: %s %ld ignored: the runtime is built without threads (RXE_NO_THREADS)\n", what, n);
  return 1;
}

static int model_error(rxe_status_t st, const rxe_error_t* err) {
  fprintf(stderr, "RXE_ERROR %s: %s\n", rxe_status_name(st), err->message);
  return 3;
}

/* 64-byte aligned memory from malloc; *block is what to free */
static void* aligned_block(uint64_t bytes, void** block, const char* what) {
  if (bytes > (uint64_t)SIZE_MAX - RXE_WORKSPACE_ALIGNMENT ||
      (*block = malloc((size_t)bytes + RXE_WORKSPACE_ALIGNMENT)) == NULL) {
    fprintf(stderr, "out of memory: %llu bytes of %s\n", (unsigned long long)bytes, what);
    return NULL;
  }
  return (void*)(((uintptr_t)*block + RXE_WORKSPACE_ALIGNMENT - 1) & ~(uintptr_t)(RXE_WORKSPACE_ALIGNMENT - 1));
}

static int is_tensor(const rxe_tensor_t* t, uint8_t code, uint8_t bits, int64_t n) {
  return t->dtype.code == code && t->dtype.bits == bits && t->ndim == 1 && (n < 0 || t->shape[0] == n);
}

static int generate_main(const char* fname, const char* request, const char* result) {
  tensor_list_t in;
  rxe_decoder_t d;
  rxe_generate_config_t config;
  rxe_generate_stats_t stats;
  rxe_tensor_t outs[3];
  int64_t dims[3], info[4];
  const int64_t* knobs;
  const float* floats;
  void *state_block = NULL, *ws_block = NULL, *scratch_block = NULL;
  void *state, *ws, *scratch;
  int64_t* tokens = NULL;
  uint64_t* token_ns = NULL;
  uint64_t scratch_bytes;
  rxe_error_t err;
  rxe_status_t st;
  int rc = 2, k;
  memset(&in, 0, sizeof(in));
  memset(&config, 0, sizeof(config));
  memset(&stats, 0, sizeof(stats));
  if (!read_tensors(request, &in)) {
    fprintf(stderr, "cannot read tensors from %s\n", request);
    goto done;
  }
  if (in.count != 4 || !is_tensor(&in.tensors[0], RXE_DTYPE_INT, 64, -1) ||
      !is_tensor(&in.tensors[1], RXE_DTYPE_INT, 64, 3) || !is_tensor(&in.tensors[2], RXE_DTYPE_FLOAT, 32, 2) ||
      !is_tensor(&in.tensors[3], RXE_DTYPE_INT, 64, -1) || in.tensors[0].shape[0] > INT32_MAX ||
      in.tensors[3].shape[0] > INT32_MAX) {
    fprintf(stderr, "%s: a generate request is the prompt (int64, n), int64 (max_new_tokens, top_k, seed), "
            "float32 (temperature, top_p) and the stop tokens (int64, k)\n", request);
    goto done;
  }
  knobs = (const int64_t*)in.tensors[1].data;
  floats = (const float*)in.tensors[2].data;
  if (knobs[0] < 0 || knobs[0] > INT32_MAX || knobs[1] < INT32_MIN || knobs[1] > INT32_MAX) {
    fprintf(stderr, "RXE_ERROR RXE_ERR_BOUND: max_new_tokens %lld or top_k %lld is out of range\n",
            (long long)knobs[0], (long long)knobs[1]);
    rc = 3;
    goto done;
  }
  config.max_new_tokens = (int32_t)knobs[0];
  config.sampling.top_k = (int32_t)knobs[1];
  config.sampling.seed = (uint64_t)knobs[2];
  config.sampling.temperature = floats[0];
  config.sampling.top_p = floats[1];
  config.stop_tokens = (const int64_t*)in.tensors[3].data;
  config.num_stop_tokens = (int32_t)in.tensors[3].shape[0];
  if ((st = rxe_decoder_init(&d, RXE_LINKED_MODULE, fname, &err)) != RXE_OK) {
    rc = model_error(st, &err);
    goto done;
  }
  scratch_bytes = rxe_decoder_scratch_bytes(&d);
  tokens = (int64_t*)calloc((size_t)config.max_new_tokens + 1, sizeof(int64_t));
  token_ns = (uint64_t*)calloc((size_t)config.max_new_tokens + 1, sizeof(uint64_t));
  if (tokens == NULL || token_ns == NULL || (state = aligned_block(d.state_bytes, &state_block, "state")) == NULL ||
      (ws = aligned_block(d.workspace_bytes, &ws_block, "workspace")) == NULL ||
      (scratch = aligned_block(scratch_bytes, &scratch_block, "scratch")) == NULL) {
    fprintf(stderr, "out of memory for generation\n");
    goto done;
  }
  printf("RXE_MEMORY state=%llu workspace=%llu scratch=%llu\n", (unsigned long long)d.state_bytes,
         (unsigned long long)d.workspace_bytes, (unsigned long long)scratch_bytes);
  st = rxe_generate(&d, (const int64_t*)in.tensors[0].data, (int32_t)in.tensors[0].shape[0], &config, state,
                    d.state_bytes, ws, d.workspace_bytes, scratch, scratch_bytes, tokens, token_ns, &stats, NULL,
                    NULL, &err);
  dims[0] = dims[1] = stats.num_tokens;
  dims[2] = 4;
  info[0] = stats.prompt_tokens;
  info[1] = (int64_t)stats.prefill_ns;
  info[2] = (int64_t)stats.decode_ns;
  info[3] = stats.stopped_by;
  memset(outs, 0, sizeof(outs));
  for (k = 0; k < 3; ++k) {
    outs[k].ndim = 1;
    outs[k].shape = &dims[k];
    outs[k].device_type = 1;
    outs[k].dtype.code = k == 1 ? RXE_DTYPE_UINT : RXE_DTYPE_INT;
    outs[k].dtype.bits = 64;
    outs[k].dtype.lanes = 1;
  }
  outs[0].data = tokens;
  outs[1].data = token_ns;
  outs[2].data = info;
  if (!write_tensors(result, outs, 3)) {
    fprintf(stderr, "cannot write %s\n", result);
    goto done;
  }
  if (st != RXE_OK) {
    rc = model_error(st, &err);
    goto done;
  }
  printf("RXE_OK\n");
  rc = 0;
done:
  free(tokens);
  free(token_ns);
  free(state_block);
  free(ws_block);
  free(scratch_block);
  free_tensors(&in);
  return rc;
}

int main(int argc, char** argv) {
  const char* fname = "main";
  const char* threads = getenv("RXE_NUM_THREADS");
  const char* threads_from = "RXE_NUM_THREADS";
  const rxe_function_t* fn;
  tensor_list_t in, out;
  uint64_t ws_bytes = 0, total_dims = 0;
  int64_t* planned = NULL;
  void* ws_block = NULL;
  void* workspace;
  rxe_error_t err;
  rxe_status_t st;
  int32_t k;
  int argi = 1, rc = 0, profile = 0;
  long warmup = 0, repeat = 0, r;
#ifdef RXE_SEMIHOST
  argc = semihost_args(&argv);
#endif
  for (; argc > argi + 1; argi += 2) {
    if (strcmp(argv[argi], "-f") == 0) {
      fname = argv[argi + 1];
    } else if (strcmp(argv[argi], "--threads") == 0) {
      threads = argv[argi + 1];
      threads_from = "--threads";
    } else {
      break;
    }
  }
  for (;;) { /* -t WARMUP REPEAT, -p */
    if (argc > argi + 2 && strcmp(argv[argi], "-t") == 0) {
      if (!count_arg(argv[argi + 1], "-t WARMUP", &warmup) || !count_arg(argv[argi + 2], "-t REPEAT", &repeat))
        return 2;
      argi += 3;
    } else if (argc > argi && strcmp(argv[argi], "-p") == 0) {
      profile = 1;
      argi += 1;
    } else {
      break;
    }
  }
  clock_start();
  if (threads != NULL && *threads != '\0' && !set_threads(threads, threads_from)) return 2;
  if ((st = rxe_module_check(RXE_LINKED_MODULE, &err)) != RXE_OK) return model_error(st, &err);
  fn = rxe_module_find(RXE_LINKED_MODULE, fname);
  if (fn == NULL) {
    fprintf(stderr, "RXE_ERROR RXE_ERR_NOT_FOUND: no function %s\n", fname);
    return 3;
  }
  if (argc > argi && strcmp(argv[argi], "-g") == 0) {
    if (argc - argi != 3) {
      fprintf(stderr, "usage: %s [-f FUNCTION] -g REQUEST.rxt RESULT.rxt\n", argv[0]);
      return 2;
    }
    return generate_main(strcmp(fname, "main") == 0 ? "step" : fname, argv[argi + 1], argv[argi + 2]);
  }
  if (argc > argi && strcmp(argv[argi], "-w") == 0) {
    int64_t values[16];
    uint64_t bytes = 0;
    int32_t i;
    if (argc - argi - 1 != fn->num_sizes || fn->num_sizes > 16) {
      fprintf(stderr, "RXE_ERROR RXE_ERR_ARGUMENT_COUNT: -w takes %d sizes\n", (int)fn->num_sizes);
      return 3;
    }
    for (i = 0; i < fn->num_sizes; ++i) {
      const char* text = argv[argi + 1 + i];
      char* end;
      values[i] = strtoll(text, &end, 10);
      if (end == text || *end != '\0') {
        fprintf(stderr, "RXE_ERROR RXE_ERR_ARGUMENT_COUNT: -w: %s is '%s', not an integer\n", fn->size_names[i], text);
        return 3;
      }
    }
    if ((st = fn->workspace(values, &bytes, &err)) != RXE_OK) return model_error(st, &err);
    printf("RXE_WORKSPACE %llu\n", (unsigned long long)bytes);
    return 0;
  }
  if (argc - argi != 2) {
    fprintf(stderr, "usage: %s [-f FUNCTION] [--threads N] [-t WARMUP REPEAT] [-p] INPUTS.rxt OUTPUTS.rxt | "
            "-w SIZE...\n", argv[0]);
    return 2;
  }
  memset(&in, 0, sizeof(in));
  memset(&out, 0, sizeof(out));
  if (!read_tensors(argv[argi], &in)) {
    fprintf(stderr, "cannot read tensors from %s\n", argv[argi]);
    free_tensors(&in);
    return 2;
  }
  if ((int32_t)in.count != fn->num_inputs) {
    /* worded as the Python client words it: "takes 2 inputs (x, y), got 1" */
    fprintf(stderr, "RXE_ERROR RXE_ERR_ARGUMENT_COUNT: takes %d inputs (", (int)fn->num_inputs);
    for (k = 0; k < fn->num_inputs; ++k) fprintf(stderr, "%s%s", k ? ", " : "", fn->inputs[k].name);
    fprintf(stderr, "), got %u\n", (unsigned)in.count);
    free_tensors(&in);
    return 3;
  }
  for (k = 0; k < fn->num_outputs; ++k) total_dims += (uint64_t)fn->outputs[k].ndim;
  out.count = (uint32_t)fn->num_outputs;
  out.dims = (int64_t*)calloc(total_dims + 1, sizeof(int64_t));
  out.tensors = (rxe_tensor_t*)calloc(out.count + 1, sizeof(rxe_tensor_t));
  out.blocks = (void**)calloc(out.count + 1, sizeof(void*));
  if (out.dims == NULL || out.tensors == NULL || out.blocks == NULL) {
    fprintf(stderr, "out of memory for %u output descriptors\n", (unsigned)out.count);
    rc = 2;
    goto done;
  }
  st = fn->plan(in.tensors, out.dims, &ws_bytes, &err);
  if (st != RXE_OK) {
    rc = model_error(st, &err);
    goto done;
  }
  total_dims = 0;
  for (k = 0; k < fn->num_outputs; ++k) {
    rxe_tensor_t* t = &out.tensors[k];
    uint64_t bytes;
    t->ndim = fn->outputs[k].ndim;
    t->dtype = fn->outputs[k].dtype;
    t->device_type = 1;
    t->shape = out.dims + total_dims;
    total_dims += (uint64_t)t->ndim;
    if (!data_bytes(t, &bytes) || (out.blocks[k] = allocate(bytes, "output", (uint32_t)k)) == NULL) {
      rc = 2;
      goto done;
    }
    t->data = out.blocks[k];
  }
  if (ws_bytes > (uint64_t)SIZE_MAX - RXE_WORKSPACE_ALIGNMENT ||
      (ws_block = malloc((size_t)ws_bytes + RXE_WORKSPACE_ALIGNMENT)) == NULL) {
    fprintf(stderr, "out of memory: %llu bytes of workspace\n", (unsigned long long)ws_bytes);
    rc = 2;
    goto done;
  }
  workspace = (void*)(((uintptr_t)ws_block + RXE_WORKSPACE_ALIGNMENT - 1) & ~(uintptr_t)(RXE_WORKSPACE_ALIGNMENT - 1));
  if (profile && (fn->profile == NULL || fn->num_profile_entries <= 0)) {
    fprintf(stderr, "RXE_ERROR RXE_ERR_NOT_FOUND: function %s was built without the profiler (RXE_PROFILE)\n",
            fname);
    rc = 3;
    goto done;
  }
  if ((planned = (int64_t*)calloc(total_dims + 1, sizeof(int64_t))) == NULL) {
    rc = 2;
    goto done;
  }
  memcpy(planned, out.dims, (size_t)total_dims * sizeof(int64_t));
  /* outputs at the planned shapes (a data-dependent dim at its capacity); the run writes the actual dims
   * back into them (ABI 3), so the tensor files hold the actual shapes and only their bytes */
  for (r = 0; r < warmup + repeat + profile + (warmup + repeat + profile == 0); ++r) {
    const int profiled = profile && r == warmup + repeat;
    uint64_t t0;
    if (profiled) {
      for (k = 0; k < fn->num_profile_entries; ++k) fn->profile[k].calls = fn->profile[k].total_ns = 0;
    }
    memcpy(out.dims, planned, (size_t)total_dims * sizeof(int64_t));
    t0 = rxe_profile_now_ns();
    st = fn->run(in.tensors, out.tensors, workspace, ws_bytes, &err);
    t0 = rxe_profile_now_ns() - t0;
    if (st != RXE_OK) {
      rc = model_error(st, &err);
      goto done;
    }
    if (r >= warmup && r < warmup + repeat) printf("RXE_TIME %llu\n", (unsigned long long)t0);
    if (profiled) {
      printf("RXE_PROFILE_RUN %llu\n", (unsigned long long)t0);
      for (k = 0; k < fn->num_profile_entries; ++k)
        printf("RXE_PROFILE %llu %llu %s\t%s\n", (unsigned long long)fn->profile[k].calls,
               (unsigned long long)fn->profile[k].total_ns, fn->profile[k].kernel, fn->profile[k].span);
    }
  }
  if (!write_tensors(argv[argi + 1], out.tensors, out.count)) {
    fprintf(stderr, "cannot write %s\n", argv[argi + 1]);
    rc = 2;
    goto done;
  }
  printf("RXE_OK\n");
done:
  free(planned);
  free(ws_block);
  free_tensors(&in);
  free_tensors(&out);
  return rc;
}
