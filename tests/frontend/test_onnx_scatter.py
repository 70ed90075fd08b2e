"""ONNX ScatterElements / Scatter, ScatterND, GatherND, TensorScatter,
GridSample, RoiAlign and DeformConv: the ONNX backend node cases that use
them; one-node models over symbolic dims imported and interpreted (the
numpy references of relax_edge/op/scatter.py and op/sampling.py) at several
sizes, and compiled on the host with the C and LLVM backends (several
operators per model, to keep builds few), against ONNX Runtime where it
runs the form and onnx.reference elsewhere; a GatherND of a data-dependent
number of index tuples (NonZero, as SSD-style postprocessing); out-of-range
scatter indices skipped by compiled code; qemu-aarch64 rows; bad input
refused with the node named."""

import zlib
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import relax_edge as rxe
from relax_edge.errors import InterpretError
from relax_edge.frontend.onnx import node_tests
from tests.frontend.one_node import assert_matches, compiled

OPS = frozenset({"ScatterElements", "Scatter", "ScatterND", "GatherND", "TensorScatter", "GridSample", "RoiAlign",
                 "DeformConv"})
NODE_CASES = [c for c in node_tests.collect_cases()
              if node_tests.case_ops(c) & OPS and not node_tests.scope_problem(c.model)]


def test_every_operator_has_node_cases():
    ops = set()
    for c in NODE_CASES:
        ops |= node_tests.case_ops(c)
    assert OPS <= ops, OPS - ops


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------------------ one-node models

_TYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "int32": TensorProto.INT32,
          "int64": TensorProto.INT64}
SIZES = [1, 2, 4]


@dataclass
class Case:
    name: str
    op_type: str
    inputs: list                  # (name, shape, dtype); "n" and "h", "w" are symbolic
    make: object                  # make(rng, dims) -> list of arrays
    attrs: dict = field(default_factory=dict)
    opset: int = 18
    ort: bool = True              # False: onnx.reference gives the expected values
    tol: float = 0.0
    expect: object = None         # expect(arrays): numpy from the spec, where neither reference runs the form
    nodes: object = None          # nodes(input names, output name): the graph, where it is not one node


def _dims(n):
    return {"n": n, "h": n + 2, "w": 2 * n + 1}


def _model(cases, name="m"):
    """One graph with a node per case, inputs and outputs prefixed by the case's number."""
    nodes, inputs, outputs = [], [], []
    for k, case in enumerate(cases):
        names = [f"c{k}_{i[0]}" for i in case.inputs]
        if case.nodes is not None:
            nodes += case.nodes(names, f"c{k}_y", f"c{k}")
        else:
            nodes.append(helper.make_node(case.op_type, names, [f"c{k}_y"], name=case.name, **case.attrs))
        inputs += [helper.make_tensor_value_info(nm, _TYPES[dt], shape)
                   for nm, (_, shape, dt) in zip(names, case.inputs)]
        outputs.append(helper.make_empty_tensor_value_info(f"c{k}_y"))
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(c.opset for c in cases))])
    model.ir_version = 8
    return model


def _feeds(case, n):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + n)
    return case.make(rng, _dims(n))


def _expected(case, arrays):
    if case.expect is not None:
        return case.expect(arrays)
    model = _model([case])
    feed = {f"c0_{i[0]}": a for i, a in zip(case.inputs, arrays)}
    if case.ort:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feed)[0]
    return ReferenceEvaluator(model).run(None, feed)[0]


