/* int8 convolutions (see relax_edge/kernels_qint8.h). rxe_lib_qconv2d_s8:
 * per image and group, blocks of output pixels (whole rows of up to
 * RXE_QCONV_PIXELS pixels, or RXE_QCONV_PIXELS columns of a wider row): the
 * block's input window is transposed into scratch as an NHWC slice (x_zero
 * outside the input; 16 channels x 16 columns at a time on x86), its im2col rows copied from the slice kw * C/groups
 * bytes at a time (the packed weights' k order is (ky, kx, ci)), and the
 * rows multiplied by the packed weights with the int8 GEMM (qgemm.c), which
 * stores the result transposed (NCHW). A 1x1 kernel of stride 1 has no
 * window: its slice is the GEMM's input. rxe_lib_qdepthwise_conv2d_s8: small output
 * planes channels last (dw_group_task below); others per
 * channel, the window's input as int16 x - x_zero (0 outside) in scratch,
 * split by row and column phase (index % stride) so that every tap reads
 * consecutive values; the outputs in blocks of 256 int32 sums over the
 * planes' full rows (the columns past ow dropped), each tap added over the
 * block (a loop that vectorizes for every stride), then the block
 * requantized 8 at a time. Any kernel size up to 64 taps. */
#include "qdepthwise_dsp.h"
#include "qgemm_internal.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

/* dst[0..count) = src[0..count), 8 bytes at a time. */
static inline void copy_bytes(uint8_t* dst, const uint8_t* src, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) __builtin_memcpy(dst + i, src + i, 8);
  for (; i < count; ++i) dst[i] = src[i];
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define QCONV_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__)
#define QCONV_AVX2 1
#include <immintrin.h>
#endif

#if defined(QCONV_AVX512) || defined(QCONV_AVX2)
/* 16 rows of 16 bytes (src + r * ld) transposed into dst + r * ld_out, each byte ^ flip. */
static inline void transpose16(const uint8_t* src, int64_t ld, int8_t* dst, int64_t ld_out, uint8_t flip) {
  __m128i a[16], b[16], f = _mm_set1_epi8((char)flip);
  int r;
  for (r = 0; r < 16; ++r) a[r] = _mm_xor_si128(_mm_loadu_si128((const __m128i*)(const void*)(src + r * ld)), f);
  for (r = 0; r < 8; ++r) { /* bytes of rows 2r, 2r+1 interleaved */
    b[2 * r] = _mm_unpacklo_epi8(a[2 * r], a[2 * r + 1]);
    b[2 * r + 1] = _mm_unpackhi_epi8(a[2 * r], a[2 * r + 1]);
  }
  for (r = 0; r < 4; ++r) { /* pairs of rows 4r.. 4r+3 */
    a[4 * r] = _mm_unpacklo_epi16(b[4 * r], b[4 * r + 2]);
    a[4 * r + 1] = _mm_unpackhi_epi16(b[4 * r], b[4 * r + 2]);
    a[4 * r + 2] = _mm_unpacklo_epi16(b[4 * r + 1], b[4 * r + 3]);
    a[4 * r + 3] = _mm_unpackhi_epi16(b[4 * r + 1], b[4 * r + 3]);
  }
  for (r = 0; r < 2; ++r) { /* quads of rows 8r.. 8r+7 */
    int j;
    for (j = 0; j < 4; ++j) {
      b[8 * r + 2 * j] = _mm_unpacklo_epi32(a[8 * r + j], a[8 * r + 4 + j]);
      b[8 * r + 2 * j + 1] = _mm_unpackhi_epi32(a[8 * r + j], a[8 * r + 4 + j]);
    }
  }
  for (r = 0; r < 8; ++r) { /* b[r] holds columns 2r, 2r+1 of rows 0..7, b[8 + r] of rows 8..15 */
    _mm_storeu_si128((__m128i*)(void*)(dst + (2 * r) * ld_out), _mm_unpacklo_epi64(b[r], b[8 + r]));
    _mm_storeu_si128((__m128i*)(void*)(dst + (2 * r + 1) * ld_out), _mm_unpackhi_epi64(b[r], b[8 + r]));
  }
}
#endif

