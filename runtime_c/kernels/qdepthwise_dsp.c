/* rxe_lib_qdepthwise_conv2d_s8's Cortex-M DSP path (qdepthwise_dsp.h), the
 * same bits as the portable loop in qconv.c. Per channel:
 * - the window's input as int16 x - x_zero (0 outside) in scratch, split by
 *   row and column phase (index % stride) into planes, as qconv.c lays them
 *   out, so that the outputs of a row and the taps of a kernel row in one
 *   plane read consecutive values; a stride-1 row is widened 4 bytes at a
 *   time (SXTB16 / UXTB16, SSUB16 for the zero point, PKHBT and PKHTB to
 *   put the pairs back in order);
 * - each output row's int32 sums: two taps at once by SMLAD on a word of
 *   two int16 wherever their plane offsets follow one another. A 3x3 kernel
 *   of column stride and dilation 1 takes two outputs at once with the
 *   weights in registers: per kernel row two words (4 values) and
 *   SMLAD, SMLABT, SMLATB, SMLAD, 4 instructions for 6 multiply-adds.
 *   Other kernels (and an odd row's last output) run one output at a time
 *   over a table of tap pairs and single taps.
 * - the sums, up to DWD_BLOCK of a row at a time, requantized by
 *   rxe_qint8_requantize_bytes (qgemm.c).
 * Stack: the tables (32 pairs, 64 single taps, 8 bytes each) and DWD_BLOCK
 * int32 sums, about 1.3 KiB with the frame (the bound in kernels_qint8.h
 * holds). */
#include "qdepthwise_dsp.h"

#if defined(__ARM_FEATURE_DSP) && !defined(__ARM_NEON)
#include <arm_acle.h>

#define DWD_MAX_TAPS 64
#define DWD_BLOCK 128 /* sums of one row at a time; even */

#if defined(__GNUC__)
#define DWD_NOINLINE __attribute__((noinline)) /* registers of its own, not spilled for the caller's */
#define DWD_INLINE static inline __attribute__((always_inline))
#else
#define DWD_NOINLINE
#define DWD_INLINE static inline
#endif

/* A tap pair (two int16 weights, the first in the low half) or a single tap, at a plane offset. */
typedef struct {
  int32_t at;
  int32_t w;
} dwd_tap_t;

static inline uint32_t dwd_load(const int16_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4); /* LDR: unaligned addresses are fine on the M profile */
  return v;
}

static inline void dwd_store(int16_t* p, uint32_t v) { __builtin_memcpy(p, &v, 4); }

static inline uint32_t dwd_pack(int32_t lo, int32_t hi) { return (uint32_t)(uint16_t)lo | (uint32_t)hi << 16; }

