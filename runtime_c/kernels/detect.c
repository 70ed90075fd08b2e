/* Data-dependent kernels: nonzero, non-max suppression, unique (see
 * relax_edge/kernels_detect.h). Serial, no allocation: the result goes to a
 * buffer planned at its capacity, the count to *out_count. Sorting is an
 * in-place heap sort of indices under a total order (ties by the lower
 * index), so the result never depends on the sort's stability. */
#include "relax_edge/kernels.h"
#include "relax_edge/runtime.h"

/* NMS compares IoUs exactly as the float32 reference does: no fused multiply-adds. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ---- nonzero ---- */

#define NONZERO_DEFINE(SUFFIX, T, TEST)                                                                     \
  RXE_LIB_NONZERO_DECL(SUFFIX, T) {                                                                         \
    const T* v = (const T*)x;                                                                               \
    int64_t dims[8] = {d0, d1, d2, d3, d4, d5, d6, d7};                                                     \
    int64_t coord[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                            \
    int64_t count = 0, i, j = 0, a;                                                                         \
    if (rank < 0 || rank > 8) return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "nonzero: rank %d", rank);   \
    for (i = 0; i < numel; ++i) count += (TEST) ? 1 : 0;                                                    \
    for (i = 0; i < numel; ++i) {                                                                           \
      if (TEST) {                                                                                           \
        for (a = 0; a < rank; ++a) out[a * count + j] = coord[a];                                           \
        ++j;                                                                                                \
      }                                                                                                     \
      for (a = rank - 1; a >= 0; --a) { /* the next element's coordinates, row-major */                     \
        if (++coord[a] < dims[a]) break;                                                                    \
        coord[a] = 0;                                                                                       \
      }                                                                                                     \
    }                                                                                                       \
    *out_count = count;                                                                                     \
    return RXE_OK;                                                                                          \
  }

NONZERO_DEFINE(f32, float, v[i] != 0.0f)
NONZERO_DEFINE(f64, double, v[i] != 0.0)
NONZERO_DEFINE(h16, uint16_t, (v[i] & 0x7fffu) != 0)
NONZERO_DEFINE(b8, uint8_t, v[i] != 0)
NONZERO_DEFINE(b16, uint16_t, v[i] != 0)
NONZERO_DEFINE(b32, uint32_t, v[i] != 0)
NONZERO_DEFINE(b64, uint64_t, v[i] != 0)

/* ---- index heap sort under before(ctx, a, b), a total order ---- */

typedef int (*before_fn)(const void* ctx, int64_t a, int64_t b);

static void sift_down(int64_t* idx, int64_t start, int64_t end, before_fn before, const void* ctx) {
  int64_t root = start;
  while (2 * root + 1 < end) {
    int64_t child = 2 * root + 1, top = root;
    if (before(ctx, idx[top], idx[child])) top = child; /* max-heap of the order: the last first */
    if (child + 1 < end && before(ctx, idx[top], idx[child + 1])) top = child + 1;
    if (top == root) return;
    int64_t t = idx[root];
    idx[root] = idx[top];
    idx[top] = t;
    root = top;
  }
}

static void sort_indices(int64_t* idx, int64_t n, before_fn before, const void* ctx) {
  int64_t i;
  for (i = n / 2 - 1; i >= 0; --i) sift_down(idx, i, n, before, ctx);
  for (i = n - 1; i > 0; --i) {
    int64_t t = idx[0];
    idx[0] = idx[i];
    idx[i] = t;
    sift_down(idx, 0, i, before, ctx);
  }
}

/* ---- non-max suppression ---- */

typedef struct {
  const float* s;
} nms_scores_t;

static int is_nan(float v) { return v != v; }

/* a before b: higher score, NaN after every number, ties by the lower index. */
static int nms_before(const void* ctx, int64_t a, int64_t b) {
  const float* s = ((const nms_scores_t*)ctx)->s;
  float x = s[a], y = s[b];
  if (is_nan(x) != is_nan(y)) return is_nan(y);
  if (!is_nan(x) && x != y) return x > y;
  return a < b;
}

