/* int8 convolutions (see relax_edge/kernels_qint8.h). rxe_lib_qconv2d_s8:
 * per image and group, blocks of RXE_QCONV_PIXELS output pixels are copied
 * as im2col rows (x_zero outside the input) into scratch and multiplied by
 * the packed weights with the int8 GEMM (qgemm.c), which stores the result
 * transposed (NCHW). A 1x1 kernel of stride 1 without padding has no
 * window: its block is a plain transpose of the input planes (an
 * outer-product loop reading the planes in place, without the copy, was 8-10x
 * slower than the GEMM on the MobileNetV2 1x1 shapes). rxe_lib_qdepthwise_conv2d_s8: per channel and
 * output row, blocks of 64 outputs in int32, each tap added over the outputs
 * whose input column is inside the row (a loop that vectorizes for column
 * stride 1; rows and columns outside add nothing, as x_zero - x_zero = 0),
 * then the block requantized 8 at a time. Any kernel size up to 64 taps. */
#include "qgemm_internal.h"
#include "relax_edge/runtime.h"

rxe_status_t rxe_lib_qconv2d_s8(const void* x, const void* w_packed, const int32_t* bias, const int32_t* multiplier,
                                const int32_t* shift, void* y, void* scratch, int64_t n, int64_t c, int64_t h,
                                int64_t w, int64_t o, int64_t kh, int64_t kw, int64_t oh, int64_t ow,
                                int64_t stride_h, int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h,
                                int64_t dil_w, int64_t groups, int64_t x_zero, int64_t w_zero, int64_t out_zero,
                                int64_t act_min, int64_t act_max, int64_t dtypes, rxe_error_t* err) {
  const char* what = "rxe_lib_qconv2d_s8";
  int64_t cg, og, depth, pixels, b, grp, p0, packed_bytes;
  int x_unsigned = (dtypes & RXE_QINT8_X_UNSIGNED) != 0, one_by_one;
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
  packed_bytes = RXE_QINT8_PACKED_BYTES(og, depth);
  g.ldx = depth;
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
  one_by_one = kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 && pad_left == 0 && oh == h &&
               ow == w;
  if (!scratch) return rxe_error_set(err, RXE_ERR_NULL, "%s: scratch is NULL", what);
  for (b = 0; b < n; ++b) {
    for (grp = 0; grp < groups; ++grp) {
      const uint8_t* xg = (const uint8_t*)x + (b * c + grp * cg) * h * w;
      g.w_packed = (const uint8_t*)w_packed + grp * packed_bytes;
      g.bias = bias + grp * og;
      g.multiplier = multiplier + grp * og;
      g.shift = shift + grp * og;
      for (p0 = 0; p0 < pixels; p0 += RXE_QCONV_PIXELS) {
        int64_t np = pixels - p0 < RXE_QCONV_PIXELS ? pixels - p0 : RXE_QCONV_PIXELS, p;
        uint8_t* rows = (uint8_t*)scratch;
        if (one_by_one) { /* the block of pixels transposed: no window, no bounds */
          int64_t ci;
          for (ci = 0; ci < cg; ++ci) {
            const uint8_t* plane = xg + ci * h * w + p0;
            for (p = 0; p < np; ++p) rows[p * depth + ci] = plane[p];
          }
          np = 0;
        }
        for (p = 0; p < np; ++p) {
          int64_t oy = (p0 + p) / ow, ox = (p0 + p) % ow, ci, ky, kx;
          int64_t iy0 = oy * stride_h - pad_top, ix0 = ox * stride_w - pad_left;
          uint8_t* row = rows + p * depth;
          if (iy0 >= 0 && iy0 + (kh - 1) * dil_h < h && ix0 >= 0 && ix0 + (kw - 1) * dil_w < w) {
            for (ci = 0; ci < cg; ++ci) /* every tap inside: no bounds checks */
              for (ky = 0; ky < kh; ++ky) {
                const uint8_t* src = xg + (ci * h + iy0 + ky * dil_h) * w + ix0;
                for (kx = 0; kx < kw; ++kx) *row++ = src[kx * dil_w];
              }
            continue;
          }
          for (ci = 0; ci < cg; ++ci)
            for (ky = 0; ky < kh; ++ky) {
              int64_t iy = iy0 + ky * dil_h;
              for (kx = 0; kx < kw; ++kx) {
                int64_t ix = ix0 + kx * dil_w;
                *row++ = iy >= 0 && iy < h && ix >= 0 && ix < w ? xg[(ci * h + iy) * w + ix] : (uint8_t)x_zero;
              }
            }
        }
        g.x = rows;
        g.m = pixels - p0 < RXE_QCONV_PIXELS ? pixels - p0 : RXE_QCONV_PIXELS;
        g.out = (uint8_t*)y + (b * o + grp * og) * pixels + p0;
        rxe_qgemm_run(&g);
      }
    }
  }
  return RXE_OK;
}