/* x_zero outside the input: slice[r][c][ci] = x[ci][iy0 + r][ix0 + c] of one group (NHWC). */
#if defined(__GNUC__)
__attribute__((noinline)) /* its transpose registers off the GEMM's call path (the stack bound) */
#endif
static void fill_slice(uint8_t* slice, const uint8_t* xg, int64_t cg, int64_t h, int64_t w, int64_t iy0, int64_t ix0,
                       int64_t rows, int64_t cols, uint8_t xz) {
  int64_t r, col, ci, lo, hi, span = w;
  if (ix0 == 0 && cols == w && iy0 >= 0 && iy0 + rows <= h) { /* whole rows inside: one run of rows * w pixels */
    cols *= rows;
    rows = 1;
    span = cols;
  }
  lo = ix0 < 0 ? -ix0 : 0;
  hi = span - ix0 < cols ? span - ix0 : cols;
  if (hi < lo) hi = lo;
  for (r = 0; r < rows; ++r) {
    int64_t iy = iy0 + r;
    uint8_t* dst = slice + r * cols * cg;
    if (iy < 0 || iy >= h) {
      for (col = 0; col < cols * cg; ++col) dst[col] = xz;
      continue;
    }
    for (col = 0; col < lo * cg; ++col) dst[col] = xz;
    for (col = hi * cg; col < cols * cg; ++col) dst[col] = xz;
    ci = 0;
#if defined(QCONV_AVX512) || defined(QCONV_AVX2)
    for (; ci + 16 <= cg; ci += 16) { /* 16 channels x 16 columns at a time */
      const uint8_t* src = xg + (ci * h + iy) * w + ix0;
      for (col = lo; col + 16 <= hi; col += 16)
        transpose16(src + col, h * w, (int8_t*)(void*)(dst + col * cg + ci), cg, 0);
      for (; col < hi; ++col) {
        int64_t j;
        for (j = 0; j < 16; ++j) dst[col * cg + ci + j] = src[j * h * w + col];
      }
    }
#endif
    for (; ci < cg; ++ci) {
      const uint8_t* src = xg + (ci * h + iy) * w + ix0;
      uint8_t* d = dst + ci;
      for (col = lo; col < hi; ++col) d[col * cg] = src[col];
    }
  }
}

rxe_status_t rxe_lib_qconv2d_s8(const void* x, const void* w_packed, const int32_t* bias, const int32_t* multiplier,
                                const int32_t* shift, void* y, void* scratch, int64_t n, int64_t c, int64_t h,
                                int64_t w, int64_t o, int64_t kh, int64_t kw, int64_t oh, int64_t ow,
                                int64_t stride_h, int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h,
                                int64_t dil_w, int64_t groups, int64_t x_zero, int64_t w_zero, int64_t out_zero,
                                int64_t act_min, int64_t act_max, int64_t dtypes, rxe_error_t* err) {
  const char* what = "rxe_lib_qconv2d_s8";
  int64_t cg, og, depth, pixels, b, grp, packed_bytes, block_rows, block_cols, oy0, ox0;
  int x_unsigned = (dtypes & RXE_QINT8_X_UNSIGNED) != 0, pointwise;
  rxe_qgemm_t g;
  rxe_status_t st;
  if (n < 0 || c < 0 || h < 0 || w < 0 || o < 0 || kh < 1 || kw < 1 || oh < 0 || ow < 0 || stride_h < 1 ||
      stride_w < 1 || dil_h < 1 || dil_w < 1 || groups < 1 || c % groups || o % groups)
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: bad sizes (c %d, o %d, groups %d, kernel %dx%d)", what,
                         (int64_t)c, (int64_t)o, (int64_t)groups, (int64_t)kh, (int64_t)kw);
  if (n == 0 || o == 0 || oh == 0 || ow == 0) return RXE_OK;
  if (!x || !w_packed || !bias || !multiplier || !shift || !y)
    return rxe_error_set(err, RXE_ERR_NULL, "%s: a pointer argument is NULL", what);
  cg = c / groups;
  og = o / groups;
  depth = cg * kh * kw;
  pixels = oh * ow;
  st = rxe_qint8_check(what, depth, o, shift, x_zero, w_zero, out_zero, act_min, act_max, dtypes, err);
  if (st != RXE_OK) return st;
  if (!scratch) return rxe_error_set(err, RXE_ERR_NULL, "%s: scratch is NULL", what);
  packed_bytes = RXE_QINT8_PACKED_BYTES(og, depth);
  g.k = depth;
  g.n = og;
  g.flip = x_unsigned ? 0x80808080u : 0u;
  g.xz = (int32_t)(x_unsigned ? x_zero - 128 : x_zero);
  g.wz = (int32_t)w_zero;
  g.ldm = 1;
  g.ldn = pixels;
  g.out_zero = (int32_t)out_zero;
  g.act_min = (int32_t)act_min;
  g.act_max = (int32_t)act_max;
  /* a 1x1 kernel of stride 1: the slice is the GEMM's x as it is */
  pointwise = kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1;
  block_rows = RXE_QCONV_BLOCK_ROWS(oh, ow);
  block_cols = RXE_QCONV_BLOCK_COLS(ow);
  for (b = 0; b < n; ++b) {
    for (grp = 0; grp < groups; ++grp) {
      const uint8_t* xg = (const uint8_t*)x + (b * c + grp * cg) * h * w;
      g.w_packed = (const uint8_t*)w_packed + grp * packed_bytes;
      g.bias = bias + grp * og;
      g.multiplier = multiplier + grp * og;
      g.shift = shift + grp * og;
      for (oy0 = 0; oy0 < oh; oy0 += block_rows) {
        for (ox0 = 0; ox0 < ow; ox0 += block_cols) {
          int64_t rows = oh - oy0 < block_rows ? oh - oy0 : block_rows;
          int64_t cols = ow - ox0 < block_cols ? ow - ox0 : block_cols;
          int64_t in_rows = (rows - 1) * stride_h + (kh - 1) * dil_h + 1;
          int64_t in_cols = (cols - 1) * stride_w + (kw - 1) * dil_w + 1, r, col, ky, kx;
          uint8_t* slice = (uint8_t*)scratch;
          fill_slice(slice, xg, cg, h, w, oy0 * stride_h - pad_top, ox0 * stride_w - pad_left, in_rows, in_cols,
                     (uint8_t)x_zero);
          if (pointwise) {
            g.x = slice;
            g.ldx = cg;
          } else { /* im2col rows in the packed k order (ky, kx, ci): kw * cg bytes at a time for dilation 1 */
            uint8_t* row = slice + in_rows * in_cols * cg;
            g.x = row;
            g.ldx = depth;
            for (r = 0; r < rows; ++r)
              for (col = 0; col < cols; ++col)
                for (ky = 0; ky < kh; ++ky) {
                  const uint8_t* src = slice + ((r * stride_h + ky * dil_h) * in_cols + col * stride_w) * cg;
                  if (dil_w == 1) {
                    copy_bytes(row, src, kw * cg);
                    row += kw * cg;
                  } else {
                    for (kx = 0; kx < kw; ++kx, row += cg) copy_bytes(row, src + kx * dil_w * cg, cg);
                  }
                }
          }
          g.m = rows * cols;
          g.out = (uint8_t*)y + (b * o + grp * og) * pixels + oy0 * ow + ox0;
          rxe_qgemm_run(&g);
        }
      }
    }
  }
  return RXE_OK;
}

