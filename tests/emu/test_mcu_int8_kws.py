"""The keyword-spotting DS-CNN of test_cortex_m4.py exported to ONNX and
quantized by ONNX Runtime's quantize_static (QDQ, per-channel int8 weights,
int8 activations; tests/frontend/kws_model.py), compiled for the Cortex-M4F
(qemu-cortex-m4) with the C and the LLVM backend in a fixed arena.

Checked: the outputs of 4 seeded inputs under qemu-system-arm against ONNX
Runtime with its graph optimizations off (top-1 kept, within 2 output steps)
and equal to the host build's, and to the build on a copy of the board
without the `dsp` feature (the int8 kernels' generic C path); the integer
kernels run (the profile names them) and count deterministically; memory
against the fp32 build of the same ONNX before quantization: the weights
under 40% of its, the arena smaller than its and at least the memory plan's
lower bound. Speed is not asserted: scripts/mcu_report.py prints the flash,
RAM and instruction-count figures.
"""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import relax_edge as rxe
from relax_edge.target import load_board, toolchain_problems
from tests.frontend import kws_model

BOARD = "qemu-cortex-m4"
SEEDS = range(4)
RESOLUTION = 40   # instructions per SysTick tick under -icount shift=0 (test_mcu_profile.py)
pytestmark = [pytest.mark.emu, pytest.mark.slow,
              pytest.mark.skipif(bool(toolchain_problems(load_board(BOARD))), reason="no Cortex-M4 toolchain or QEMU")]


def _reference(path):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return [sess.run(None, {"mfcc": kws_model.make_input(s)})[0] for s in SEEDS]


def _output_step(path) -> float:
    """The scale of the DequantizeLinear that makes the model's output."""
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    assert last.op_type == "DequantizeLinear", last.op_type
    return float(inits[last.input[1]])


def _run(art, board=BOARD):
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        return [loaded.run(kws_model.make_input(s))[0] for s in SEEDS]


@pytest.fixture(scope="module")
def quant_path():
    return kws_model.get_quant_model("int8")


@pytest.fixture(scope="module")
def host_outputs(quant_path, tmp_path_factory):
    art = rxe.build(rxe.from_onnx(str(quant_path)), board="host", out_dir=tmp_path_factory.mktemp("kws_host"),
                    name="kws")
    return _run(art, "host")


@pytest.fixture(scope="module", params=["c", "llvm"])
def int8_build(request, quant_path, tmp_path_factory):
    art = rxe.build(rxe.from_onnx(str(quant_path)), board=BOARD, backend=request.param,
                    out_dir=tmp_path_factory.mktemp(f"kws_int8_{request.param}"), name="kws")
    return request.param, art


@pytest.fixture(scope="module")
def float_build(tmp_path_factory):
    return rxe.build(rxe.from_onnx(str(kws_model.get_float_model())), board=BOARD,
                     out_dir=tmp_path_factory.mktemp("kws_f32"), name="kws_f32")


def test_int8_on_cortex_m4_against_onnxruntime_and_the_host(int8_build, quant_path, host_outputs):
    _, art = int8_build
    outs = _run(art)
    step = _output_step(quant_path)
    for seed, got, want, host in zip(SEEDS, outs, _reference(quant_path), host_outputs):
        assert got.shape == (1, kws_model.CLASSES)
        assert got.argmax() == want.argmax(), seed
        assert np.abs(got.astype(np.float64) - want).max() <= 2 * step + 1e-7, (seed, got, want)
        np.testing.assert_array_equal(got, host)
    assert np.std(outs[0]) > 1e-3   # not a flat output


def test_int8_kernels_run_and_count_deterministically(int8_build):
    _, art = int8_build
    x = kws_model.make_input(0)
    with rxe.connect(BOARD) as dev:
        m = dev.load(art)
        stats = m.benchmark(x, warmup=0, repeat=2)
        prof = m.profile(x)
    assert stats["unit"] == "instructions"
    assert max(stats["samples_instructions"]) - min(stats["samples_instructions"]) <= RESOLUTION, stats
    calls = {}
    for row in prof["rows"]:
        calls[row["kernel"]] = calls.get(row["kernel"], 0) + row["calls"]
    # the first conv and the 4 pointwise ones, 4 depthwise, the dense layer: each an int8 library kernel
    assert calls.get("rxe_lib_qconv2d_s8") == 5 and calls.get("rxe_lib_qdepthwise_conv2d_s8") == 4, calls
    assert calls.get("rxe_lib_qdense_s8") == 1, calls
    assert not {k for k in calls if "conv2d_f32" in k or "dense_f32" in k}, calls


def test_int8_memory_against_the_fp32_build(int8_build, quant_path, float_build):
    backend, art = int8_build
    assert isinstance(art.workspace_bytes, int) and isinstance(float_build.workspace_bytes, int)
    if backend == "c":
        bound = kws_model.arena_lower_bound(quant_path, BOARD)
        assert bound <= art.workspace_bytes, (bound, art.workspace_bytes)
    # int8 weights plus per output channel an int32 bias, multiplier, shift and packed weight sum (measured:
    # 31,169 bytes against 91,440) against float32 weights and biases
    assert art.weights_bytes < 0.4 * float_build.weights_bytes, (art.weights_bytes, float_build.weights_bytes)
    # int8 activations: the largest live set is a quarter as big
    assert art.workspace_bytes < float_build.workspace_bytes, (art.workspace_bytes, float_build.workspace_bytes)


def test_generic_c_path_gives_the_same_outputs(quant_path, host_outputs, tmp_path):
    """The board without `dsp`: the int8 kernels' portable C path, the same bits as the SMLAD path."""
    board = kws_model.board_without_dsp(tmp_path)
    art = rxe.build(rxe.from_onnx(str(quant_path)), board=board, out_dir=tmp_path / "nodsp", name="kws")
    for got, host in zip(_run(art, board), host_outputs):
        np.testing.assert_array_equal(got, host)
