"""ONNX import: TfIdfVectorizer (opset 9) over integer n-gram pools, as comparison masks.

For each n-gram length n in [min_gram_length, max_gram_length] and each skip distance d in
1..max_skip_count + 1 (unigrams only at d = 1, as the ONNX reference), the count of an n-gram g is the
number of starts s with s + (n - 1) d inside the row and x[s + k d] == g[k] for every k: n slices of the
row, each compared with the k-th tokens of all the pool's n-grams of length n at once (a (B, L', P_n)
mask), joined by a logical and, summed over the row. The counts (float32, exact) go to their output
columns (ngram_indexes) by a 0/1 matmul; TF keeps them, IDF gives weights[col] (or 1) where a count is
nonzero, TFIDF multiplies them by weights[col] (no weights: the counts).

The row length L must be static (the batch may be symbolic); the masks take B * L * P_n booleans per
(n, d, k), so the form is practical for pools up to some thousands of n-grams over rows of some hundreds:
more than `MAX_MASK` mask elements per row in all are refused. String pools (pool_strings) and string
inputs are refused: the runtime has no string type.
"""

from __future__ import annotations

import numpy as np

from ....ir.shape import as_expr
from ..context import converter

MAX_MASK = 1 << 24
_MODES = ("TF", "IDF", "TFIDF")


def _pool(ctx, pool, counts, low, high):
    """{n: (tokens (P_n, n), ids (P_n,))} of the pool's n-grams of lengths low..high; ids count every n-gram
    of the pool in order (lengths outside the range included), as ngram_indexes does."""
    grams, next_id = {}, 0
    for i, start in enumerate(counts):
        end = counts[i + 1] if i + 1 < len(counts) else len(pool)
        n = i + 1
        if not 0 <= start <= end <= len(pool):
            raise ctx.error(f"ngram_counts {counts} do not split a pool of {len(pool)} items")
        if (end - start) % n:
            raise ctx.error(f"the pool's {n}-grams take {end - start} items, not a multiple of {n}")
        number = (end - start) // n
        if low <= n <= high and number:
            tokens = np.asarray(pool[start:end], np.int64).reshape(number, n)
            grams[n] = (tokens, np.arange(next_id, next_id + number))
        next_id += number
    return grams, next_id


def _counts_of_length(ctx, rows, tokens, n, skips, length, dtype):
    """(B, P_n) float32: how often each n-gram of `tokens` (P_n, n) occurs in `rows` (B, L), skips included."""
    batch = ctx.type_of(rows).shape[0]
    total = None
    for d in range(1, (skips if n > 1 else 0) + 2):
        fit = length - (n - 1) * d
        if fit <= 0:
            break
        mask = None
        for k in range(n):
            part = ctx.emit("strided_slice", [rows], {"begin": (k * d,), "end": (k * d + fit,), "axes": (1,)})
            part = ctx.emit("reshape", [part], {"shape": (batch, as_expr(fit), as_expr(1))})
            eq = ctx.emit("equal", [part, tokens[:, k].astype(dtype)])
            mask = eq if mask is None else ctx.emit("logical_and", [mask, eq])
        count = ctx.emit("sum", [ctx.emit("cast", [mask], {"dtype": "float32"})], {"axis": (1,)})
        total = count if total is None else ctx.emit("add", [total, count])
    return total


@converter("TfIdfVectorizer")
def convert_tfidf_vectorizer(ctx, inputs):
    x = inputs[0]
    xt = ctx.type_of(x)
    if xt.dtype not in ("int32", "int64"):
        raise ctx.error(f"input of type {xt.dtype} is not supported (int32, int64; string input is not)")
    if ctx.attr("pool_strings") is not None:
        raise ctx.error("pool_strings is not supported (string n-grams: the runtime has no string type)")
    mode = ctx.attr("mode", None, str)
    if mode not in _MODES:
        raise ctx.error(f"mode {mode!r} is not supported ({', '.join(_MODES)})")
    low, high = ctx.attr("min_gram_length", None, int), ctx.attr("max_gram_length", None, int)
    skips = ctx.attr("max_skip_count", None, int)
    if low is None or high is None or skips is None:
        raise ctx.error("attributes min_gram_length, max_gram_length and max_skip_count are required")
    if not 1 <= low <= high or skips < 0:
        raise ctx.error(f"need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, "
                        f"got {low}, {high}, {skips}")
    pool = list(ctx.attr("pool_int64s", [], list))
    counts = list(ctx.attr("ngram_counts", [], list))
    indexes = list(ctx.attr("ngram_indexes", [], list))
    weights = ctx.attr("weights", None, list)
    if not pool or not counts or not indexes:
        raise ctx.error("attributes pool_int64s, ngram_counts and ngram_indexes are required")
    grams, total = _pool(ctx, pool, counts, low, high)
    if len(indexes) != total or min(indexes) < 0:
        raise ctx.error(f"ngram_indexes must give a non-negative column to each of the {total} n-grams, "
                        f"got {len(indexes)} values")
    width = max(indexes) + 1
    if weights is not None and mode != "TF" and len(weights) < width:
        raise ctx.error(f"weights has {len(weights)} values, the output has {width} columns")
    if len(xt.shape) not in (1, 2):
        raise ctx.error(f"the input must be 1-D or 2-D, got rank {len(xt.shape)}")
    length = xt.shape[-1]
    if not length.is_const:
        raise ctx.error(f"the row length must be static, got {length}")
    length = int(length.value)
    mask = sum(length * len(ids) * (skips + 1) * n for n, (_, ids) in grams.items())
    if mask > MAX_MASK:
        raise ctx.error(f"the comparison masks would take {mask} elements per row, more than {MAX_MASK}")
    rows = x if len(xt.shape) == 2 else ctx.emit("reshape", [x], {"shape": (as_expr(1), as_expr(length))})
    batch = ctx.type_of(rows).shape[0]
    y = ctx.emit("full", [], {"shape": (batch, as_expr(width)), "value": 0.0, "dtype": "float32"})
    for n, (tokens, ids) in sorted(grams.items()):
        found = _counts_of_length(ctx, rows, tokens, n, skips, length, xt.dtype)
        if found is None:
            continue
        columns = np.zeros((len(ids), width), np.float32)
        columns[np.arange(len(ids)), np.asarray(indexes)[ids]] = 1
        y = ctx.emit("add", [y, ctx.emit("matmul", [found, columns])])
    if mode != "TF":
        scale = np.ones(width, np.float32) if weights is None else np.asarray(weights[:width], np.float32)
        if mode == "IDF":
            y = ctx.emit("where", [ctx.emit("greater", [y, np.array(0, np.float32)]), scale, np.array(0, np.float32)])
        elif weights is not None:
            y = ctx.emit("multiply", [y, scale])
    if len(xt.shape) == 1:
        y = ctx.emit("reshape", [y], {"shape": (as_expr(width),)})
    return y