#define DW_MAX_TAPS 64
#define DW_BLOCK 64 /* outputs of a row at a time */

/* acc[j] += wv * (x[j * stride] - xz) for j < count: x as int8 or uint8 (the
 * stride-1 loops vectorize). */
static void dw_taps(int32_t* acc, const uint8_t* x, int64_t count, int64_t stride, int32_t wv, int32_t xz,
                    int x_unsigned) {
  int64_t j;
  if (x_unsigned && stride == 1) {
    for (j = 0; j < count; ++j) acc[j] += wv * ((int32_t)x[j] - xz);
  } else if (stride == 1) {
    for (j = 0; j < count; ++j) acc[j] += wv * ((int32_t)(int8_t)x[j] - xz);
  } else if (x_unsigned) {
    for (j = 0; j < count; ++j) acc[j] += wv * ((int32_t)x[j * stride] - xz);
  } else {
    for (j = 0; j < count; ++j) acc[j] += wv * ((int32_t)(int8_t)x[j * stride] - xz);
  }
}

rxe_status_t rxe_lib_qdepthwise_conv2d_s8(const void* x, const void* w, const int32_t* bias,
                                          const int32_t* multiplier, const int32_t* shift, void* y, int64_t n,
                                          int64_t c, int64_t h, int64_t w_, int64_t kh, int64_t kw, int64_t oh,
                                          int64_t ow, int64_t stride_h, int64_t stride_w, int64_t pad_top,
                                          int64_t pad_left, int64_t dil_h, int64_t dil_w, int64_t x_zero,
                                          int64_t w_zero, int64_t out_zero, int64_t act_min, int64_t act_max,
                                          int64_t dtypes, rxe_error_t* err) {
  const char* what = "rxe_lib_qdepthwise_conv2d_s8";
  int x_unsigned = (dtypes & RXE_QINT8_X_UNSIGNED) != 0;
  int32_t xz = (int32_t)x_zero;
  int64_t b, ch, oy, ox0, t;
  rxe_status_t st;
  if (n < 0 || c < 0 || h < 0 || w_ < 0 || kh < 1 || kw < 1 || kh * kw > DW_MAX_TAPS || oh < 0 || ow < 0 ||
      stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1)
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: bad sizes (kernel %dx%d: at most %d taps)", what,
                         (int64_t)kh, (int64_t)kw, (int64_t)DW_MAX_TAPS);
  if (n == 0 || c == 0 || oh == 0 || ow == 0) return RXE_OK;
  if (!x || !w || !bias || !multiplier || !shift || !y)
    return rxe_error_set(err, RXE_ERR_NULL, "%s: a pointer argument is NULL", what);
  st = rxe_qint8_check(what, kh * kw, c, shift, x_zero, w_zero, out_zero, act_min, act_max, dtypes, err);
  if (st != RXE_OK) return st;
  for (b = 0; b < n; ++b) {
    for (ch = 0; ch < c; ++ch) {
      const uint8_t* plane = (const uint8_t*)x + (b * c + ch) * h * w_;
      uint8_t* out = (uint8_t*)y + (b * c + ch) * oh * ow;
      int32_t wv[DW_MAX_TAPS];
      for (t = 0; t < kh * kw; ++t) wv[t] = (int32_t)((const int8_t*)w)[ch * kh * kw + t] - (int32_t)w_zero;
      for (oy = 0; oy < oh; ++oy) {
        for (ox0 = 0; ox0 < ow; ox0 += DW_BLOCK) {
          int64_t count = ow - ox0 < DW_BLOCK ? ow - ox0 : DW_BLOCK, j, ky, kx;
          int32_t acc[DW_BLOCK]; /* |acc| <= 64 taps * 255 * 255 < 2^30 */
          for (j = 0; j < count; ++j) acc[j] = 0;
          for (ky = 0; ky < kh; ++ky) {
            int64_t iy = oy * stride_h - pad_top + ky * dil_h;
            if (iy < 0 || iy >= h) continue; /* a padded row adds (x_zero - x_zero) * w = 0 */
            for (kx = 0; kx < kw; ++kx) {
              /* outputs j in [lo, hi) read columns inside the row */
              int64_t first = ox0 * stride_w - pad_left + kx * dil_w, lo = 0, hi = count;
              while (lo < count && first + lo * stride_w < 0) ++lo;
              while (hi > lo && first + (hi - 1) * stride_w >= w_) --hi;
              if (hi > lo)
                dw_taps(acc + lo, plane + iy * w_ + first + lo * stride_w, hi - lo, stride_w, wv[ky * kw + kx], xz,
                        x_unsigned);
            }
          }
          rxe_qint8_requantize_bytes(acc, count, bias[ch], multiplier[ch], shift[ch], (int32_t)out_zero,
                                     (int32_t)act_min, (int32_t)act_max, out + oy * ow + ox0);
        }
      }
    }
  }
  return RXE_OK;
}
