"""ONNX import: Einsum (opset 12) over transpose, reshape, matmul, where and sum.

1. The equation is parsed into one label list per operand; an ellipsis
   stands for the operand's remaining leading dims, labelled from the right
   (so ellipsis dims broadcast as numpy's). Without "->" the output is the
   ellipsis dims, then the labels met once, in alphabetical order.
2. Each operand's repeated labels become its diagonal: a where over equal
   positions of the two axes, summed over the second.
3. A label found in no other operand and not in the output is summed out.
4. The operands are then contracted left to right, two at a time, as one
   matmul of (batch..., left, contracted) by (batch..., contracted, right):
   batch labels are in both and still needed, contracted ones in both and
   needed no more; the batch dims broadcast.
5. The result is transposed to the output's order.
"""

from __future__ import annotations

import string

import numpy as np

from ....ir.shape import as_expr
from ..context import converter

_LETTERS = set(string.ascii_letters)


def _product(dims):
    total = as_expr(1)
    for d in dims:
        total = total * d
    return total


def parse_equation(ctx, equation: str, ranks):
    """(labels per operand, output labels); ellipsis dims are labelled '.0', '.1', ..."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.error(f"equation {equation!r} has {len(terms)} operands, the node {len(ranks)}")
    parsed, ellipsis_rank = [], 0
    for index, (term, rank) in enumerate(zip(terms, ranks)):
        head, dots, tail = term.partition("...")
        if "." in head + tail or any(ch not in _LETTERS for ch in head + tail):
            raise ctx.error(f"operand {index} of equation {equation!r}: labels must be letters and one '...'")
        named = len(head) + len(tail)
        if (not dots and named != rank) or (dots and named > rank):
            raise ctx.error(f"operand {index} has rank {rank}, the equation term {term!r} names {named} dims")
        count = rank - named if dots else 0
        ellipsis_rank = max(ellipsis_rank, count)
        parsed.append((head, count, tail))
    ellipsis = [f".{i}" for i in range(ellipsis_rank)]
    operands = [list(head) + ellipsis[ellipsis_rank - count:] + list(tail) for head, count, tail in parsed]
    if arrow:
        head, dots, tail = rhs.partition("...")
        if "." in head + tail or any(ch not in _LETTERS for ch in head + tail):
            raise ctx.error(f"the output of equation {equation!r}: labels must be letters and one '...'")
        output = list(head) + (ellipsis if dots else []) + list(tail)
        seen = {label for labels in operands for label in labels}
        for label in output:
            if label not in seen:
                raise ctx.error(f"output label {label!r} of equation {equation!r} is in no operand")
        if len(set(output)) != len(output):
            raise ctx.error(f"the output of equation {equation!r} repeats a label")
    else:
        letters = [label for labels in operands for label in labels if not label.startswith(".")]
        output = ellipsis + sorted(label for label in set(letters) if letters.count(label) == 1)
    return operands, output


def _diagonal(ctx, x, labels):
    """Repeated labels of one operand reduced to their diagonal."""
    while len(set(labels)) != len(labels):
        label = next(lab for lab in labels if labels.count(lab) > 1)
        i = labels.index(label)
        j = labels.index(label, i + 1)
        dims = ctx.type_of(x).shape
        rank = len(dims)
        shape_i, shape_j = [as_expr(1)] * rank, [as_expr(1)] * rank
        shape_i[i], shape_j[j] = dims[i], dims[j]
        pos_i = ctx.emit("reshape", [ctx.emit("arange", [], {"stop": dims[i]})], {"shape": tuple(shape_i)})
        pos_j = ctx.emit("reshape", [ctx.emit("arange", [], {"stop": dims[j]})], {"shape": tuple(shape_j)})
        on_diagonal = ctx.emit("equal", [pos_i, pos_j])
        zero = np.array(0, ctx.type_of(x).dtype)
        x = ctx.emit("sum", [ctx.emit("where", [on_diagonal, x, zero])], {"axis": (j,), "keepdims": False})
        labels = labels[:j] + labels[j + 1:]
    return x, labels


def _sum_out(ctx, x, labels, needed):
    axes = tuple(i for i, label in enumerate(labels) if label not in needed)
    if not axes:
        return x, labels
    x = ctx.emit("sum", [x], {"axis": axes, "keepdims": False})
    return x, [label for label in labels if label in needed]


def _permute(ctx, x, labels, order):
    perm = tuple(labels.index(label) for label in order)
    if perm != tuple(range(len(perm))):
        x = ctx.emit("transpose", [x], {"axes": perm})
    return x


def _contract(ctx, a, la, b, lb, needed):
    """a (labels la) times b (labels lb), summed over the shared labels not `needed`."""
    batch = [label for label in la if label in lb and label in needed]
    inner = [label for label in la if label in lb and label not in needed]
    left = [label for label in la if label not in lb]
    right = [label for label in lb if label not in la]
    da = dict(zip(la, ctx.type_of(a).shape))
    db = dict(zip(lb, ctx.type_of(b).shape))
    a = _permute(ctx, a, la, batch + left + inner)
    b = _permute(ctx, b, lb, batch + inner + right)
    a = ctx.emit("reshape", [a], {"shape": (*(da[x] for x in batch), _product(da[x] for x in left),
                                            _product(da[x] for x in inner))})
    b = ctx.emit("reshape", [b], {"shape": (*(db[x] for x in batch), _product(db[x] for x in inner),
                                            _product(db[x] for x in right))})
    y = ctx.emit("matmul", [a, b])
    out_batch = ctx.type_of(y).shape[:len(batch)]
    y = ctx.emit("reshape", [y], {"shape": (*out_batch, *(da[x] for x in left), *(db[x] for x in right))})
    return y, batch + left + right


_EINSUM_DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64")


@converter("Einsum")
def convert_einsum(ctx, inputs):
    equation = ctx.attr("equation", None, str)
    if equation is None:
        raise ctx.error("attribute equation is required")
    if not inputs or any(v is None for v in inputs):
        raise ctx.error("Einsum needs at least one operand, none omitted")
    dtypes = {ctx.type_of(v).dtype for v in inputs}
    if len(dtypes) != 1:
        raise ctx.error(f"the operands must have one type, got {', '.join(sorted(dtypes))}")
    dtype = dtypes.pop()
    if dtype not in _EINSUM_DTYPES:
        raise ctx.error(f"operands of type {dtype} are not supported (supported: {', '.join(_EINSUM_DTYPES)})")
    operands, output = parse_equation(ctx, equation, [len(ctx.type_of(v).shape) for v in inputs])
    if dtype == "bfloat16":  # accumulated in float32 and rounded once, as the ONNX reference
        inputs = [ctx.emit("cast", [v], {"dtype": "float32"}) for v in inputs]
    values = []
    for x, labels in zip(inputs, operands):
        values.append(list(_diagonal(ctx, x, labels)))
    for k, (x, labels) in enumerate(values):
        needed = set(output).union(*(set(lab) for i, (_, lab) in enumerate(values) if i != k))
        values[k] = list(_sum_out(ctx, x, labels, needed))
    x, labels = values[0]
    for k in range(1, len(values)):
        needed = set(output).union(*(set(lab) for _, lab in values[k + 1:]))
        x, labels = _sum_out(ctx, x, labels, needed | set(values[k][1]))
        x, labels = _contract(ctx, x, labels, values[k][0], values[k][1], needed)
    x, labels = _sum_out(ctx, x, labels, set(output))
    x = _permute(ctx, x, labels, output)
    return ctx.emit("cast", [x], {"dtype": dtype}) if dtype == "bfloat16" else x