def _normal(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def _indices(rng, low, high, shape):
    return rng.integers(low, high, shape).astype(np.int64)


def _se(rng, d, data, idx, axis, dtype="float32", negative=True):
    """ScatterElements arrays: data of shape `data`, indices/updates of shape `idx` in range along `axis`."""
    dims = [d.get(s, s) for s in data]
    ishape = [d.get(s, s) for s in idx]
    dim = dims[axis]
    return [_normal(rng, dims, dtype) if dtype.startswith("float") else _indices(rng, -9, 10, dims).astype(dtype),
            _indices(rng, -dim if negative else 0, dim, ishape),
            _normal(rng, ishape, dtype) if dtype.startswith("float") else _indices(rng, -3, 4, ishape).astype(dtype)]


def _snd(rng, d, data, lead, k, dtype="float32"):
    """ScatterND arrays: data of shape `data`, `lead` index tuples of length k, updates to match."""
    dims = [d.get(s, s) for s in data]
    lead = [d.get(s, s) for s in lead]
    idx = np.stack([_indices(rng, -dims[j], dims[j], lead) for j in range(k)], axis=-1)
    ushape = lead + dims[k:]
    upd = _normal(rng, ushape, dtype) if dtype.startswith("float") else _indices(rng, -4, 5, ushape).astype(dtype)
    data_arr = _normal(rng, dims, dtype) if dtype.startswith("float") else _indices(rng, -9, 10, dims).astype(dtype)
    return [data_arr, idx, upd]


def _gnd(rng, d, data, lead, k, b):
    dims = [d.get(s, s) for s in data]
    lead = [d.get(s, s) for s in lead]
    idx = np.stack([_indices(rng, -dims[b + j], dims[b + j], lead) for j in range(k)], axis=-1)
    return [_normal(rng, dims), idx]


def _ts(rng, d, past, update, axis, high):
    p = [d.get(s, s) for s in past]
    u = [d.get(s, s) for s in update]
    return [_normal(rng, p), _normal(rng, u), _indices(rng, 0, high, [p[0]])]


def _gs(rng, d, x, grid, spread=1.3):
    xs = [d.get(s, s) for s in x]
    gs = [d.get(s, s) for s in grid]
    return [_normal(rng, xs), rng.uniform(-spread, spread, gs).astype(np.float32)]


def _roi(rng, d, x, count):
    xs = [d.get(s, s) for s in x]
    n = d.get(count, count)
    corners = rng.uniform(-1.0, max(xs[2], xs[3]) + 1.0, (n, 2, 2))
    rois = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1).astype(np.float32)
    return [_normal(rng, xs), rois, _indices(rng, 0, xs[0], [n])]


def _inputs(names_shapes_dtypes):
    return list(names_shapes_dtypes)


