"""Compiled data-dependent output sizes (ABI 3): NonZero, NonMaxSuppression,
Unique, Compress with a run-time condition and an If whose branches differ
in a dim, built for the host with the C and LLVM backends and compared with
ONNX Runtime (and numpy written from the ONNX spec) at several sizes and
counts, a count of 0 among them. Under bounded dims the arena is a
compile-time constant, the same for every count; plan reports a
data-dependent dim at its capacity and run returns the actual one (through
ctypes and through the RPC server, on the host and on qemu-aarch64). A
match_cast that only checks fails at run time with the dims named, a fresh
size beyond its bound with RXE_ERR_BOUND."""

import ctypes

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from relax_edge.codegen import abi
from relax_edge.deploy.host import server_module
from relax_edge.ir.builder import Builder
from relax_edge.ir.expr import Tuple, Var
from relax_edge.ir.shape import SizeVar
from relax_edge.ir.types import TensorType
from relax_edge.op.registry import make_call
from tests.frontend.one_node import assert_matches

BACKENDS = ["c", "llvm"]
_T = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "int32": TensorProto.INT32,
      "int64": TensorProto.INT64, "bool": TensorProto.BOOL}


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "dd", [helper.make_tensor_value_info(n, _T[d], s) for n, d, s in inputs],
                              [helper.make_empty_tensor_value_info(o) for o in outputs], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _build(model, bounds, backend, tmp_path, board="host"):
    return rxe.build(rxe.from_onnx(model, dim_bounds=bounds), board=board, backend=backend, out_dir=tmp_path,
                     name="m", quiet=True)