static void corners(const float* box, int64_t center, float* c) {
  if (center) {
    c[0] = box[0] - box[2] / 2;
    c[1] = box[0] + box[2] / 2;
    c[2] = box[1] - box[3] / 2;
    c[3] = box[1] + box[3] / 2;
  } else {
    c[0] = box[1] < box[3] ? box[1] : box[3];
    c[1] = box[1] < box[3] ? box[3] : box[1];
    c[2] = box[0] < box[2] ? box[0] : box[2];
    c[3] = box[0] < box[2] ? box[2] : box[0];
  }
}

static int suppresses(const float* a, const float* b, int64_t center, float iou) {
  float p[4], q[4];
  corners(a, center, p);
  corners(b, center, q);
  float ix0 = p[0] > q[0] ? p[0] : q[0], ix1 = p[1] < q[1] ? p[1] : q[1];
  float iy0 = p[2] > q[2] ? p[2] : q[2], iy1 = p[3] < q[3] ? p[3] : q[3];
  if (ix1 <= ix0 || iy1 <= iy0) return 0;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float area_a = (p[1] - p[0]) * (p[3] - p[2]), area_b = (q[1] - q[0]) * (q[3] - q[2]);
  float uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni > iou;
}

rxe_status_t rxe_lib_nms_f32(const float* boxes, const float* scores, const float* thresholds, int64_t* out,
                             int64_t* out_count, void* scratch, int64_t batch, int64_t classes, int64_t n,
                             int64_t max_output, int64_t center, rxe_error_t* err) {
  int64_t* order = (int64_t*)scratch;
  int64_t* kept = order + n;
  float iou = thresholds[0], score_threshold = thresholds[1];
  int use_score = thresholds[2] != 0.0f;
  int64_t total = 0, b, c, i, j;
  (void)err;
  for (b = 0; b < batch; ++b) {
    const float* bx = boxes + b * n * 4;
    for (c = 0; c < classes; ++c) {
      nms_scores_t ctx = {scores + (b * classes + c) * n};
      int64_t m = 0, k = 0;
      for (i = 0; i < n; ++i) {
        if (!use_score || ctx.s[i] > score_threshold) order[m++] = i;
      }
      sort_indices(order, m, nms_before, &ctx);
      for (i = 0; i < m && k < max_output; ++i) {
        int keep = 1;
        for (j = 0; j < k && keep; ++j) keep = !suppresses(bx + order[i] * 4, bx + kept[j] * 4, center, iou);
        if (keep) {
          kept[k++] = order[i];
          out[total * 3] = b;
          out[total * 3 + 1] = c;
          out[total * 3 + 2] = order[i];
          ++total;
        }
      }
    }
  }
  *out_count = total;
  return RXE_OK;
}

/* ---- unique ---- */

typedef struct {
  const void* x;
  int64_t outer, n, inner;
} slices_t;