#define DW_MAX_TAPS 64
#define DW_BLOCK 256 /* outputs at a time */

#if defined(__GNUC__)
#define QCONV_NOINLINE __attribute__((noinline)) /* GCC would fuse two taps into one scalar loop */
#else
#define QCONV_NOINLINE
#endif

/* acc[j] += wt * in[j] for j < count (vectorized). */
QCONV_NOINLINE static void dw_tap(int32_t* restrict acc, const int16_t* restrict in, int64_t count, int32_t wt) {
  int64_t j;
  for (j = 0; j < count; ++j) acc[j] += wt * (int32_t)in[j];
}

/* ---- channels last, for small output planes (RXE_QDEPTHWISE_NHWC): the image transposed once into
 * scratch as NHWC int8 (uint8 x flipped by 128), channels padded to DW_LANES; groups of DW_LANES channels
 * are the thread pool's units; per group, DW_PIX pixels at a time, the lanes' sums over the window's
 * taps inside the input, transposed so that each channel's run is requantized by the shared helper. */
#define DW_LANES 16
#define DW_PIX 64 /* pixels per run of a channel's sums */
#if defined(QCONV_AVX512) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
/* the sums kept pixel by pixel (16 lanes), requantized so with each lane's constants, the bytes transposed */
#define DW_PIXEL_MAJOR 1
#endif

typedef struct {
  int8_t* xt;             /* h * w * c16 */
  const int8_t* w;        /* c * taps */
  const int32_t *bias, *multiplier, *shift;
  uint8_t* out;           /* the image's output, NCHW */
  const uint8_t* x;       /* the image's input, NCHW (for the transpose) */
  int64_t c, c16, h, w_, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw;
  int32_t xz, wz, out_zero, act_min, act_max;
  uint8_t flip;
} dw_nhwc_t;