CASES = [
    Case("se_axis0_none", "ScatterElements", _inputs([("data", ["n", 5], "float32"), ("indices", [3, 5], "int64"),
                                                      ("updates", [3, 5], "float32")]),
         lambda r, d: _se(r, d, ["n", 5], [3, 5], 0), {"axis": 0}, 11, ort=False),
    Case("se_axis1_add", "ScatterElements", _inputs([("data", [4, "n"], "float32"), ("indices", [3, 3], "int64"),
                                                     ("updates", [3, 3], "float32")]),
         lambda r, d: _se(r, d, [4, "n"], [3, 3], 1), {"axis": 1, "reduction": "add"}, 16, tol=1e-5),
    Case("se_neg_axis_mul_int32", "ScatterElements",
         _inputs([("data", [2, "n", 3], "int32"), ("indices", [2, 4, 3], "int64"), ("updates", [2, 4, 3], "int32")]),
         lambda r, d: _se(r, d, [2, "n", 3], [2, 4, 3], 1, "int32"), {"axis": -2, "reduction": "mul"}, 16, ort=False),
    Case("se_max", "ScatterElements", _inputs([("data", ["n", 3, 2], "float32"), ("indices", [5, 3, 2], "int64"),
                                               ("updates", [5, 3, 2], "float32")]),
         lambda r, d: _se(r, d, ["n", 3, 2], [5, 3, 2], 0), {"axis": 0, "reduction": "max"}, 18),
    Case("se_min_axis2", "ScatterElements", _inputs([("data", [2, 3, "n"], "float32"), ("indices", [2, 2, 3], "int64"),
                                                     ("updates", [2, 2, 3], "float32")]),
         lambda r, d: _se(r, d, [2, 3, "n"], [2, 2, 3], 2), {"axis": 2, "reduction": "min"}, 18),
    # onnx.reference has no Scatter: ONNX Runtime, one update per column (no duplicate targets)
    Case("scatter_opset9", "Scatter", _inputs([("data", ["n", 4], "float32"), ("indices", [1, 3], "int64"),
                                               ("updates", [1, 3], "float32")]),
         lambda r, d: _se(r, d, ["n", 4], [1, 3], 0, negative=False), {"axis": 0}, 9),
    Case("snd_none", "ScatterND", _inputs([("data", ["n", 3, 2], "float32"), ("indices", [4, 2], "int64"),
                                           ("updates", [4, 2], "float32")]),
         lambda r, d: _snd(r, d, ["n", 3, 2], [4], 2), {}, 11, ort=False),
    Case("snd_add_slices", "ScatterND", _inputs([("data", ["n", 4], "float32"), ("indices", [2, 3, 1], "int64"),
                                                 ("updates", [2, 3, 4], "float32")]),
         lambda r, d: _snd(r, d, ["n", 4], [2, 3], 1), {"reduction": "add"}, 16, ort=False, tol=1e-5),
    Case("snd_mul", "ScatterND", _inputs([("data", [3, "n"], "float32"), ("indices", [3, 2], "int64"),
                                          ("updates", [3], "float32")]),
         lambda r, d: _snd(r, d, [3, "n"], [3], 2), {"reduction": "mul"}, 16, ort=False, tol=1e-6),
    Case("snd_max_int64", "ScatterND", _inputs([("data", ["n", 2, 3], "int64"), ("indices", [5, 1], "int64"),
                                                ("updates", [5, 2, 3], "int64")]),
         lambda r, d: _snd(r, d, ["n", 2, 3], [5], 1, "int64"), {"reduction": "max"}, 18, ort=False),
    Case("snd_min", "ScatterND", _inputs([("data", ["n", 3], "float32"), ("indices", ["n", 1], "int64"),
                                          ("updates", ["n", 3], "float32")]),
         lambda r, d: _snd(r, d, ["n", 3], ["n"], 1), {"reduction": "min"}, 18, ort=False),
    # the number of index tuples is its own run-time size (w), as after a NonZero
    Case("gnd_b0", "GatherND", _inputs([("data", ["n", 3, 4], "float32"), ("indices", ["w", 2], "int64")]),
         lambda r, d: _gnd(r, d, ["n", 3, 4], ["w"], 2, 0), {}, 13),
    Case("gnd_b1", "GatherND", _inputs([("data", ["n", 3, 4], "float32"), ("indices", ["n", 6, 1], "int64")]),
         lambda r, d: _gnd(r, d, ["n", 3, 4], ["n", 6], 1, 1), {"batch_dims": 1}, 13),
    Case("gnd_b2_scalars", "GatherND", _inputs([("data", [2, "n", 4, 3], "float32"),
                                                ("indices", [2, "n", 2, 2], "int64")]),
         lambda r, d: _gnd(r, d, [2, "n", 4, 3], [2, "n", 2], 2, 2), {"batch_dims": 2}, 13),
    Case("ts_linear", "TensorScatter", _inputs([("past", ["n", 2, 6, 3], "float32"),
                                                ("update", ["n", 2, 2, 3], "float32"),
                                                ("write_indices", ["n"], "int64")]),
         lambda r, d: _ts(r, d, ["n", 2, 6, 3], ["n", 2, 2, 3], 2, 5), {}, 24, ort=False),
    Case("ts_circular_axis1", "TensorScatter", _inputs([("past", ["n", 5, 4], "float32"),
                                                        ("update", ["n", 3, 4], "float32"),
                                                        ("write_indices", ["n"], "int64")]),
         lambda r, d: _ts(r, d, ["n", 5, 4], ["n", 3, 4], 1, 12), {"mode": "circular", "axis": 1}, 24, ort=False),
    Case("ts_no_write_indices", "TensorScatter", _inputs([("past", ["n", 4, 2], "float32"),
                                                          ("update", ["n", 3, 2], "float32")]),
         lambda r, d: _ts(r, d, ["n", 4, 2], ["n", 3, 2], 1, 1)[:2], {"axis": 1}, 24, ort=False),
    Case("gs_bilinear_zeros", "GridSample", _inputs([("x", ["n", 2, 4, 5], "float32"),
                                                     ("grid", ["n", 3, 4, 2], "float32")]),
         lambda r, d: _gs(r, d, ["n", 2, 4, 5], ["n", 3, 4, 2]), {}, 16, tol=2e-5),
    Case("gs_nearest_border_align", "GridSample", _inputs([("x", ["n", 1, 3, 4], "float32"),
                                                           ("grid", ["n", 2, 5, 2], "float32")]),
         lambda r, d: _gs(r, d, ["n", 1, 3, 4], ["n", 2, 5, 2]),
         {"mode": "nearest", "padding_mode": "border", "align_corners": 1}, 16, tol=1e-6),
    Case("gs_bicubic_reflection", "GridSample", _inputs([("x", ["n", 2, 5, 4], "float32"),
                                                         ("grid", ["n", 3, 3, 2], "float32")]),
         lambda r, d: _gs(r, d, ["n", 2, 5, 4], ["n", 3, 3, 2], 2.5),
         {"mode": "bicubic", "padding_mode": "reflection"}, 16, tol=2e-5),
    Case("gs_cubic_border_align_20", "GridSample", _inputs([("x", [1, 2, "h", "w"], "float32"),
                                                            ("grid", [1, "n", 3, 2], "float32")]),
         lambda r, d: _gs(r, d, [1, 2, "h", "w"], [1, "n", 3, 2]),
         {"mode": "cubic", "padding_mode": "border", "align_corners": 1}, 20, tol=2e-5),
    Case("gs_linear_reflection_align_5d", "GridSample", _inputs([("x", ["n", 2, 3, 4, 2], "float32"),
                                                                 ("grid", ["n", 2, 2, 3, 3], "float32")]),
         lambda r, d: _gs(r, d, ["n", 2, 3, 4, 2], ["n", 2, 2, 3, 3], 2.2),
         {"mode": "linear", "padding_mode": "reflection", "align_corners": 1}, 20, ort=False, tol=2e-5),
    Case("gs_nearest_zeros_5d", "GridSample", _inputs([("x", ["n", 1, 2, 3, 4], "float32"),
                                                       ("grid", ["n", 3, 2, 2, 3], "float32")]),
         lambda r, d: _gs(r, d, ["n", 1, 2, 3, 4], ["n", 3, 2, 2, 3]), {"mode": "nearest"}, 22, ort=False),
    Case("roi_avg_half_pixel", "RoiAlign", _inputs([("x", [2, 3, 6, 7], "float32"), ("rois", ["n", 4], "float32"),
                                                    ("batch_indices", ["n"], "int64")]),
         lambda r, d: _roi(r, d, [2, 3, 6, 7], "n"),
         {"output_height": 3, "output_width": 2, "sampling_ratio": 2, "spatial_scale": 0.75}, 16, tol=2e-5),
    Case("roi_max_output_half_pixel", "RoiAlign", _inputs([("x", [1, 2, "h", "w"], "float32"),
                                                           ("rois", [3, 4], "float32"),
                                                           ("batch_indices", [3], "int64")]),
         lambda r, d: _roi(r, d, [1, 2, d["h"], d["w"]], 3),
         {"mode": "max", "output_height": 2, "output_width": 2, "sampling_ratio": 3,
          "coordinate_transformation_mode": "output_half_pixel"}, 16, ort=False, tol=2e-5),
    Case("roi_avg_opset10", "RoiAlign", _inputs([("x", [2, 1, 5, 5], "float32"), ("rois", ["n", 4], "float32"),
                                                 ("batch_indices", ["n"], "int64")]),
         lambda r, d: _roi(r, d, [2, 1, 5, 5], "n"),
         {"output_height": 2, "output_width": 3, "sampling_ratio": 1, "spatial_scale": 1.0}, 10, tol=2e-5),
]


