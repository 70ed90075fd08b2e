"""ONNX import: scatter, gather-nd and sampling operators.

ScatterElements (11, 13, 16, 18; reduction none / add / mul / max / min),
Scatter (9, 11: ScatterElements without reduction), ScatterND (11, 13, 16,
18), GatherND (11, 12, 13; batch_dims), TensorScatter (24; linear and
circular modes, write_indices optional), GridSample (16, 20, 22) and
RoiAlign (10, 16)."""

from __future__ import annotations

import numpy as np

from ....op.scatter import REDUCTIONS
from ..context import converter


def _reduction(ctx, data):
    reduction = ctx.attr("reduction", "none", str)
    if reduction not in REDUCTIONS:
        raise ctx.error(f"reduction {reduction!r} is not supported ({', '.join(REDUCTIONS)})")
    if reduction != "none" and ctx.type_of(data).dtype == "bool":
        raise ctx.error(f"reduction {reduction} of bool data is not supported")
    return reduction


def _check_inputs(ctx, inputs, count):
    if len(inputs) < count or any(v is None for v in inputs[:count]):
        raise ctx.error(f"needs {count} inputs, got {sum(v is not None for v in inputs)}")


@converter("ScatterElements", "Scatter")
def convert_scatter_elements(ctx, inputs):
    _check_inputs(ctx, inputs, 3)
    attrs = {"axis": ctx.attr("axis", 0, int), "reduction": _reduction(ctx, inputs[0])}
    return ctx.emit("scatter_elements", inputs[:3], attrs)


@converter("ScatterND")
def convert_scatter_nd(ctx, inputs):
    _check_inputs(ctx, inputs, 3)
    return ctx.emit("scatter_nd", inputs[:3], {"reduction": _reduction(ctx, inputs[0])})


@converter("GatherND")
def convert_gather_nd(ctx, inputs):
    _check_inputs(ctx, inputs, 2)
    return ctx.emit("gather_nd", inputs[:2], {"batch_dims": ctx.attr("batch_dims", 0, int)})


@converter("TensorScatter")
def convert_tensor_scatter(ctx, inputs):
    _check_inputs(ctx, inputs, 2)
    past = ctx.type_of(inputs[0])
    if len(past.shape) < 2:
        raise ctx.error(f"past_cache must have rank >= 2 (batch first), got rank {len(past.shape)}")
    mode = ctx.attr("mode", "linear", str)
    if mode not in ("linear", "circular"):
        raise ctx.error(f"mode {mode!r} is not supported (linear or circular)")
    write = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    if write is None:
        batch = past.shape[0]
        write = np.zeros(batch.value, np.int64) if batch.is_const else \
            ctx.emit("full", [], {"shape": (batch,), "value": 0, "dtype": "int64"})
    return ctx.emit("tensor_scatter", [inputs[0], inputs[1], write], {"mode": mode, "axis": ctx.attr("axis", -2, int)})