/* xt[p * c16 + ch] = x[ch][p] ^ flip for the channel groups [begin, end) (the pad channels: 0). */
static void dw_transpose_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const dw_nhwc_t* d = (const dw_nhwc_t*)ctx;
  int64_t hw = d->h * d->w_, grp, ch, p;
  int8_t* xt = d->xt;
  (void)thread;
  for (grp = begin; grp < end; ++grp) {
    int64_t c0 = grp * DW_LANES, p0 = 0;
#if defined(QCONV_AVX512) || defined(QCONV_AVX2)
    if (c0 + DW_LANES <= d->c)
      for (; p0 + 16 <= hw; p0 += 16) transpose16(d->x + c0 * hw + p0, hw, xt + p0 * d->c16 + c0, d->c16, d->flip);
#endif
    for (ch = c0; ch < c0 + DW_LANES; ++ch) {
      int8_t* dst = xt + ch;
      if (ch >= d->c) {
        for (p = p0; p < hw; ++p) dst[p * d->c16] = 0;
      } else {
        const uint8_t* src = d->x + ch * hw;
        for (p = p0; p < hw; ++p) dst[p * d->c16] = (int8_t)(src[p] ^ d->flip);
      }
    }
  }
}

static void dw_group_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const dw_nhwc_t* d = (const dw_nhwc_t*)ctx;
  int64_t taps = d->kh * d->kw, pixels = d->oh * d->ow, grp, t, l, p0, pp;
  int16_t wv[RXE_QDEPTHWISE_NHWC_TAPS][DW_LANES]; /* w - w_zero */
  int32_t runs[DW_LANES][DW_PIX]; /* the sums of each channel's run of pixels (or DW_PIX pixels of 16 lanes) */
#if defined(DW_PIXEL_MAJOR)
  int32_t lane_bias[DW_LANES], lane_q[DW_LANES], lane_shift[DW_LANES]; /* 0 past the last channel */
#endif
#if defined(QCONV_AVX512)
  const int k3 = d->kh == 3 && d->kw == 3 && d->dh == 1 && d->dw == 1;
  __m512i w9[9], zero_term = _mm512_setzero_si512();
#endif
#if defined(QCONV_AVX512) && !defined(DW_PIXEL_MAJOR)
  const __m512i lane_at = _mm512_mullo_epi32(_mm512_set1_epi32(DW_PIX), _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8,
                                                                                         7, 6, 5, 4, 3, 2, 1, 0));
#endif
#if defined(QCONV_AVX512)
  for (t = 0; t < 9; ++t) w9[t] = zero_term;
#endif
  (void)thread;
  for (grp = begin; grp < end; ++grp) {
    int64_t c0 = grp * DW_LANES, lanes = d->c - c0 < DW_LANES ? d->c - c0 : DW_LANES;
    for (t = 0; t < taps; ++t)
      for (l = 0; l < DW_LANES; ++l) wv[t][l] = (int16_t)(l < lanes ? (int32_t)d->w[(c0 + l) * taps + t] - d->wz : 0);
#if defined(DW_PIXEL_MAJOR)
    for (l = 0; l < DW_LANES; ++l) {
      lane_bias[l] = l < lanes ? d->bias[c0 + l] : 0;
      lane_q[l] = l < lanes ? d->multiplier[c0 + l] : 0;
      lane_shift[l] = l < lanes ? d->shift[c0 + l] : 0;
    }
#endif
#if defined(QCONV_AVX512)
    if (k3) { /* a 3x3 window wholly inside: sum x * w - x_zero * sum w, the 9 weights in registers */
      __m512i wsum = _mm512_setzero_si512();
      for (t = 0; t < 9; ++t) {
        w9[t] = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)wv[t]));
        wsum = _mm512_add_epi32(wsum, w9[t]);
      }
      zero_term = _mm512_mullo_epi32(wsum, _mm512_set1_epi32(d->xz));
    }
#endif
    for (p0 = 0; p0 < pixels; p0 += DW_PIX) {
      int64_t count = pixels - p0 < DW_PIX ? pixels - p0 : DW_PIX, oy = p0 / d->ow, ox = p0 % d->ow;
      for (pp = 0; pp < count; ++pp) {
        int64_t iy0 = oy * d->sh - d->pt, ix0 = ox * d->sw - d->pl, ky, kx;
        int64_t ky0 = 0, ky1 = d->kh, kx0 = 0, kx1 = d->kw; /* the taps inside the input */
        const int8_t* base = d->xt + c0;
        int32_t sum[DW_LANES];
#if defined(QCONV_AVX512)
        __m512i s16 = _mm512_setzero_si512(), xz16 = _mm512_set1_epi32(d->xz);
#elif defined(QCONV_AVX2)
        __m256i s_lo = _mm256_setzero_si256(), s_hi = _mm256_setzero_si256(), xz8 = _mm256_set1_epi32(d->xz);
#else
        for (l = 0; l < DW_LANES; ++l) sum[l] = 0;
#endif
#if defined(QCONV_AVX512)
        if (k3 && iy0 >= 0 && iy0 + 3 <= d->h && ix0 >= 0 && ix0 + 3 <= d->w_) {
          const int8_t* r0 = base + (iy0 * d->w_ + ix0) * d->c16;
          const int64_t cs = d->c16, rs = d->w_ * d->c16;
#define QCONV_TAP(row, col, t) \
  _mm512_mullo_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(const void*)(r0 + (row) * rs + (col) * cs))), w9[t])
          __m512i a0 = _mm512_add_epi32(QCONV_TAP(0, 0, 0), QCONV_TAP(0, 1, 1));
          __m512i a1 = _mm512_add_epi32(QCONV_TAP(0, 2, 2), QCONV_TAP(1, 0, 3));
          __m512i a2 = _mm512_add_epi32(QCONV_TAP(1, 1, 4), QCONV_TAP(1, 2, 5));
          __m512i a3 = _mm512_add_epi32(QCONV_TAP(2, 0, 6), QCONV_TAP(2, 1, 7));
          a0 = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
          s16 = _mm512_sub_epi32(_mm512_add_epi32(a0, QCONV_TAP(2, 2, 8)), zero_term);