# ------------------------------------------------ out-of-range indices and data-dependent counts

def _scatter_nd_in_range(arrays):
    """ScatterND (reduction none) from the spec over the in-range index tuples only: what compiled code gives."""
    data, idx, upd = arrays
    out = data.copy()
    for tup, u in zip(idx.reshape(-1, idx.shape[-1]), upd.reshape((-1,) + data.shape[idx.shape[-1]:])):
        dims = np.array(data.shape[:len(tup)])
        if np.all((tup >= -dims) & (tup < dims)):
            out[tuple(tup)] = u
    return out


def _snd_out_of_range(rng, d):
    data, idx, upd = _snd(rng, d, ["n", 3], [4], 2)
    idx[1] = (d["n"], 0)        # past the end of axis 0
    idx[3] = (0, -4)            # before the start of axis 1
    return [data, idx, upd]


def _tensor_scatter_in_range(arrays):
    """TensorScatter linear from the spec, writes past the cache dropped: what compiled code gives."""
    past, update, write = arrays
    out = past.copy()
    for b in range(past.shape[0]):
        for s in range(update.shape[1]):
            if 0 <= write[b] + s < past.shape[1]:
                out[b, write[b] + s] = update[b, s]
    return out


def _gather_positive(names, out, prefix):
    """GatherND of x at the positions NonZero finds (x > 0): a data-dependent number of index tuples."""
    zero = helper.make_tensor(f"{prefix}_zero", TensorProto.FLOAT, [], [0.0])
    return [helper.make_node("Constant", [], [f"{prefix}_z"], value=zero),
            helper.make_node("Greater", [names[0], f"{prefix}_z"], [f"{prefix}_pos"]),
            helper.make_node("NonZero", [f"{prefix}_pos"], [f"{prefix}_nz"]),
            helper.make_node("Transpose", [f"{prefix}_nz"], [f"{prefix}_idx"], perm=[1, 0]),
            helper.make_node("GatherND", [names[0], f"{prefix}_idx"], [out], name="gather_positive")]


