"""qdense and qconv2d lowered to the int8 kernels (relax_edge/library/qint8.py)
and compiled: the legalized module calls rxe_lib_qdense_s8 /
rxe_lib_qconv2d_s8 / rxe_lib_qdepthwise_conv2d_s8 with the weights packed by
the code generator and the im2col scratch planned; compiled on the host with
the C and the LLVM backends (a symbolic batch, uint8 and int8 models, zero
points, fused clamps) and under QEMU on the dotprod board and the Cortex-M4, against a numpy
mirror of the contract (tests/library/qint8_lib.py)."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.errors import RelaxEdgeError
from relax_edge.ir import Builder, CallExtern, Constant, SizeVar, TensorType, Var
from relax_edge.library import qint8 as Q
from relax_edge.op import make_call
from relax_edge.target import load_board
from relax_edge.transform.legalize import legalize
from tests.library.qint8_lib import Q_multiplier, conv_expected, dense_expected


def _params(rng, n, k):
    pairs = [Q_multiplier(r) for r in rng.uniform(0.3, 3.0, n) / (64.0 * k ** 0.5)]
    return (rng.integers(-3000, 3000, n).astype(np.int32), np.array([p[0] for p in pairs], np.int32),
            np.array([p[1] for p in pairs], np.int32))


def model(seed=0):
    """x (batch, 3, 9, 8) uint8 -> qconv2d 3x3 s2 pad 1 (8 ch) -> depthwise 3x3 -> 1x1 (12 ch), int8, relu ->
    flattened (batch*12, 20) -> qdense (10) uint8; and the numpy mirror of it."""
    rng = np.random.default_rng(seed)
    w1 = rng.integers(0, 256, (8, 3, 3, 3)).astype(np.uint8)
    w2 = rng.integers(-128, 128, (8, 1, 3, 3)).astype(np.int8)
    w3 = rng.integers(-128, 128, (12, 8, 1, 1)).astype(np.int8)
    w4 = rng.integers(-128, 128, (10, 20)).astype(np.int8)
    p1, p2, p3, p4 = _params(rng, 8, 27), _params(rng, 8, 9), _params(rng, 12, 8), _params(rng, 10, 20)
    batch = SizeVar("batch", upper=4)
    x = Var("x", TensorType((batch, 3, 9, 8), "uint8"))
    conv1 = {"strides": (2, 2), "padding": (1, 1, 1, 1), "x_zero": 128, "w_zero": 120, "out_zero": -3,
             "out_dtype": "int8"}
    conv2 = {"padding": (1, 1, 1, 1), "groups": 8, "x_zero": -3, "out_zero": 5, "out_dtype": "int8"}
    conv3 = {"x_zero": 5, "out_zero": -10, "out_dtype": "int8", "act_min": -10}
    dense = {"x_zero": -10, "w_zero": 0, "out_zero": 128, "out_dtype": "uint8"}
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(make_call("qconv2d", [x, Constant(w1), *map(Constant, p1)], conv1))
            y = bb.emit(make_call("qconv2d", [y, Constant(w2), *map(Constant, p2)], conv2))
            y = bb.emit(make_call("qconv2d", [y, Constant(w3), *map(Constant, p3)], conv3))
            y = bb.emit(make_call("reshape", [y], {"shape": (-1, 20)}))
            out = bb.emit_output(bb.emit(make_call("qdense", [y, Constant(w4), *map(Constant, p4)], dense)))
        bb.ret(out)

    def expected(xv):
        y = conv_expected(xv, w1, *p1, (2, 2), (1, 1, 1, 1), (1, 1), 1, 128, 120, -3, -128, 127, "int8")
        y = conv_expected(y, w2, *p2, (1, 1), (1, 1, 1, 1), (1, 1), 8, -3, 0, 5, -128, 127, "int8")
        y = conv_expected(y, w3, *p3, (1, 1), (0, 0, 0, 0), (1, 1), 1, 5, 0, -10, -10, 127, "int8")
        return dense_expected(y.reshape(-1, 20), w4, *p4, -10, 0, 128, 0, 255, "uint8")
    return bb.get(), expected


def test_legalize_calls_the_int8_kernels():
    mod, _ = model()
    main = legalize(mod).functions["main"]
    calls = [b.value for blk in main.body.blocks for b in blk.bindings if isinstance(b.value, CallExtern)]
    assert [c.name for c in calls] == [Q.CONV2D, Q.DEPTHWISE, Q.CONV2D, Q.DENSE]
    assert [c.attrs.get("scratch_bytes") is not None for c in calls] == [True, True, True, False]
    # the depthwise 3x3 stride 1 to 5x4, a small plane: the 5x4 image channels last, 8 channels padded to 16
    assert int(calls[1].attrs["scratch_bytes"]) == 5 * 4 * 16
    # 5x4 output pixels, one block: the NHWC slice (4*2+3 rows x 3*2+3 columns x 3 channels), 20 im2col rows
    assert int(calls[0].attrs["scratch_bytes"]) == 11 * 9 * 3 + 20 * 27
    assert int(calls[2].attrs["scratch_bytes"]) == 20 * 8     # 1x1: the 20 pixels of 8 channels transposed
    assert dict(calls[0].attrs["pack"]) == {1: "qconv2d"} and dict(calls[3].attrs["pack"]) == {1: "qdense"}


def _lowered(x_type, w, attrs):
    x = Var("x", x_type)
    bb = Builder()
    n = w.shape[0]
    params = [Constant(np.zeros(n, np.int32)), Constant(np.full(n, 1 << 30, np.int32)), Constant(np.zeros(n, np.int32))]
    with bb.function("main", [x]):
        bb.ret(bb.emit(make_call(attrs.pop("op"), [x, Constant(w), *params], attrs)))
    return legalize(bb.get()).functions["main"]


def test_a_dsp_microcontroller_sizes_the_depthwise_scratch_for_its_planes():
    """The Cortex-M4 with DSP takes the phase planes at every size: legalized for it, the depthwise call gets
    the planes' bytes alone and says so in its dtypes (RXE_QINT8_DW_PLANES_ONLY); for the host, both paths."""
    mod, _ = model()
    for board, scratch, flagged in (("qemu-cortex-m4", (5 + 2 + 1) * (4 + 2) * 2, True), ("host", 5 * 4 * 16, False)):
        main = legalize(mod, load_board(board).target).functions["main"]
        calls = [b.value for blk in main.body.blocks for b in blk.bindings if isinstance(b.value, CallExtern)]
        dw = calls[1]
        assert dw.name == Q.DEPTHWISE
        assert int(dw.attrs["scratch_bytes"]) == scratch, board
        assert bool(int(dw.attrs["sizes"][-1]) & Q.DW_PLANES_ONLY) is flagged, board