#undef QCONV_TAP
          ky1 = ky0; /* done: no tap left for the loops below */
        }
#endif
        while (ky0 < ky1 && iy0 + ky0 * d->dh < 0) ++ky0;
        while (ky1 > ky0 && iy0 + (ky1 - 1) * d->dh >= d->h) --ky1;
        while (kx0 < kx1 && ix0 + kx0 * d->dw < 0) ++kx0;
        while (kx1 > kx0 && ix0 + (kx1 - 1) * d->dw >= d->w_) --kx1;
        for (ky = ky0; ky < ky1; ++ky) {
          const int8_t* row = base + ((iy0 + ky * d->dh) * d->w_ + ix0) * d->c16;
          for (kx = kx0; kx < kx1; ++kx) {
            const int8_t* xp = row + kx * d->dw * d->c16;
            const int16_t* wt = wv[ky * d->kw + kx];
#if defined(QCONV_AVX512)
            s16 = _mm512_add_epi32(s16, _mm512_mullo_epi32(
                _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(const void*)xp)), xz16),
                _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)wt))));
#elif defined(QCONV_AVX2)
            {
              __m128i bytes = _mm_loadu_si128((const __m128i*)(const void*)xp);
              s_lo = _mm256_add_epi32(s_lo, _mm256_mullo_epi32(_mm256_sub_epi32(_mm256_cvtepi8_epi32(bytes), xz8),
                                                               _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i*)(const void*)wt))));
              s_hi = _mm256_add_epi32(
                  s_hi, _mm256_mullo_epi32(_mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)), xz8),
                                           _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i*)(const void*)(wt + 8)))));
            }
#else
            for (l = 0; l < DW_LANES; ++l) sum[l] += ((int32_t)xp[l] - d->xz) * wt[l];
#endif
          }
        }
#if defined(QCONV_AVX2)
        _mm256_storeu_si256((__m256i*)(void*)sum, s_lo);
        _mm256_storeu_si256((__m256i*)(void*)(sum + 8), s_hi);
#endif
#if defined(DW_PIXEL_MAJOR)
        (void)sum;
        _mm512_storeu_si512((void*)(&runs[0][0] + DW_LANES * pp), s16);
#elif defined(QCONV_AVX512)
        (void)sum;
        _mm512_i32scatter_epi32((void*)&runs[0][pp], lane_at, s16, 4);
#else
        for (l = 0; l < DW_LANES; ++l) runs[l][pp] = sum[l];
#endif
        if (++ox == d->ow) {
          ox = 0;
          ++oy;
        }
      }
#if defined(DW_PIXEL_MAJOR)
      { /* the bytes over the sums' memory, then 16 pixels x 16 channels transposed at a time */
        uint8_t* bytes = (uint8_t*)(void*)runs;
        uint8_t* out = d->out + c0 * pixels + p0;
        rxe_qint8_requantize_lanes16(&runs[0][0], count, lane_bias, lane_q, lane_shift, d->out_zero, d->act_min,
                                     d->act_max, bytes);
        pp = 0;
        if (lanes == DW_LANES)
          for (; pp + 16 <= count; pp += 16) transpose16(bytes + DW_LANES * pp, DW_LANES, (int8_t*)(void*)(out + pp),
                                                         pixels, 0);
        for (l = 0; l < lanes; ++l) {
          int64_t q;
          for (q = pp; q < count; ++q) out[l * pixels + q] = bytes[DW_LANES * q + l];
        }
      }
#else
      for (l = 0; l < lanes; ++l) {
        rxe_qint8_requantize_bytes(runs[l], count, d->bias[c0 + l], d->multiplier[c0 + l], d->shift[c0 + l],
                                   d->out_zero, d->act_min, d->act_max, d->out + (c0 + l) * pixels + p0);
      }