CASES += [
    Case("snd_out_of_range", "ScatterND", _inputs([("data", ["n", 3], "float32"), ("indices", [4, 2], "int64"),
                                                   ("updates", [4], "float32")]),
         _snd_out_of_range, {}, 11, expect=_scatter_nd_in_range),
    Case("ts_linear_past_the_end", "TensorScatter", _inputs([("past", ["n", 4, 2], "float32"),
                                                            ("update", ["n", 3, 2], "float32"),
                                                            ("write_indices", ["n"], "int64")]),
         lambda r, d: _ts(r, d, ["n", 4, 2], ["n", 3, 2], 1, 4), {"axis": 1}, 24, expect=_tensor_scatter_in_range),
    Case("gnd_nonzero_positions", "GatherND", _inputs([("x", ["n", 4], "float32")]),
         lambda r, d: [_normal(r, [d["n"], 4])], {}, 13, nodes=_gather_positive),
]


def _deform(rng, d, x, w, offset, extra=()):
    """DeformConv arrays: input, weights, offsets (spread about 1.5 pixels), then bias / mask as `extra` names."""
    shapes = {"x": x, "w": w, "offset": offset, **dict(extra)}
    arrays = [_normal(rng, [d.get(v, v) for v in shapes[k]]) for k in shapes]
    arrays[2] = arrays[2] * np.float32(1.5)
    if "mask" in shapes:
        arrays[-1] = rng.uniform(0.0, 1.0, arrays[-1].shape).astype(np.float32)
    return arrays


CASES += [
    Case("deform_basic", "DeformConv", _inputs([("x", ["n", 2, 4, 5], "float32"), ("w", [3, 2, 2, 2], "float32"),
                                                ("offset", ["n", 8, 3, 4], "float32")]),
         lambda r, d: _deform(r, d, ["n", 2, 4, 5], [3, 2, 2, 2], ["n", 8, 3, 4]), {}, 19, tol=2e-5),
    Case("deform_groups_mask_bias", "DeformConv",
         _inputs([("x", ["n", 4, 5, 5], "float32"), ("w", [4, 2, 3, 3], "float32"),
                  ("offset", ["n", 36, 3, 3], "float32"), ("b", [4], "float32"), ("mask", ["n", 18, 3, 3], "float32")]),
         lambda r, d: _deform(r, d, ["n", 4, 5, 5], [4, 2, 3, 3], ["n", 36, 3, 3],
                              [("b", [4]), ("mask", ["n", 18, 3, 3])]),
         {"group": 2, "offset_group": 2, "pads": [1, 1, 1, 1], "strides": [2, 2]}, 19, tol=2e-5),
]
OUT_OF_RANGE = {"snd_out_of_range", "ts_linear_past_the_end"}
BY_NAME = {c.name: c for c in CASES}


