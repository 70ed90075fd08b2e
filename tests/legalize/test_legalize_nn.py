"""Legalized convolutions, pools and normalizations equal their numpy
references over a symbolic batch `n` (and a symbolic height `h`), and never
load out of bounds even when a select evaluates both of its branches."""

import numpy as np
import pytest

from relax_edge import op
from relax_edge.ir import evaluate
from relax_edge.tir.interp import _RUNTIME, PythonRenderer, render_python
from tests.legalize.harness import check_legalized, random_arrays

SIZES = [{"n": 1, "h": 5}, {"n": 2, "h": 7}]
F, I = "float32", "int32"


def conv2d(**kw):
    return lambda x, w: op.conv2d(x, w, **kw)


def conv2d_t(**kw):
    return lambda x, w: op.conv2d_transpose(x, w, **kw)


def max_pool(k, **kw):
    return lambda x: op.max_pool2d(x, k, **kw)


def avg_pool(k, **kw):
    return lambda x: op.avg_pool2d(x, k, **kw)


CONV = [
    ("conv2d_plain", [("n", 3, 6, 6), (4, 3, 3, 3)], [F, F], conv2d()),
    ("conv2d_stride_pad_dilation", [("n", 2, 7, 8), (4, 2, 3, 2)], [F, F],
     conv2d(strides=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2))),
    ("conv2d_groups", [("n", 4, 6, 6), (6, 2, 3, 3)], [F, F], conv2d(padding=(1, 1, 1, 1), groups=2)),
    ("conv2d_depthwise", [("n", 3, 6, 6), (6, 1, 3, 3)], [F, F],
     conv2d(strides=(2, 2), padding=(1, 1, 1, 1), groups=3)),
    ("conv2d_symbolic_h", [("n", 2, "h", 6), (3, 2, 3, 3)], [F, F],
     conv2d(strides=(2, 1), padding=(1, 1, 0, 2))),
    ("conv2d_int", [("n", 2, 5, 5), (2, 2, 2, 2)], [I, I], conv2d(padding=(1, 1, 1, 1))),
    ("conv2d_transpose_plain", [("n", 2, 4, 5), (2, 3, 3, 3)], [F, F], conv2d_t()),
    ("conv2d_transpose_stride_pad_dilation", [("n", 2, 4, 4), (2, 2, 3, 2)], [F, F],
     conv2d_t(strides=(2, 1), padding=(1, 0, 1, 1), output_padding=(1, 0), dilation=(1, 2))),
    ("conv2d_transpose_groups", [("n", 4, 3, 4), (4, 1, 2, 3)], [F, F],
     conv2d_t(strides=(2, 3), padding=(0, 1, 1, 0), groups=2)),
    ("conv2d_transpose_symbolic_h", [("n", 2, "h", 3), (2, 2, 3, 3)], [F, F],
     conv2d_t(strides=(2, 2), padding=(1, 1, 1, 1), output_padding=(1, 0))),
    ("conv3d", [("n", 2, 4, 5, 5), (4, 1, 2, 3, 3)], [F, F],
     lambda x, w: op.conv3d(x, w, strides=(1, 2, 1), padding=(1, 0, 1, 0, 1, 1), groups=2)),
    ("conv3d_transpose", [("n", 2, 3, 3, 4), (2, 2, 2, 2, 3)], [F, F],
     lambda x, w: op.conv3d_transpose(x, w, strides=(2, 1, 2), padding=(0, 1, 0, 1, 0, 1),
                                      output_padding=(1, 0, 0))),
]