#endif
    }
  }
}

/* The per-channel path over phase planes (its own frame, apart from the channels-last path's). */
QCONV_NOINLINE static void dw_planes(const void* x, const void* w, const int32_t* bias, const int32_t* multiplier,
                                     const int32_t* shift, void* y, void* scratch, int64_t n, int64_t c,
                                     int64_t h, int64_t w_, int64_t kh, int64_t kw, int64_t oh, int64_t ow,
                                     int64_t stride_h, int64_t stride_w, int64_t pad_top, int64_t pad_left,
                                     int64_t dil_h, int64_t dil_w, int64_t x_zero, int64_t w_zero,
                                     int64_t out_zero, int64_t act_min, int64_t act_max, int x_unsigned) {
  int32_t xz = (int32_t)x_zero;
  int64_t b, ch, t, rows, cols, phase_cols, r, col, ph;
  int16_t* plane = (int16_t*)scratch;
  int64_t tap_at[DW_MAX_TAPS]; /* each tap's offset in the planes */
  /* planes[rp][cp][r][j] = x[r * stride_h + rp - pad_top][j * stride_w + cp - pad_left] - x_zero (0 outside):
   * output (oy, ox) of tap (ky, kx) reads plane ((ky*dil_h) % stride_h, (kx*dil_w) % stride_w) at row
   * oy + ky*dil_h / stride_h, column ox + kx*dil_w / stride_w. Outputs are computed at j = oy * cols + ox
   * for every column j < cols of the planes (those past ow read the next row, or the last spare row, and
   * are dropped), so that each tap is one run over consecutive values. */
  cols = ow + (kw - 1) * dil_w / stride_w;
  rows = oh + (kh - 1) * dil_h / stride_h + 1;
  phase_cols = rows * cols; /* values per plane */
  for (t = 0; t < kh * kw; ++t) {
    int64_t ay = (t / kw) * dil_h, ax = (t % kw) * dil_w;
    tap_at[t] = ((ay % stride_h) * stride_w + ax % stride_w) * phase_cols + ay / stride_h * cols + ax / stride_w;
  }
  for (b = 0; b < n; ++b) {
    for (ch = 0; ch < c; ++ch) {
      const uint8_t* src = (const uint8_t*)x + (b * c + ch) * h * w_;
      uint8_t* out = (uint8_t*)y + (b * c + ch) * oh * ow;
      int64_t total = oh * cols, j0, oy_at = 0, ox_at = 0;
      int32_t wv[DW_MAX_TAPS];
      for (t = 0; t < kh * kw; ++t) wv[t] = (int32_t)((const int8_t*)w)[ch * kh * kw + t] - (int32_t)w_zero;
      for (ph = 0; ph < stride_h * stride_w; ++ph) {
        int64_t rp = ph / stride_w, cp = ph % stride_w;
        /* columns [lo, hi) are inside the input */
        int64_t first = cp - pad_left, lo = first >= 0 ? 0 : (-first + stride_w - 1) / stride_w;
        int64_t hi = w_ - first <= 0 ? 0 : (w_ - first + stride_w - 1) / stride_w;
        if (hi > cols) hi = cols;
        if (lo > hi) lo = hi;
        for (r = 0; r < rows; ++r) {
          int64_t iy = r * stride_h + rp - pad_top;
          int16_t* dst = plane + ph * phase_cols + r * cols;
          const uint8_t* line;
          if (iy < 0 || iy >= h) {
            for (col = 0; col < cols; ++col) dst[col] = 0;
            continue;
          }
          line = src + iy * w_ + first;
          for (col = 0; col < lo; ++col) dst[col] = 0;
          for (col = hi; col < cols; ++col) dst[col] = 0;
          if (x_unsigned && stride_w == 1) {
            for (col = lo; col < hi; ++col) dst[col] = (int16_t)((int32_t)line[col] - xz);
          } else if (stride_w == 1) {
            for (col = lo; col < hi; ++col) dst[col] = (int16_t)((int32_t)(int8_t)line[col] - xz);
          } else if (x_unsigned && stride_w == 2) { /* a constant stride: the loads vectorize */
            for (col = lo; col < hi; ++col) dst[col] = (int16_t)((int32_t)line[2 * col] - xz);
          } else if (x_unsigned) {
            for (col = lo; col < hi; ++col) dst[col] = (int16_t)((int32_t)line[col * stride_w] - xz);
          } else if (stride_w == 2) {
            for (col = lo; col < hi; ++col) dst[col] = (int16_t)((int32_t)(int8_t)line[2 * col] - xz);
          } else {
            for (col = lo; col < hi; ++col) dst[col] = (int16_t)((int32_t)(int8_t)line[col * stride_w] - xz);
          }
        }
      }
      for (j0 = 0; j0 < total; j0 += DW_BLOCK) {
        int64_t count = total - j0 < DW_BLOCK ? total - j0 : DW_BLOCK, j;
        int32_t acc[DW_BLOCK]; /* |acc| <= 64 taps * 255 * 255 < 2^30 */
        uint8_t bytes[DW_BLOCK];
        j = 0;
#if defined(QCONV_AVX512)
        if (kh * kw == 9) { /* 3x3: the taps' weights and runs in registers, the products summed as a tree */
          const int16_t* run0 = plane + j0;
          __m512i wk[9], wp[5];
          /* 32 outputs at a time, the taps in pairs (8 with a zero partner): the two taps' runs interleaved as
           * int16 pairs, vpmaddwd multiplies them by the pair of weights and adds the two products (exact: each
           * |product| <= 255 * 255); the unpacks leave each 128-bit lane's outputs 0-3 in lo, 4-7 in hi, which
           * the two permutes put back in order. */
          const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
          const __m512i second = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
          for (t = 0; t < 9; ++t) wk[t] = _mm512_set1_epi32(wv[t]);
          for (t = 0; t < 5; ++t)
            wp[t] = _mm512_set1_epi32((int32_t)((uint32_t)(2 * t + 1 < 9 ? wv[2 * t + 1] : 0) << 16 |
                                                ((uint32_t)wv[2 * t] & 0xffffu)));
#define QCONV_PAIR(t)                                                                                   \
  {                                                                                                     \
    __m512i a = _mm512_loadu_si512((const void*)(run0 + tap_at[2 * (t)] + j));                          \
    __m512i b = 2 * (t) + 1 < 9 ? _mm512_loadu_si512((const void*)(run0 + tap_at[2 * (t) + 1] + j)) : a; \
    lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(a, b), wp[t]));                   \
    hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(a, b), wp[t]));                   \
  }
          for (; j + 32 <= count; j += 32) {
            __m512i lo = _mm512_setzero_si512(), hi = lo;
            QCONV_PAIR(0) QCONV_PAIR(1) QCONV_PAIR(2) QCONV_PAIR(3) QCONV_PAIR(4)
            _mm512_storeu_si512((void*)(acc + j), _mm512_permutex2var_epi32(lo, first, hi));
            _mm512_storeu_si512((void*)(acc + j + 16), _mm512_permutex2var_epi32(lo, second, hi));
          }
#undef QCONV_PAIR
#define QCONV_PTAP(t) \
  _mm512_mullo_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)(run0 + tap_at[t] + j))), wk[t])
          for (; j + 16 <= count; j += 16) {
            __m512i a0 = _mm512_add_epi32(QCONV_PTAP(0), QCONV_PTAP(1));
            __m512i a1 = _mm512_add_epi32(QCONV_PTAP(2), QCONV_PTAP(3));
            __m512i a2 = _mm512_add_epi32(QCONV_PTAP(4), QCONV_PTAP(5));
            __m512i a3 = _mm512_add_epi32(QCONV_PTAP(6), QCONV_PTAP(7));
            a0 = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
            _mm512_storeu_si512((void*)(acc + j), _mm512_add_epi32(a0, QCONV_PTAP(8)));
          }