def _check(case, actual, expected):
    assert_matches(np.asarray(actual), expected, case.tol)


INTERPRETED = [c for c in CASES if c.name not in OUT_OF_RANGE]


@pytest.mark.parametrize("case", INTERPRETED, ids=[c.name for c in INTERPRETED])
def test_interpreted_matches_reference(case):
    mod = rxe.from_onnx(_model([case]))
    for n in SIZES:
        arrays = _feeds(case, n)
        _check(case, rxe.interpret(mod, *arrays), _expected(case, arrays))


def test_onnx_runtime_agrees_where_it_runs_the_form():
    """Cases left to onnx.reference for their duplicate indices or opset: ONNX
    Runtime agrees on the forms it runs (without duplicates for reduction none)."""
    for name in ("se_axis0_none", "snd_add_slices", "snd_max_int64", "gs_linear_reflection_align_5d"):
        case = BY_NAME[name]
        arrays = _feeds(case, 3)
        if case.attrs.get("reduction", "none") == "none" and case.op_type != "GridSample":
            arrays[1] = np.arange(arrays[1].size).reshape(arrays[1].shape) % 3   # distinct targets along axis 0
        model = _model([case])
        feed = {f"c0_{i[0]}": a for i, a in zip(case.inputs, arrays)}
        want = ReferenceEvaluator(model).run(None, feed)[0]
        got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
        assert_matches(got, want, 2e-5)


# Few builds: one model per group and backend (at the latest opset of the group). Every scatter case is
# compiled with both backends; the sampling cases (large kernels, slow to compile) are split between them so
# that each operator is compiled with both. Left out: the cases whose meaning is their opset's (Scatter, gone
# since opset 11; RoiAlign-10's coordinate shift) and the NonZero positions (nonzero has no tensor program).
_INTERPRETED_ONLY = {"scatter_opset9", "roi_avg_opset10", "gnd_nonzero_positions"}
_SCATTER = [c for c in CASES if c.name not in _INTERPRETED_ONLY and c.op_type in (
    "ScatterElements", "ScatterND", "GatherND", "TensorScatter")]
_SAMPLING_LLVM = {"gs_cubic_border_align_20", "gs_linear_reflection_align_5d", "roi_max_output_half_pixel",
                  "deform_basic"}
_SAMPLING = [c for c in CASES if c.name not in _INTERPRETED_ONLY and c.op_type in (
    "GridSample", "RoiAlign", "DeformConv")]
GROUPS = {("scatter", "c"): _SCATTER, ("scatter", "llvm"): _SCATTER,
          ("sampling", "c"): [c for c in _SAMPLING if c.name not in _SAMPLING_LLVM],
          ("sampling", "llvm"): [c for c in _SAMPLING if c.name in _SAMPLING_LLVM]}


def test_every_compiled_case_is_compiled_once_per_backend_pair():
    assert {c.name for c in GROUPS["sampling", "c"] + GROUPS["sampling", "llvm"]} == {c.name for c in _SAMPLING}
    for backend in ("c", "llvm"):
        assert {c.op_type for c in GROUPS["sampling", backend]} == {"GridSample", "RoiAlign", "DeformConv"}


# each group's C source stays small (review once saw a ~34 MB one for the sampling cases)
MAX_C_SOURCE_BYTES = 1 << 20