def _check(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_matches(np.asarray(a), np.asarray(e))


# ------------------------------------------------------------------ NonZero

NONZERO = _model([helper.make_node("NonZero", [x], [f"{x}_nz"]) for x in ("f", "i", "b", "h")],
                 [("f", "float32", ["n", 3]), ("i", "int32", [2, "n"]), ("b", "bool", ["n"]),
                  ("h", "float16", ["n", 2, 2])], ["f_nz", "i_nz", "b_nz", "h_nz"])


def _nonzero_inputs(n, seed, zero=False):
    rng = np.random.default_rng(seed)
    f = rng.integers(-1, 2, (n, 3)).astype(np.float32)
    f.reshape(-1)[0] = -0.0                     # zero
    f.reshape(-1)[-1] = np.nan                  # not zero
    i = rng.integers(-2, 2, (2, n)).astype(np.int32)
    b = rng.random(n) > 0.5
    h = rng.integers(0, 2, (n, 2, 2)).astype(np.float16)
    if zero:
        f, i, b, h = np.zeros_like(f), np.zeros_like(i), np.zeros_like(b), np.full_like(h, -0.0)
    return [f, i, b, h]


@pytest.mark.parametrize("backend", BACKENDS)
def test_nonzero_compiled_matches_numpy_and_onnx_runtime(backend, tmp_path):
    art = _build(NONZERO, {"n": 6}, backend, tmp_path)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for n, zero in ((1, False), (4, False), (6, False), (5, True)):   # the last: every count 0
            xs = _nonzero_inputs(n, n, zero)
            out = loaded.run(*xs)
            _check(out, [np.array(np.nonzero(x), np.int64) for x in xs])   # the spec: numpy's row-major order
            _check(out, _ort(NONZERO, dict(zip("fibh", xs))))
            if zero:
                assert [o.shape for o in out] == [(2, 0), (2, 0), (1, 0), (3, 0)]
        shapes, _ = loaded.plan(*_nonzero_inputs(3, 0))
        assert shapes == [(2, 9), (2, 6), (1, 3), (3, 12)]   # plan: the capacity (every element)


# ------------------------------------------------------- NonMaxSuppression

def _nms_node(name, ins, center):
    return helper.make_node("NonMaxSuppression", ["boxes", "scores", *ins], [name], name=name,
                            center_point_box=center)


def _scalar(name, dtype, value):
    return helper.make_tensor(name, dtype, [1], [value])


NMS = _model([_nms_node("corners", ["m3", "iou5"], 0), _nms_node("center_score", ["m4", "iou3", "s35"], 1),
              _nms_node("max1_iou0", ["m1", "iou0", "s2"], 0), _nms_node("none_kept", ["m4", "iou5", "s99"], 1)],
             [("boxes", "float32", ["b", "n", 4]), ("scores", "float32", ["b", 2, "n"])],
             ["corners", "center_score", "max1_iou0", "none_kept"],
             [_scalar("m3", TensorProto.INT64, 3), _scalar("m4", TensorProto.INT64, 4),
              _scalar("m1", TensorProto.INT64, 1), _scalar("iou5", TensorProto.FLOAT, 0.5),
              _scalar("iou3", TensorProto.FLOAT, 0.3), _scalar("iou0", TensorProto.FLOAT, 0.0),
              _scalar("s35", TensorProto.FLOAT, 0.35), _scalar("s2", TensorProto.FLOAT, 0.2),
              _scalar("s99", TensorProto.FLOAT, 0.99)], opset=11)
NMS_SIZES = ((1, 1), (1, 6), (2, 9), (3, 20))


def _nms_inputs(b, n, seed):
    """Overlapping boxes, corners in either order, scores with ties."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 4, (b, n, 2)).astype(np.float32)
    wh = rng.uniform(0.5, 3, (b, n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=2)
    boxes[:, ::2] = boxes[:, ::2][:, :, [2, 3, 0, 1]]
    scores = np.round(rng.uniform(0, 0.95, (b, 2, n)), 1).astype(np.float32)
    return boxes, scores


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_max_suppression_compiled_matches_onnx_runtime(backend, tmp_path):
    art = _build(NMS, {"b": 3, "n": 20}, backend, tmp_path)
    assert art.workspace_bytes is not None and art.workspace_bytes > 0   # one fixed arena (the kernels' scratch)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for b, n in NMS_SIZES:
            boxes, scores = _nms_inputs(b, n, 10 * b + n)
            out = loaded.run(boxes, scores)
            _check(out, _ort(NMS, {"boxes": boxes, "scores": scores}))
            assert out[3].shape == (0, 3)   # a score threshold above every score: a count of 0
            shapes, ws = loaded.plan(boxes, scores)
            assert shapes[0] == (b * 2 * min(n, 3), 3) and ws == art.workspace_bytes


def test_non_max_suppression_through_the_rpc_server(tmp_path):
    """The server's reply carries the actual shapes; TIME reruns into outputs a run already shrank."""
    art = _build(NMS, {"b": 3, "n": 20}, "c", tmp_path)
    module = server_module(art, "main", None, "host")
    try:
        for b, n in ((2, 9), (1, 1)):
            boxes, scores = _nms_inputs(b, n, b + n)
            _check(module.run(boxes, scores), _ort(NMS, {"boxes": boxes, "scores": scores}))
            assert module.benchmark(boxes, scores, warmup=1, repeat=2)["repeat"] == 2
    finally:
        module.close()


@pytest.mark.slow
@pytest.mark.emu
def test_non_max_suppression_compiled_on_qemu_aarch64(tmp_path):
    art = _build(NMS, {"b": 3, "n": 20}, "c", tmp_path, board="qemu-aarch64")
    with rxe.connect("qemu-aarch64") as dev:
        loaded = dev.load(art)
        for b, n in ((1, 6), (3, 20)):
            boxes, scores = _nms_inputs(b, n, 10 * b + n)
            _check(loaded.run(boxes, scores), _ort(NMS, {"boxes": boxes, "scores": scores}))


# ------------------------------------------------------------------ Unique

UNIQUE = _model([helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], sorted=1),
                 helper.make_node("Unique", ["x"], ["yu", "idxu", "invu", "cntu"], sorted=0),
                 helper.make_node("Unique", ["k"], ["ky", "kidx", "kinv", "kcnt"], axis=0),
                 helper.make_node("Unique", ["x"], ["xy1"], axis=1, sorted=0)],
                [("x", "float32", [2, "n"]), ("k", "int64", ["n", 3])],
                ["y", "idx", "inv", "cnt", "yu", "idxu", "invu", "cntu", "ky", "kidx", "kinv", "kcnt", "xy1"],
                opset=11)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unique_compiled_matches_onnx_runtime(backend, tmp_path):
    art = _build(UNIQUE, {"n": 9}, backend, tmp_path)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for n in (1, 4, 9):
            rng = np.random.default_rng(n)
            x = rng.integers(0, 3, (2, n)).astype(np.float32)
            k = rng.integers(0, 2, (n, 3)).astype(np.int64)
            out = loaded.run(x, k)
            _check(out, _ort(UNIQUE, {"x": x, "k": k}))
            values, first, inverse, counts = np.unique(x.reshape(-1), return_index=True, return_inverse=True,
                                                       return_counts=True)   # sorted=1: numpy's np.unique
            _check(out[:4], [values, first.astype(np.int64), inverse.reshape(-1).astype(np.int64),
                             counts.astype(np.int64)])


def test_unique_of_float16_is_refused_when_compiled(tmp_path):
    model = _model([helper.make_node("Unique", ["h"], ["y"], name="uh")], [("h", "float16", [4])], ["y"], opset=11)
    with pytest.raises(rxe.RelaxEdgeError, match=r"unique \(node uh\): unique of float16 is not compiled"):
        _build(model, {}, "c", tmp_path)