#undef QCONV_PTAP
        }
        for (; j + 16 <= count; j += 16) { /* 16 sums in a register over every tap */
          __m512i sum = _mm512_setzero_si512();
          for (t = 0; t < kh * kw; ++t)
            sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256(
                                                               (const __m256i*)(const void*)(plane + tap_at[t] + j0 + j))),
                                                           _mm512_set1_epi32(wv[t])));
          _mm512_storeu_si512((void*)(acc + j), sum);
        }
#endif
        if (j < count) {
          int64_t done = j;
          for (; j < count; ++j) acc[j] = 0;
          for (t = 0; t < kh * kw; ++t) dw_tap(acc + done, plane + tap_at[t] + j0 + done, count - done, wv[t]);
        }
        rxe_qint8_requantize_bytes(acc, count, bias[ch], multiplier[ch], shift[ch], (int32_t)out_zero,
                                   (int32_t)act_min, (int32_t)act_max, bytes);
        for (j = 0; j < count;) { /* j0 + j is (oy_at, ox_at): the outputs of the row's first ow columns */
          int64_t run = cols - ox_at < count - j ? cols - ox_at : count - j;
          int64_t keep = ox_at < ow ? (ow - ox_at < run ? ow - ox_at : run) : 0, i;
          uint8_t* dst = out + oy_at * ow + ox_at;
          for (i = 0; i < keep; ++i) dst[i] = bytes[j + i];
          j += run;
          ox_at += run;
          if (ox_at == cols) {
            ox_at = 0;
            ++oy_at;
          }
        }
      }
    }
  }
}