/* Bytes 1 and 3 of v, sign- or zero-extended to an int16 pair (the rotation inside the instruction). */
static inline uint32_t dwd_odd_s(uint32_t v) {
  uint32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

static inline uint32_t dwd_odd_u(uint32_t v) {
  uint32_t r;
  __asm__("uxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

/* (lo's low half, hi's low half) and (lo's high half, hi's high half): PKHBT, PKHTB. */
static inline uint32_t dwd_low_halves(uint32_t lo, uint32_t hi) {
  uint32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
  return r;
}

static inline uint32_t dwd_high_halves(uint32_t lo, uint32_t hi) {
  uint32_t r;
  __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(hi), "r"(lo));
  return r;
}

/* dst[j] = src[j * step] - xz for j < count, the bytes int8 or (is_unsigned) uint8; with step 1 four at a
 * time: the even bytes' and the odd bytes' int16 pairs minus (xz, xz) (within int16), put back in order. */
DWD_INLINE void dwd_widen(int16_t* dst, const uint8_t* src, int32_t count, int32_t step, int32_t xz, int is_unsigned) {
  int16x2_t zz = (int16x2_t)dwd_pack(xz, xz);
  uint32_t u, e, o;
  int32_t j = 0;
  if (step == 1 && is_unsigned) {
    for (; j + 4 <= count; j += 4) {
      __builtin_memcpy(&u, src + j, 4);
      e = (uint32_t)__ssub16((int16x2_t)__uxtb16(u), zz);
      o = (uint32_t)__ssub16((int16x2_t)dwd_odd_u(u), zz);
      dwd_store(dst + j, dwd_low_halves(e, o));
      dwd_store(dst + j + 2, dwd_high_halves(e, o));
    }
  } else if (step == 1) {
    for (; j + 4 <= count; j += 4) {
      __builtin_memcpy(&u, src + j, 4);
      e = (uint32_t)__ssub16(__sxtb16((int8x4_t)u), zz);
      o = (uint32_t)__ssub16((int16x2_t)dwd_odd_s(u), zz);
      dwd_store(dst + j, dwd_low_halves(e, o));
      dwd_store(dst + j + 2, dwd_high_halves(e, o));
    }
  }
  for (; j < count; ++j) {
    int32_t v = is_unsigned ? (int32_t)src[j * step] : (int32_t)(int8_t)src[j * step];
    dst[j] = (int16_t)(v - xz);
  }
}

DWD_INLINE void dwd_zero(int16_t* dst, int32_t count) {
  int32_t j;
  for (j = 0; j < count; ++j) dst[j] = 0;
}

/* One phase plane, rows x cols int16: row r from input row iy0 + r * sh (zeros outside the input), its
 * columns [j0, j1) from input columns ix0 + j * sw (zeros outside [j0, j1)); inlined with is_unsigned
 * and sw == 1 constant where it can be. */
DWD_INLINE void dwd_fill_rows(int16_t* dst, const uint8_t* src, int32_t rows, int32_t cols, int32_t iy0, int32_t sh,
                              int32_t in_h, int32_t in_w, int32_t ix0, int32_t sw, int32_t j0, int32_t j1, int32_t xz,
                              int is_unsigned) {
  int32_t r;
  for (r = 0; r < rows; ++r, dst += cols) {
    int32_t iy = iy0 + r * sh;
    if (iy < 0 || iy >= in_h) {
      dwd_zero(dst, cols);
      continue;
    }
    dwd_zero(dst, j0);
    dwd_zero(dst + j1, cols - j1);
    dwd_widen(dst + j0, src + iy * in_w + ix0 + j0 * sw, j1 - j0, sw, xz, is_unsigned);
  }
}

static DWD_NOINLINE void dwd_fill_plane(int16_t* dst, const uint8_t* src, int32_t rows, int32_t cols, int32_t iy0,
                                        int32_t sh, int32_t in_h, int32_t in_w, int32_t ix0, int32_t sw, int32_t j0,
                                        int32_t j1, int32_t xz, int is_unsigned) {
  if (sw == 1 && is_unsigned)
    dwd_fill_rows(dst, src, rows, cols, iy0, sh, in_h, in_w, ix0, 1, j0, j1, xz, 1);
  else if (sw == 1)
    dwd_fill_rows(dst, src, rows, cols, iy0, sh, in_h, in_w, ix0, 1, j0, j1, xz, 0);
  else
    dwd_fill_rows(dst, src, rows, cols, iy0, sh, in_h, in_w, ix0, sw, j0, j1, xz, is_unsigned);
}

/* The sum of one output whose first tap reads p[0]: the pairs by SMLAD, then the single taps. */
static inline int32_t dwd_one(const int16_t* p, const dwd_tap_t* pairs, int32_t npairs, const dwd_tap_t* singles,
                              int32_t nsingles) {
  int32_t s = 0, i;
  for (i = 0; i < npairs; ++i) s = __smlad((int16x2_t)dwd_load(p + pairs[i].at), pairs[i].w, s);
  for (i = 0; i < nsingles; ++i) s += (int32_t)p[singles[i].at] * singles[i].w;
  return s;
}

/* acc[r * count + j] (r < nrows, j < count) = the sums of the outputs whose first taps read p[r * cols + j]:
 * a 3x3 kernel whose kernel rows start at p + row[0..2], its columns one value apart; two outputs at a
 * time, then an odd last one. For kernel row i, e = (w0, w1), o = (w1, w2) and the values v0..v3 as two
 * words:
 *   output j:     v0 w0 + v1 w1 (SMLAD v01, e) + v2 w2 (SMLABT v23, o)
 *   output j + 1: v1 w0 (SMLATB v01, e) + v2 w1 + v3 w2 (SMLAD v23, o) */
static DWD_NOINLINE void dwd_rows3x3(int32_t* acc, const int16_t* p, int32_t nrows, int32_t count, int32_t cols,
                        const int32_t* row, const uint32_t* e, const uint32_t* o) {
  const int16_t *r0 = p + row[0], *r1 = p + row[1], *r2 = p + row[2];
  const int16x2_t e0 = (int16x2_t)e[0], e1 = (int16x2_t)e[1], e2 = (int16x2_t)e[2];
  const int16x2_t o0 = (int16x2_t)o[0], o1 = (int16x2_t)o[1], o2 = (int16x2_t)o[2];
  int32_t r, j;
  for (r = 0; r < nrows; ++r, r0 += cols, r1 += cols, r2 += cols, acc += count) {
    for (j = 0; j + 2 <= count; j += 2) {
      int16x2_t a, b;
      int32_t s, t;
      a = (int16x2_t)dwd_load(r0 + j);
      b = (int16x2_t)dwd_load(r0 + j + 2);
      s = __smlabt(b, o0, __smlad(a, e0, 0));
      t = __smlad(b, o0, __smlatb(a, e0, 0));
      a = (int16x2_t)dwd_load(r1 + j);
      b = (int16x2_t)dwd_load(r1 + j + 2);
      s = __smlabt(b, o1, __smlad(a, e1, s));
      t = __smlad(b, o1, __smlatb(a, e1, t));
      a = (int16x2_t)dwd_load(r2 + j);
      b = (int16x2_t)dwd_load(r2 + j + 2);
      acc[j] = __smlabt(b, o2, __smlad(a, e2, s));
      acc[j + 1] = __smlad(b, o2, __smlatb(a, e2, t));
    }
    if (j < count) { /* the last output alone: v0 w0 + v1 w1 (SMLAD), v2 w2 (SMLABT) per kernel row */
      int32_t s = __smlabt(r0[j + 2], o0, __smlad((int16x2_t)dwd_load(r0 + j), e0, 0));
      s = __smlabt(r1[j + 2], o1, __smlad((int16x2_t)dwd_load(r1 + j), e1, s));
      acc[j] = __smlabt(r2[j + 2], o2, __smlad((int16x2_t)dwd_load(r2 + j), e2, s));
    }
  }
}

void rxe_qint8_depthwise_dsp(const uint8_t* x, const int8_t* w, const int32_t* bias, const int32_t* multiplier,
                             const int32_t* shift, uint8_t* y, int16_t* scratch, int64_t n, int64_t c, int64_t h,
                             int64_t w_, int64_t kh, int64_t kw, int64_t oh, int64_t ow, int64_t stride_h,
                             int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h, int64_t dil_w,
                             int64_t x_zero, int64_t w_zero, int64_t out_zero, int64_t act_min, int64_t act_max,
                             int64_t dtypes) {
  /* the geometry in int32 (a Cortex-M's sizes) */
  const int32_t taps = (int32_t)(kh * kw), sh = (int32_t)stride_h, sw = (int32_t)stride_w, kw32 = (int32_t)kw;
  const int32_t in_h = (int32_t)h, in_w = (int32_t)w_, out_h = (int32_t)oh, out_w = (int32_t)ow;
  const int32_t top = (int32_t)pad_top, left = (int32_t)pad_left, dh = (int32_t)dil_h, dw = (int32_t)dil_w;
  /* plane columns and rows: every output's taps inside (no spare row: no read goes past the last value) */
  const int32_t cols = out_w + (kw32 - 1) * dw / sw, rows = out_h + ((int32_t)kh - 1) * dh / sh;
  const int32_t plane_size = rows * cols, xz = (int32_t)x_zero, wz = (int32_t)w_zero;
  const int is_unsigned = (dtypes & RXE_QINT8_X_UNSIGNED) != 0;
  const int fast3x3 = kh == 3 && kw == 3 && stride_w == 1 && dil_w == 1;
  /* output rows per block of sums (a row longer than the block goes in pieces) */
  const int32_t block_rows = out_w < DWD_BLOCK ? DWD_BLOCK / out_w : 1;
  int32_t at[DWD_MAX_TAPS], npairs = 0, nsingles = 0, i, t, row_at[3];
  uint8_t order[DWD_MAX_TAPS], pair_tap[DWD_MAX_TAPS], single_tap[DWD_MAX_TAPS]; /* tap indices */
  dwd_tap_t pairs[DWD_MAX_TAPS / 2], singles[DWD_MAX_TAPS];
  int32_t acc[DWD_BLOCK];
  int64_t image;
  int32_t ch = 0;
  /* each tap's offset in the planes; the taps by offset, those one value apart paired */
  for (t = 0; t < taps; ++t) {
    int32_t ay = t / kw32 * dh, ax = t % kw32 * dw, k;
    at[t] = ((ay % sh) * sw + ax % sw) * plane_size + ay / sh * cols + ax / sw;
    for (k = t; k > 0 && at[order[k - 1]] > at[t]; --k) order[k] = order[k - 1];
    order[k] = (uint8_t)t;
  }
  for (i = 0; i < taps; ++i) {
    if (i + 1 < taps && at[order[i + 1]] == at[order[i]] + 1) {
      pair_tap[2 * npairs] = order[i];
      pair_tap[2 * npairs + 1] = order[i + 1];
      pairs[npairs++].at = at[order[i]];
      ++i;
    } else {
      single_tap[nsingles] = order[i];
      singles[nsingles++].at = at[order[i]];
    }
  }
  for (i = 0; i < 3; ++i) row_at[i] = fast3x3 ? at[3 * i] : 0;
  for (image = 0; image < n * c; ++image, ch = ch + 1 < c ? ch + 1 : 0) { /* (batch, channel ch) */
    const uint8_t* src = x + image * h * w_;
    uint8_t* out = y + image * oh * ow;
    const int8_t* wc = w + ch * taps;
    uint32_t e[3], o[3];
    int32_t rp, cp, r, oy0, ox0;
    for (i = 0; i < npairs; ++i)
      pairs[i].w = (int32_t)dwd_pack(wc[pair_tap[2 * i]] - wz, wc[pair_tap[2 * i + 1]] - wz);
    for (i = 0; i < nsingles; ++i) singles[i].w = wc[single_tap[i]] - wz;
    for (i = 0; i < 3 && fast3x3; ++i) {
      e[i] = dwd_pack(wc[3 * i] - wz, wc[3 * i + 1] - wz);
      o[i] = dwd_pack(wc[3 * i + 1] - wz, wc[3 * i + 2] - wz);
    }
    /* the planes: row r, column j of phase (rp, cp) is input row r * sh + rp - top, column
     * j * sw + cp - left */
    for (rp = 0; rp < sh; ++rp) {
      for (cp = 0; cp < sw; ++cp) {
        int16_t* dst = scratch + (rp * sw + cp) * plane_size;
        int32_t ix0 = cp - left, j0 = 0, j1;
        if (ix0 < 0) j0 = (-ix0 + sw - 1) / sw; /* the first plane column inside the input */
        j1 = ix0 < in_w ? (in_w - ix0 + sw - 1) / sw : 0; /* one past the last */
        if (j1 > cols) j1 = cols;
        if (j0 > j1) j0 = j1;
        dwd_fill_plane(dst, src, rows, cols, rp - top, sh, in_h, in_w, ix0, sw, j0, j1, xz, is_unsigned);
      }
    }
    /* blocks of whole output rows (consecutive in y), or of up to DWD_BLOCK columns of one */
    for (oy0 = 0; oy0 < out_h; oy0 += block_rows) {
      int32_t nrows = out_h - oy0 < block_rows ? out_h - oy0 : block_rows;
      for (ox0 = 0; ox0 < out_w; ox0 += DWD_BLOCK) {
        int32_t count = out_w - ox0 < DWD_BLOCK ? out_w - ox0 : DWD_BLOCK, j;
        if (fast3x3) {
          dwd_rows3x3(acc, scratch + oy0 * cols + ox0, nrows, count, cols, row_at, e, o);
        } else {
          for (r = 0; r < nrows; ++r) {
            const int16_t* p = scratch + (oy0 + r) * cols + ox0;
            for (j = 0; j < count; ++j) acc[r * count + j] = dwd_one(p + j, pairs, npairs, singles, nsingles);
          }
        }
        rxe_qint8_requantize_bytes(acc, nrows * count, bias[ch], multiplier[ch], shift[ch], (int32_t)out_zero,
                                   (int32_t)act_min, (int32_t)act_max, out + oy0 * out_w + ox0);
      }
    }
  }
}
#else
typedef int rxe_qdepthwise_dsp_empty; /* C99 wants a declaration in every translation unit */
#endif