# ---------------------------------------------------------------- Compress

COMPRESS = _model([helper.make_node("Compress", ["x", "cond"], ["rows"], axis=0),
                   helper.make_node("Compress", ["x", "cond"], ["flat"])],
                  [("x", "float32", ["n", 4]), ("cond", "bool", ["c"])], ["rows", "flat"], opset=11)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compress_with_a_run_time_condition_compiled_with_a_fixed_arena(backend, tmp_path):
    """The arena is planned at the capacities: fixed, the same for every count."""
    art = _build(COMPRESS, {"n": 5, "c": 8}, backend, tmp_path)
    assert art.workspace_bytes is not None and art.workspace_bytes > 0
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for n, c in ((1, 1), (4, 2), (5, 5), (3, 8), (4, 3)):
            x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
            for cond in (np.random.default_rng(n + c).random(c) > 0.4, np.zeros(c, bool)):
                out = loaded.run(x, cond)
                _check(out, _ort(COMPRESS, {"x": x, "cond": cond}))
                assert loaded.plan(x, cond)[1] == art.workspace_bytes
        assert loaded.run(x, np.zeros(3, bool))[0].shape == (0, 4)


# --------------------------------------------------------------------- If

def _slice_branch(name, end):
    inits = [helper.make_tensor(f"{name}_{k}", TensorProto.INT64, [1], [v])
             for k, v in (("starts", 0), ("ends", end), ("axes", 1))]
    node = helper.make_node("Slice", ["x", f"{name}_starts", f"{name}_ends", f"{name}_axes"], [f"{name}_y"])
    return helper.make_graph([node], name, [], [helper.make_empty_tensor_value_info(f"{name}_y")], inits)


IF = _model([helper.make_node("If", ["c"], ["y"], then_branch=_slice_branch("then", 2),
                              else_branch=_slice_branch("else", 5)),
             helper.make_node("Relu", ["y"], ["z"])],
            [("x", "float32", ["n", 6]), ("c", "bool", [])], ["z"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_if_whose_branches_differ_in_a_dim_compiled(backend, tmp_path):
    art = _build(IF, {"n": 4}, backend, tmp_path)
    assert art.signature["main"]["outputs"][0]["capacity"] == "(n, 5)"
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for n in (1, 4):
            x = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
            for c in (True, False):
                out = loaded.run(x, np.array(c))
                _check(out, _ort(IF, {"x": x, "c": np.array(c)}))
                assert out[0].shape == (n, 2 if c else 5)


# -------------------------------------------------- match_cast checks, ABI

def _cast_module():
    """x (n,) cast to (m,), m <= 3 a fresh size; y (k,) cast to x's (n,): a check only."""
    n, k, m = SizeVar("n", upper=10), SizeVar("k", upper=10), SizeVar("m", upper=3, lower=0)
    x, y = Var("x", TensorType((n,), "float32")), Var("y", TensorType((k,), "float32"))
    bb = Builder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            xs = bb.match_cast(x, TensorType((m,), "float32"))
            ys = bb.match_cast(y, TensorType((n,), "float32"))
            out = bb.emit_output(make_call("negative", [xs]))
            out2 = bb.emit_output(make_call("negative", [ys]))
        bb.ret(Tuple([out, out2]))
    return bb.get()


def test_match_cast_is_a_run_time_check_and_bound(tmp_path):
    art = rxe.build(_cast_module(), board="host", backend="c", out_dir=tmp_path, name="m", quiet=True)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        x = np.arange(3, dtype=np.float32)
        _check(loaded.run(x, x + 1), [-x, -(x + 1)])
        with pytest.raises(rxe.RelaxEdgeError, match=r"RXE_ERR_SHAPE.*match_cast \S+ dimension 0 is 2, but it "
                                                     r"must equal n = 3"):
            loaded.run(x, x[:2])
        with pytest.raises(rxe.RelaxEdgeError, match=r"RXE_ERR_BOUND.*m = 4 exceeds its upper bound 3"):
            loaded.run(np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32))


def test_abi_3_arg_infos_name_the_data_dependent_dim(tmp_path):
    assert abi.ABI_VERSION == 3
    art = _build(NONZERO, {"n": 6}, "c", tmp_path)
    lib = ctypes.CDLL(str(art.shared_library))
    module = abi.Module.in_dll(lib, "m_module")
    assert module.abi_version == 3
    info = module.functions[0].outputs[0]
    assert info.shape.decode() == "(2, NonZero_0_count1)" and info.ndim == 2