rxe_status_t rxe_lib_qdepthwise_conv2d_s8(const void* x, const void* w, const int32_t* bias,
                                          const int32_t* multiplier, const int32_t* shift, void* y, void* scratch,
                                          int64_t n, int64_t c, int64_t h, int64_t w_, int64_t kh, int64_t kw,
                                          int64_t oh, int64_t ow, int64_t stride_h, int64_t stride_w,
                                          int64_t pad_top, int64_t pad_left, int64_t dil_h, int64_t dil_w,
                                          int64_t x_zero, int64_t w_zero, int64_t out_zero, int64_t act_min,
                                          int64_t act_max, int64_t dtypes, rxe_error_t* err) {
  const char* what = "rxe_lib_qdepthwise_conv2d_s8";
  const int planes_only = (dtypes & RXE_QINT8_DW_PLANES_ONLY) != 0;
  int x_unsigned = (dtypes & RXE_QINT8_X_UNSIGNED) != 0;
  int64_t b;
  rxe_status_t st;
  if (n < 0 || c < 0 || h < 0 || w_ < 0 || kh < 1 || kw < 1 || kh * kw > DW_MAX_TAPS || oh < 0 || ow < 0 ||
      stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1)
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: bad sizes (kernel %dx%d: at most %d taps)", what,
                         (int64_t)kh, (int64_t)kw, (int64_t)DW_MAX_TAPS);
  if (n == 0 || c == 0 || oh == 0 || ow == 0) return RXE_OK;
  if (!x || !w || !bias || !multiplier || !shift || !y)
    return rxe_error_set(err, RXE_ERR_NULL, "%s: a pointer argument is NULL", what);
  if (!scratch) return rxe_error_set(err, RXE_ERR_NULL, "%s: scratch is NULL", what);
  dtypes &= ~(int64_t)RXE_QINT8_DW_PLANES_ONLY;
  st = rxe_qint8_check(what, kh * kw, c, shift, x_zero, w_zero, out_zero, act_min, act_max, dtypes, err);
  if (st != RXE_OK) return st;
#if defined(__ARM_FEATURE_DSP) && !defined(__ARM_NEON) /* Cortex-M: SMLAD over tap pairs (qdepthwise_dsp.c) */
  rxe_qint8_depthwise_dsp((const uint8_t*)x, (const int8_t*)w, bias, multiplier, shift, (uint8_t*)y,
                          (int16_t*)scratch, n, c, h, w_, kh, kw, oh, ow, stride_h, stride_w, pad_top, pad_left,
                          dil_h, dil_w, x_zero, w_zero, out_zero, act_min, act_max, dtypes);
  return RXE_OK;
#endif
  if (!planes_only && RXE_QDEPTHWISE_NHWC(kh, kw, oh, ow)) {
    int64_t groups = (c + DW_LANES - 1) / DW_LANES, serial = c * oh * ow * kh * kw < 65536;
    dw_nhwc_t d = {(int8_t*)scratch, (const int8_t*)w, bias, multiplier, shift, NULL, NULL, c, 0, h, w_, kh, kw,
                   oh, ow, stride_h, stride_w, pad_top, pad_left, dil_h, dil_w, 0, 0, 0, 0, 0, 0};
    d.c16 = groups * DW_LANES; /* the image's channels, padded */
    d.flip = x_unsigned ? 0x80 : 0;
    d.xz = (int32_t)(x_unsigned ? x_zero - 128 : x_zero);
    d.wz = (int32_t)w_zero;
    d.out_zero = (int32_t)out_zero;
    d.act_min = (int32_t)act_min;
    d.act_max = (int32_t)act_max;
    for (b = 0; b < n; ++b) {
      d.x = (const uint8_t*)x + b * c * h * w_;
      d.out = (uint8_t*)y + b * c * oh * ow;
      if (serial) {
        dw_transpose_task(&d, 0, groups, 0);
        dw_group_task(&d, 0, groups, 0);
      } else {
        rxe_threads_parallel_for(groups, dw_transpose_task, &d);
        rxe_threads_parallel_for(groups, dw_group_task, &d);
      }
    }
    return RXE_OK;
  }
  dw_planes(x, w, bias, multiplier, shift, y, scratch, n, c, h, w_, kh, kw, oh, ow, stride_h, stride_w, pad_top,
            pad_left, dil_h, dil_w, x_zero, w_zero, out_zero, act_min, act_max, x_unsigned);
  return RXE_OK;
}