POOL = [
    ("max_pool_plain", [("n", 3, 6, 7)], [F], max_pool((2, 2))),
    ("max_pool_pad_ceil", [("n", 2, 7, 8)], [F],
     max_pool((3, 3), strides=(2, 2), padding=(1, 1, 1, 1), ceil_mode=True)),
    ("max_pool_dilation", [("n", 2, 7, 6)], [F],
     max_pool((2, 2), strides=(1, 1), padding=(1, 0, 0, 1), dilation=(2, 1))),
    ("max_pool_symbolic_h", [("n", 2, "h", 7)], [F],
     max_pool((3, 2), strides=(2, 2), padding=(1, 0, 0, 1), ceil_mode=True)),
    ("max_pool_int", [("n", 2, 5, 5)], [I], max_pool((2, 2), strides=(2, 2), padding=(1, 1, 0, 0))),
    ("avg_pool_plain", [("n", 2, 6, 7)], [F], avg_pool((2, 2))),
    ("avg_pool_pad_excluded", [("n", 2, 7, 7)], [F], avg_pool((3, 3), strides=(2, 2), padding=(1, 1, 1, 1))),
    ("avg_pool_pad_included", [("n", 2, 7, 7)], [F],
     avg_pool((3, 3), strides=(2, 2), padding=(1, 1, 1, 1), count_include_pad=True)),
    ("avg_pool_ceil_included", [("n", 2, 6, 8)], [F],
     avg_pool((3, 2), strides=(2, 3), padding=(1, 0, 0, 1), ceil_mode=True, count_include_pad=True)),
    ("avg_pool_ceil_dilation", [("n", 2, 8, 7)], [F],
     avg_pool((2, 2), strides=(2, 2), dilation=(2, 1), ceil_mode=True)),
    ("avg_pool_symbolic_h", [("n", 2, "h", 6)], [F],
     avg_pool((3, 3), strides=(2, 2), padding=(1, 1, 1, 1), ceil_mode=True)),
    ("max_pool3d", [("n", 2, 4, 5, 5)], [F],
     lambda x: op.max_pool3d(x, (2, 3, 2), strides=(2, 2, 2), padding=(0, 1, 1, 1, 1, 0), ceil_mode=True)),
    ("avg_pool3d", [("n", 2, 4, 5, 5)], [F],
     lambda x: op.avg_pool3d(x, (2, 2, 3), strides=(1, 2, 2), padding=(1, 0, 1, 0, 1, 1))),
    ("avg_pool3d_included", [("n", 2, 4, 5, 5)], [F],
     lambda x: op.avg_pool3d(x, (2, 2, 3), strides=(2, 2, 2), padding=(1, 1, 1, 0, 1, 1),
                             ceil_mode=True, count_include_pad=True)),
]

NORM = [
    ("batch_norm_4d", [("n", 3, 4, 5)] + [(3,)] * 4, [F] * 5, lambda *a: op.batch_norm(*a, epsilon=1e-3)),
    ("batch_norm_2d", [("n", 3)] + [(3,)] * 4, [F] * 5, op.batch_norm),
    ("layer_norm_last_axis_bias", [("n", 4, 5), (5,), (5,)], [F] * 3, lambda x, s, b: op.layer_norm(x, s, b)),
    ("layer_norm_two_axes", [("n", 4, 5), (4, 5)], [F] * 2, lambda x, s: op.layer_norm(x, s, axis=1)),
    ("layer_norm_all_axes", [("n", 5), (1, 5), (5,)], [F] * 3,
     lambda x, s, b: op.layer_norm(x, s, b, axis=0, epsilon=1e-3)),
]


def _positive_variance(templates, dtypes, sizes, seed):
    arrays = random_arrays(templates, dtypes, sizes, seed)
    if len(arrays) == 5:  # batch_norm: x, scale, bias, mean, var
        arrays[4] = np.abs(arrays[4]) + 0.1
    return arrays


# ------------------------------------------ every load stays in bounds

class _EagerCheckedRenderer(PythonRenderer):
    """Evaluates both branches of every select and checks each index of
    every load against its buffer's dims (as a C backend may do)."""
    SELECT = "_select({c}, {a}, {b})"

    def load(self, e):
        name = self.name(e.buffer, e.buffer.name)
        indices = "".join(f"{self.expr(i)}, " for i in e.indices)
        dims = "".join(f"{self.int_expr(d)}, " for d in e.buffer.shape)
        return f"_load({name}, ({indices}), ({dims}))"


def _load(buf, indices, dims):
    flat = 0
    for i, d in zip(indices, dims):
        assert 0 <= i < d, f"index {i} outside [0, {d}) (all indices {indices}, dims {dims})"
        flat = flat * d + i
    return buf[flat]


def assert_loads_in_bounds(lowered, sizes, monkeypatch):
    monkeypatch.setattr(PythonRenderer, "SELECT", _EagerCheckedRenderer.SELECT)
    monkeypatch.setattr(PythonRenderer, "load", _EagerCheckedRenderer.load)
    for program in lowered.tensor_programs.values():
        source, name = render_python(program)
        scope = {**_RUNTIME, "_load": _load, "_select": lambda c, a, b: a if c else b}
        exec(compile(source, program.name, "exec"), scope)  # noqa: S102  (our own rendering)
        env = {v: sizes[v.name] for v in program.size_params}
        buffers = [np.random.default_rng(0).standard_normal(int(evaluate(b.numel(), env))).tolist()
                   for b in program.inputs]
        buffers += [[0] * int(evaluate(b.numel(), env)) for b in (*program.outputs, *program.scratch)]
        scope[name](*buffers, *env.values())


@pytest.mark.parametrize("case", CONV + POOL + NORM, ids=[c[0] for c in CONV + POOL + NORM])
def test_nn_legalize(case, monkeypatch):
    _, templates, dtypes, build = case
    lowered = check_legalized(templates, dtypes, build, SIZES, _positive_variance)
    assert_loads_in_bounds(lowered, SIZES[-1], monkeypatch)