@pytest.mark.parametrize("group,backend", list(GROUPS), ids=[f"{g}-{b}" for g, b in GROUPS])
def test_compiled_matches_reference(group, backend, tmp_path):
    cases = GROUPS[group, backend]
    with compiled(_model(cases), backend, tmp_path) as loaded:
        if backend == "c":
            assert (tmp_path / "m.c").stat().st_size < MAX_C_SOURCE_BYTES
        for n in SIZES:
            arrays = [_feeds(c, n) for c in cases]
            outs = loaded.run(*[a for arrs in arrays for a in arrs])
            for case, arrs, out in zip(cases, arrays, outs):
                _check(case, out, _expected(case, arrs))


@pytest.mark.parametrize("name,message", [("snd_out_of_range", r"scatter_nd index \[2, 0\] out of range"),
                                          ("ts_linear_past_the_end", "out of range for a cache of 4")])
def test_interpreter_refuses_out_of_range_indices(name, message):
    """The interpreter (the numpy reference's IndexError) refuses where compiled code skips the update (checked in the
    compiled groups against the spec's result over the in-range updates)."""
    case = BY_NAME[name]
    arrays = _feeds(case, 2)
    if name == "ts_linear_past_the_end":
        arrays[2][:] = 3
    with pytest.raises(InterpretError, match=message):
        rxe.interpret(rxe.from_onnx(_model([case])), *arrays)


# on the emulated board (its server takes at most RXE_RPC_MAX_TENSORS = 16 inputs): a case per scatter operator
# (out-of-range skipping included), and one per sampling operator (GridSample cubic, the most taps)
EMULATED = [[BY_NAME[n] for n in ("se_neg_axis_mul_int32", "snd_none", "snd_out_of_range", "gnd_b1",
                                  "ts_circular_axis1")],
            [BY_NAME[n] for n in ("gs_bicubic_reflection", "roi_max_output_half_pixel", "deform_basic")]]


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("group", [0, 1], ids=["scatter", "sampling"])
def test_compiled_on_qemu_aarch64(group, tmp_path):
    cases = EMULATED[group]
    art = rxe.build(rxe.from_onnx(_model(cases)), board="qemu-aarch64", backend="c", out_dir=tmp_path / "art",
                    name="m", quiet=True, profile=False)
    loaded = rxe.connect("qemu-aarch64").load(art)
    for n in (1, 4):
        arrays = [_feeds(c, n) for c in cases]
        outs = loaded.run(*[a for arrs in arrays for a in arrs])
        for case, arrs, out in zip(cases, arrays, outs):
            _check(case, out, _expected(case, arrs))


# ------------------------------------------------------------------------ bad input