def test_a_large_depthwise_kernel_goes_through_the_gemm():
    main = _lowered(TensorType((1, 4, 12, 12), "int8"), np.ones((4, 1, 9, 9), np.int8),
                    {"op": "qconv2d", "groups": 4, "x_zero": 0, "out_zero": 0, "out_dtype": "int8"})
    (call,) = [b.value for blk in main.body.blocks for b in blk.bindings if isinstance(b.value, CallExtern)]
    # 4x4 outputs, one block: the slice 12 x 12 x 1 channel, 16 im2col rows of 81
    assert call.name == Q.CONV2D and int(call.attrs["scratch_bytes"]) == 12 * 12 + 16 * 81


def test_a_reduction_deeper_than_the_kernels_is_refused():
    with pytest.raises(RelaxEdgeError, match=r"qdense.*reduction depth 70000 is not a constant up to 65536"):
        _lowered(TensorType((2, 70000), "int8"), np.ones((3, 70000), np.int8),
                 {"op": "qdense", "x_zero": 0, "out_zero": 0, "out_dtype": "int8"})


def test_the_interpreter_runs_the_legalized_module():
    mod, expected = model()
    x = np.random.default_rng(1).integers(0, 256, (2, 3, 9, 8)).astype(np.uint8)
    np.testing.assert_array_equal(rxe.interpret(legalize(mod), x), expected(x))


def check_compiled(tmp_path, board, backend, batches):
    mod, expected = model()
    art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / "art", name="qnet", quiet=True, profile=False)
    rng = np.random.default_rng(2)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for batch in batches:
            x = rng.integers(0, 256, (batch, 3, 9, 8)).astype(np.uint8)
            (actual,) = loaded.run(x)
            np.testing.assert_array_equal(actual, expected(x), err_msg=f"{board} {backend} batch {batch}")


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_model_matches_the_mirror(tmp_path, backend):
    check_compiled(tmp_path, "host", backend, [1, 3])


@pytest.mark.slow
@pytest.mark.emu
def test_compiled_model_under_qemu_with_dotprod(tmp_path):
    check_compiled(tmp_path, "qemu-aarch64-dotprod", "c", [1, 2])


@pytest.mark.slow
@pytest.mark.emu
def test_compiled_model_on_the_cortex_m4(tmp_path):
    """No OS: the SMLAD GEMM, the im2col scratch in the arena, semihosting."""
    check_compiled(tmp_path, "qemu-cortex-m4", "c", [2])