/* LESS(a, b) / SAME(a, b) on elements; floats: NaN after every number, NaNs equal. */
#define UNIQUE_DEFINE(SUFFIX, T, LESS, SAME)                                                                \
  static int cmp_##SUFFIX(const slices_t* v, int64_t a, int64_t b) {                                        \
    const T* x = (const T*)v->x;                                                                            \
    int64_t o, k;                                                                                           \
    for (o = 0; o < v->outer; ++o) {                                                                        \
      const T* pa = x + (o * v->n + a) * v->inner;                                                          \
      const T* pb = x + (o * v->n + b) * v->inner;                                                          \
      for (k = 0; k < v->inner; ++k) {                                                                      \
        if (!(SAME(pa[k], pb[k]))) return (LESS(pa[k], pb[k])) ? -1 : 1;                                    \
      }                                                                                                     \
    }                                                                                                       \
    return 0;                                                                                               \
  }                                                                                                         \
  static int before_##SUFFIX(const void* ctx, int64_t a, int64_t b) {                                       \
    int r = cmp_##SUFFIX((const slices_t*)ctx, a, b);                                                       \
    return r != 0 ? r < 0 : a < b;                                                                          \
  }                                                                                                         \
  static void copy_##SUFFIX(const slices_t* v, void* out, int64_t count, int64_t pos, int64_t from) {       \
    const T* x = (const T*)v->x;                                                                            \
    T* y = (T*)out;                                                                                         \
    int64_t o, k;                                                                                           \
    for (o = 0; o < v->outer; ++o) {                                                                        \
      for (k = 0; k < v->inner; ++k) y[(o * count + pos) * v->inner + k] = x[(o * v->n + from) * v->inner + k]; \
    }                                                                                                       \
  }                                                                                                         \
  static int same_##SUFFIX(const void* ctx, int64_t a, int64_t b) {                                         \
    return cmp_##SUFFIX((const slices_t*)ctx, a, b) == 0;                                                   \
  }                                                                                                         \
  RXE_LIB_UNIQUE_DECL(SUFFIX, T) {                                                                          \
    slices_t v = {x, outer, n, inner};                                                                      \
    return unique_run(&v, out, out_count, scratch, which, sorted, before_##SUFFIX, same_##SUFFIX,           \
                      copy_##SUFFIX, err);                                                                  \
  }

typedef int (*same_fn)(const void* ctx, int64_t a, int64_t b);
typedef void (*copy_fn)(const slices_t* v, void* out, int64_t count, int64_t pos, int64_t from);

static rxe_status_t unique_run(const slices_t* v, void* out, int64_t* out_count, void* scratch, int64_t which,
                               int64_t sorted, before_fn before, same_fn same, copy_fn copy, rxe_error_t* err) {
  int64_t n = v->n, i, groups = 0;
  int64_t* order = (int64_t*)scratch;  /* the slices in sorted order */
  int64_t* group = order + n;          /* slice -> its group (sorted order) */
  int64_t* first = group + n;          /* group -> its first slice */
  int64_t* counts = first + n;         /* group -> its slices */
  int64_t* pos = counts + n;           /* group -> its position in the result */
  int64_t* y = (int64_t*)out;
  if (which < 0 || which > 3) return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "unique: output %d", which);
  for (i = 0; i < n; ++i) order[i] = i;
  sort_indices(order, n, before, v);
  for (i = 0; i < n; ++i) {
    if (i == 0 || !same(v, order[i - 1], order[i])) {
      first[groups] = order[i]; /* ties by the lower index: the group's first slice */
      counts[groups++] = 0;
    }
    group[order[i]] = groups - 1;
    counts[groups - 1] += 1;
  }
  if (sorted) {
    for (i = 0; i < groups; ++i) pos[i] = i;
  } else {
    int64_t next = 0;
    for (i = 0; i < n; ++i) {
      if (first[group[i]] == i) pos[group[i]] = next++;
    }
  }
  for (i = 0; i < groups; ++i) {
    if (which == 0) copy(v, out, groups, pos[i], first[i]);
    if (which == 1) y[pos[i]] = first[i];
    if (which == 3) y[pos[i]] = counts[i];
  }
  if (which == 2) {
    for (i = 0; i < n; ++i) y[i] = pos[group[i]];
  }
  *out_count = groups;
  return RXE_OK;
}

#define FLOAT_LESS(a, b) ((a) < (b) || ((a) == (a) && (b) != (b)))
#define FLOAT_SAME(a, b) ((a) == (b) || ((a) != (a) && (b) != (b)))
#define INT_LESS(a, b) ((a) < (b))
#define INT_SAME(a, b) ((a) == (b))

UNIQUE_DEFINE(f32, float, FLOAT_LESS, FLOAT_SAME)
UNIQUE_DEFINE(f64, double, FLOAT_LESS, FLOAT_SAME)
UNIQUE_DEFINE(i8, int8_t, INT_LESS, INT_SAME)
UNIQUE_DEFINE(i16, int16_t, INT_LESS, INT_SAME)
UNIQUE_DEFINE(i32, int32_t, INT_LESS, INT_SAME)
UNIQUE_DEFINE(i64, int64_t, INT_LESS, INT_SAME)
UNIQUE_DEFINE(u8, uint8_t, INT_LESS, INT_SAME)
UNIQUE_DEFINE(u16, uint16_t, INT_LESS, INT_SAME)
UNIQUE_DEFINE(u32, uint32_t, INT_LESS, INT_SAME)
UNIQUE_DEFINE(u64, uint64_t, INT_LESS, INT_SAME)