def _bad(op_type, inputs, attrs, opset=18):
    graph = helper.make_graph(
        [helper.make_node(op_type, [i[0] for i in inputs], ["y"], name="bad", **attrs)], "bad",
        [helper.make_tensor_value_info(nm, dt, shape) for nm, shape, dt in inputs],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


F, I = TensorProto.FLOAT, TensorProto.INT64
_SE = [("data", ["n", 4], F), ("indices", [2, 4], I), ("updates", [2, 4], F)]
_ND = [("data", ["n", 4], F), ("indices", [3, 1], I), ("updates", [3, 4], F)]
_GS = [("x", ["n", 2, 4, 4], F), ("grid", ["n", 3, 3, 2], F)]
_ROI = [("x", [1, 2, 4, 4], F), ("rois", ["n", 4], F), ("batch_indices", ["n"], I)]


@pytest.mark.parametrize("model,message", [
    (_bad("ScatterElements", _SE, {"reduction": "sub"}), r"bad \(ScatterElements\).*reduction 'sub' is not supported"),
    (_bad("ScatterElements", _SE, {"axis": 2}), r"bad \(ScatterElements\).*axis 2 out of range for rank 2"),
    (_bad("ScatterElements", [_SE[0], ("indices", [2, 4], F), _SE[2]], {}),
     r"bad \(ScatterElements\).*indices must be int32 or int64, got float32"),
    (_bad("ScatterElements", [("data", ["n", 4], TensorProto.BOOL), _SE[1], ("updates", [2, 4], TensorProto.BOOL)],
          {"reduction": "add"}), r"bad \(ScatterElements\).*reduction add of bool data is not supported"),
    (_bad("ScatterElements", [_SE[0], ("indices", [2, 5], I), ("updates", [2, 5], F)], {}),
     r"bad \(ScatterElements\).*indices dim 1 exceeds the data's"),
    (_bad("ScatterND", [_ND[0], _ND[1], ("updates", [3, 5], F)], {}),
     r"bad \(ScatterND\).*updates dim 1 must be 4"),
    (_bad("ScatterND", [_ND[0], ("indices", [3, "k"], I), _ND[2]], {}),
     r"bad \(ScatterND\).*indices must have rank >= 1 and a static last dim"),
    (_bad("ScatterND", [_ND[0], ("indices", [3, 3], I), ("updates", [3], F)], {}),
     r"bad \(ScatterND\).*index tuples of length 3 for data of rank 2"),
    (_bad("GatherND", [_ND[0], ("indices", ["n", 1], I)], {"batch_dims": 2}, 13),
     r"bad \(GatherND\).*batch_dims 2 must be less than the ranks"),
    (_bad("GatherND", [("data", [3, 4], F), ("indices", [2, 1], I)], {"batch_dims": 1}, 13),
     r"bad \(GatherND\).*batch dim 0 of indices and data differ"),
    (_bad("TensorScatter", [("past", ["n", 4, 2], F), ("update", ["n", 2, 2], F)], {"mode": "ring"}, 24),
     r"bad \(TensorScatter\).*mode 'ring' is not supported"),
    (_bad("TensorScatter", [("past", ["n", 4, 2], F), ("update", ["n", 2, 2], F)], {"axis": 0}, 24),
     r"bad \(TensorScatter\).*axis must not be the batch axis 0"),
    (_bad("TensorScatter", [("past", ["n", 4, 2], F), ("update", ["n", 5, 2], F)], {"axis": 1}, 24),
     r"bad \(TensorScatter\).*the update's sequence exceeds the cache's"),
    (_bad("GridSample", _GS, {"mode": "area"}, 16), r"bad \(GridSample\).*mode 'area' is not supported"),
    (_bad("GridSample", _GS, {"padding_mode": "wrap"}, 20), r"bad \(GridSample\).*padding_mode 'wrap' is not supp"),
    (_bad("GridSample", [("x", ["n", 2, 3, 4, 4], F), ("grid", ["n", 2, 3, 3, 3], F)], {}, 16),
     r"bad \(GridSample\).*an input of rank 5 is not supported \(GridSample-16 takes rank 4\)"),
    (_bad("GridSample", [("x", ["n", 2, 3, 4, 4], F), ("grid", ["n", 2, 3, 3, 3], F)], {"mode": "cubic"}, 20),
     r"bad \(GridSample\).*mode cubic of a rank 5 input is not supported"),
    (_bad("GridSample", [_GS[0], ("grid", ["n", 3, 3, 3], F)], {}, 16),
     r"bad \(GridSample\).*grid must have shape \(N, 2 output dims, 2\)"),
    (_bad("GridSample", [("x", ["n", 2, 4, 4], TensorProto.INT32), ("grid", ["n", 3, 3, 2], F)], {}, 16),
     r"bad \(GridSample\).*argument 0 must be floating point, got int32"),
    (_bad("RoiAlign", _ROI, {"sampling_ratio": 0}, 16),
     r"bad \(RoiAlign\).*sampling_ratio 0 \(an adaptive grid per roi\) is not supported"),
    (_bad("RoiAlign", _ROI, {}, 16), r"bad \(RoiAlign\).*sampling_ratio 0"),
    (_bad("RoiAlign", _ROI, {"sampling_ratio": 2, "mode": "sum"}, 16), r"bad \(RoiAlign\).*mode 'sum' is not supp"),
    (_bad("RoiAlign", _ROI, {"sampling_ratio": 2, "coordinate_transformation_mode": "align_corners"}, 16),
     r"bad \(RoiAlign\).*coordinate_transformation_mode 'align_corners' is not supported"),
    (_bad("RoiAlign", _ROI, {"sampling_ratio": 2, "output_height": 0}, 16),
     r"bad \(RoiAlign\).*output_height must be a positive integer, got 0"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)
