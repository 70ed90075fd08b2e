"""rxe_lib_matmul_nbits_f32 / _q8_f32 and rxe_lib_gather_nbits_f32
(runtime_c/kernels/matmul_nbits.c) against the operators' numpy references
(relax_edge/op/quant_weight.py, the definition) and an independent float64
dequantization written from the layout: M from 1 (the decode path) to
prefill sizes, N not a multiple of the 16-column panel, K with a partial last
block, bits 4 and 8, block sizes 16..256, the three zero modes, with and
without bias, act f32 and int8, 1 and 2 threads; against ONNX Runtime's
MatMulNBits; the kernels under QEMU (aarch64 NEON with and without dotprod,
armv7 NEON, riscv64 portable C); then graphs with a symbolic first dim (the
embedding tied to the matmul) compiled for the host (C and LLVM) and under
QEMU."""

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.interp import interpret
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Tuple, Var
from relax_edge.library.quant_weight import q8_scratch_bytes
from relax_edge.op import make_call
from relax_edge.op.quant_weight import gather_nbits_reference, matmul_nbits_reference
from relax_edge.target import load_board
from tests.library.kernel_lib import RUNTIME, WARNINGS, Error, compile_c

ZERO_CODE = {"default": 0, "uint8": 1, "float": 2}
SOURCES = [RUNTIME / "kernels" / "matmul_nbits.c", RUNTIME / "src" / "status.c", RUNTIME / "src" / "threads.c"]


class NbitsKernels:
    def __init__(self, out_dir):
        path = out_dir / "librxe_nbits.so"
        compile_c(["cc", "-O3", "-march=native", *WARNINGS, "-shared", "-fPIC", "-pthread",
                   f"-I{RUNTIME / 'include'}", *SOURCES, "-o", path])
        self.lib = ctypes.CDLL(str(path))

    def call(self, symbol, arrays, sizes):
        err = Error()
        ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
        status = getattr(self.lib, symbol)(*ptrs, *[ctypes.c_int64(int(s)) for s in sizes], ctypes.byref(err))
        return status, err.message.decode()

    def threads(self, n):
        return self.lib.rxe_threads_set_count(n)


@pytest.fixture(scope="module")
def nbits(tmp_path_factory):
    kernels = NbitsKernels(tmp_path_factory.mktemp("nbits"))
    kernels.threads(1)
    yield kernels
    kernels.threads(1)


def packed(rng, rows, k, bits, block, zero):
    """Random packed weights (padding bytes random too) and their zeros."""
    n_blocks = -(-k // block)
    qweight = rng.integers(0, 256, (rows, n_blocks, block * bits // 8), dtype=np.uint8)
    scales = (rng.random((rows, n_blocks)) * 0.1 + 0.01).astype(np.float32)
    if zero == "uint8":
        zeros = rng.integers(0, 1 << bits, (rows, n_blocks), dtype=np.uint8)
    elif zero == "float":
        zeros = (-rng.random((rows, n_blocks)) * 0.5).astype(np.float32)
    else:
        zeros = None
    return qweight, scales, zeros


def dequantized_f64(qweight, scales, zeros, k, bits, block, zero):
    """The (rows, K) weight in float64, from the layout (not the operator's code)."""
    rows, n_blocks, nbytes = qweight.shape
    w = np.zeros((rows, n_blocks * block))
    for e in range(n_blocks * block):
        b, i = divmod(e, block)
        byte = qweight[:, b, i // 2 if bits == 4 else i].astype(np.int64)
        q = ((byte >> 4) if i % 2 else (byte & 15)) if bits == 4 else byte
        if zero == "default":
            w[:, e] = (q - (1 << (bits - 1))) * scales[:, b].astype(np.float64)
        elif zero == "uint8":
            w[:, e] = (q - zeros[:, b]) * scales[:, b].astype(np.float64)
        else:
            w[:, e] = q * scales[:, b].astype(np.float64) + zeros[:, b]
    return w[:, :k]


def run_matmul(kernels, x, qweight, scales, zeros, bias, *, bits, block, zero, act="f32"):
    m, k = x.shape
    n = qweight.shape[0]
    y = np.full((m, n), np.nan, np.float32)
    arrays = [x, qweight, scales, scales if zeros is None else zeros, scales if bias is None else bias, y]
    symbol = "rxe_lib_matmul_nbits_f32"
    if act == "int8":
        symbol = "rxe_lib_matmul_nbits_q8_f32"
        arrays.append(np.full(max(q8_scratch_bytes(m, k, block) // 4, 1), np.nan, np.float32))
    status, message = kernels.call(symbol, arrays, [m, n, k, bits, block, ZERO_CODE[zero], int(bias is not None)])
    assert status == 0, message
    return y


def check_matmul(kernels, rng, m, n, k, bits, block, zero, with_bias, act="f32"):
    qweight, scales, zeros = packed(rng, n, k, bits, block, zero)
    x = rng.standard_normal((m, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    actual = run_matmul(kernels, x, qweight, scales, zeros, bias, bits=bits, block=block, zero=zero, act=act)
    rest = [a for a in (zeros, bias) if a is not None]
    expected = matmul_nbits_reference(x, qweight, scales, *rest, K=k, N=n, bits=bits, block_size=block, zero=zero,
                                      has_bias=with_bias, act=act)
    what = f"m {m} n {n} k {k} bits {bits} block {block} zero {zero} bias {with_bias} act {act}"
    scale = np.abs(expected).max() + 1
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=2e-6 * scale * k ** 0.5, err_msg=what)
    if act == "f32":   # and against float64 from the layout
        w = dequantized_f64(qweight, scales, zeros, k, bits, block, zero)
        y64 = x.astype(np.float64) @ w.T + (0 if bias is None else bias)
        np.testing.assert_allclose(actual, y64, rtol=1e-4, atol=2e-6 * scale * k ** 0.5, err_msg=what)
    return actual


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 37])
@pytest.mark.parametrize("zero", ["default", "uint8", "float"])
def test_matmul_matches_the_reference(nbits, m, zero):
    rng = np.random.default_rng(m * 7 + ZERO_CODE[zero])
    shapes = [(33, 64, 4, 16), (17, 100, 8, 32), (40, 300, 4, 64), (1, 37, 8, 128), (50, 256, 4, 256),
              (16, 9, 4, 16), (23, 529, 8, 256)]
    for i, (n, k, bits, block) in enumerate(shapes):
        check_matmul(nbits, rng, m, n, k, bits, block, zero, with_bias=i % 2 == 0)


@pytest.mark.parametrize("m", [1, 6])
@pytest.mark.parametrize("bits, block", [(4, 32), (8, 16), (4, 128)])
def test_matmul_matches_onnxruntime_matmulnbits(nbits, m, bits, block):
    """Against ONNX Runtime's com.microsoft MatMulNBits on the same packed weights (no zero points: 2^(bits-1))."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(bits + block)
    n, k = 37, 200
    qweight, scales, _ = packed(rng, n, k, bits, block, "default")
    node = helper.make_node("MatMulNBits", ["A", "B", "scales"], ["Y"], domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block)
    graph = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])],
                              initializer=[numpy_helper.from_array(qweight, "B"),
                                           numpy_helper.from_array(scales.reshape(-1), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    x = rng.standard_normal((m, k)).astype(np.float32)
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"A": x})
    actual = run_matmul(nbits, x, qweight, scales, None, None, bits=bits, block=block, zero="default")
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * (np.abs(expected).max() + 1))


@pytest.mark.parametrize("m, k, bits, block", [(1, 4100, 4, 32), (2, 2500, 8, 64), (4, 1100, 4, 128)])
def test_decode_over_several_chunks_of_x(nbits, m, k, bits, block):
    """K past the 2048 floats of x that the AVX-512 decode path stages at once (k in chunks), a partial last block."""
    for zero in ("default", "float", "uint8"):
        check_matmul(nbits, np.random.default_rng(k + ZERO_CODE[zero]), m, 21, k, bits, block, zero, with_bias=True)


@pytest.mark.parametrize("bits", [4, 8])
def test_prefill_of_128_rows(nbits, bits):
    check_matmul(nbits, np.random.default_rng(bits), 128, 70, 330, bits, 32, "default", with_bias=True)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 9])   # integer dot products up to 4 rows, then the f32 path
def test_act_int8_matches_the_reference(nbits, m):
    rng = np.random.default_rng(40 + m)
    for n, k, bits, block, zero in [(19, 96, 4, 32, "default"), (8, 70, 8, 16, "uint8"), (30, 200, 4, 64, "float"),
                                    (17, 75, 4, 16, "uint8"), (5, 300, 8, 128, "default"), (9, 256, 4, 256, "float"),
                                    (33, 40, 8, 32, "float")]:
        check_matmul(nbits, rng, m, n, k, bits, block, zero, with_bias=m == 3, act="int8")


@pytest.mark.parametrize("m, act", [(1, "f32"), (4, "f32"), (20, "f32"), (2, "int8")])
def test_two_threads_give_the_same_bits_as_one(nbits, m, act):
    rng = np.random.default_rng(m)
    qweight, scales, zeros = packed(rng, 300, 600, 4, 32, "uint8")
    x = rng.standard_normal((m, 600)).astype(np.float32)
    one = run_matmul(nbits, x, qweight, scales, zeros, None, bits=4, block=32, zero="uint8", act=act)
    previous = nbits.threads(2)
    try:
        two = run_matmul(nbits, x, qweight, scales, zeros, None, bits=4, block=32, zero="uint8", act=act)
    finally:
        nbits.threads(previous)
    assert one.tobytes() == two.tobytes()
    assert not np.isnan(one).any()


def test_empty_rows_and_bad_layouts(nbits):
    qweight, scales, _ = packed(np.random.default_rng(0), 3, 32, 4, 32, "default")
    y = np.full((1, 3), np.nan, np.float32)
    x = np.zeros((1, 32), np.float32)
    assert nbits.call("rxe_lib_matmul_nbits_f32", [x, qweight, scales, scales, scales, y],
                      [0, 3, 32, 4, 32, 0, 0]) == (0, "")
    assert np.isnan(y).all()   # m = 0: nothing written
    status, message = nbits.call("rxe_lib_matmul_nbits_f32", [x, qweight, scales, scales, scales, y],
                                 [1, 3, 32, 3, 32, 0, 0])
    assert status != 0 and "bits must be 4 or 8, got 3" in message
    status, message = nbits.call("rxe_lib_matmul_nbits_f32", [x, qweight, scales, scales, scales, y],
                                 [1, 3, 32, 4, 24, 0, 0])
    assert status != 0 and "block_size must be a power of two" in message


@pytest.mark.parametrize("zero", ["default", "uint8", "float"])
@pytest.mark.parametrize("bits", [4, 8])
def test_gather_matches_the_reference(nbits, zero, bits):
    rng = np.random.default_rng(bits + ZERO_CODE[zero])
    rows, k, block = 50, 77, 32
    qweight, scales, zeros = packed(rng, rows, k, bits, block, zero)
    for dtype in (np.int32, np.int64):
        ids = rng.integers(-rows, rows, (2, 5)).astype(dtype)
        out = np.full((2, 5, k), np.nan, np.float32)
        arrays = [qweight, scales, scales if zeros is None else zeros, ids, out]
        status, message = nbits.call("rxe_lib_gather_nbits_f32", arrays,
                                     [rows, ids.size, k, bits, block, ZERO_CODE[zero], 8 * ids.itemsize])
        assert status == 0, message
        rest = [] if zeros is None else [zeros]
        expected = gather_nbits_reference(qweight, scales, *rest, ids, K=k, bits=bits, block_size=block, zero=zero)
        np.testing.assert_array_equal(out, expected)   # each weight dequantized exactly as the reference does
        w = dequantized_f64(qweight, scales, zeros, k, bits, block, zero)
        np.testing.assert_allclose(out, w[np.where(ids < 0, ids + rows, ids)], rtol=1e-6, atol=1e-7)


def test_gather_refuses_an_index_out_of_range(nbits):
    qweight, scales, _ = packed(np.random.default_rng(1), 10, 32, 4, 32, "default")
    out = np.zeros((2, 32), np.float32)
    status, message = nbits.call("rxe_lib_gather_nbits_f32", [qweight, scales, scales, np.array([3, 10], np.int64),
                                                              out], [10, 2, 32, 4, 32, 0, 64])
    assert status != 0 and "index 10 (position 1) is outside [-10, 10)" in message


# ---- the kernels on emulated targets: NEON (aarch64 with and without dotprod, armv7), the portable C -------

EMULATED = {"neon": ("aarch64-linux-gnu-gcc", ["-O2", "-mcpu=cortex-a72"], ["qemu-aarch64", "-cpu", "max"]),
            "neon dotprod": ("aarch64-linux-gnu-gcc", ["-O2", "-march=armv8.2-a+dotprod"],
                             ["qemu-aarch64", "-cpu", "max"]),
            "armv7 neon": ("arm-linux-gnueabihf-gcc", ["-O2", "-march=armv7-a", "-mfpu=neon", "-mfloat-abi=hard"],
                           ["qemu-arm"]),
            "portable riscv64": ("riscv64-linux-gnu-gcc", ["-O2"], ["qemu-riscv64"])}


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("which", list(EMULATED))
def test_emulated_kernels_match_the_reference(tmp_path, which):
    compiler, flags, qemu = EMULATED[which]
    driver = tmp_path / "driver"
    compile_c([compiler, *flags, *WARNINGS, "-static", "-DRXE_NO_THREADS", f"-I{RUNTIME / 'include'}",
               Path(__file__).with_name("matmul_nbits_driver.c"), *SOURCES, "-o", driver])
    rng = np.random.default_rng(11)
    cases, payload = [], bytearray()
    for m, n, k, bits, block, zero, act in [(1, 21, 100, 4, 32, "default", "f32"), (3, 17, 64, 8, 16, "uint8", "f32"),
                                            (7, 20, 90, 4, 64, "float", "f32"), (1, 19, 96, 4, 32, "uint8", "int8"),
                                            (2, 9, 75, 4, 16, "default", "int8"), (4, 8, 70, 8, 32, "float", "int8")]:
        qweight, scales, zeros = packed(rng, n, k, bits, block, zero)
        x = rng.standard_normal((m, k)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32) if m % 2 else None
        payload += np.array([m, n, k, bits, block, ZERO_CODE[zero], int(bias is not None), int(act == "int8")],
                            np.int64).tobytes()
        payload += b"".join(a.tobytes() for a in (x, qweight, scales, zeros, bias) if a is not None)
        rest = [a for a in (zeros, bias) if a is not None]
        cases.append((f"{which}: m {m} n {n} k {k} bits {bits} block {block} {zero} {act}", (m, n),
                      matmul_nbits_reference(x, qweight, scales, *rest, K=k, N=n, bits=bits, block_size=block,
                                             zero=zero, has_bias=bias is not None, act=act)))
    proc = subprocess.run([*qemu, str(driver)], input=bytes(payload), capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    pos = 0
    for what, (m, n), expected in cases:
        status = int(np.frombuffer(proc.stdout, np.int64, 1, pos)[0])
        y = np.frombuffer(proc.stdout, np.float32, m * n, pos + 8).reshape(m, n)
        pos += 8 + 4 * m * n
        assert status == 0, what
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4 * (np.abs(expected).max() + 1), err_msg=what)
    assert pos == len(proc.stdout)


# ---- through a compiled graph: y = matmul_nbits(x (seq, K)) + bias, the embedding tied ----------------------

def tied_graph(k, n, bits, block, zero, seed, act="f32"):
    """main(x (seq, K), ids (seq,)) -> (matmul_nbits(x) with bias, gather_nbits(ids)), the same constants."""
    rng = np.random.default_rng(seed)
    qweight, scales, zeros = packed(rng, n, k, bits, block, zero)
    bias = rng.standard_normal(n).astype(np.float32)
    consts = [Constant(qweight), Constant(scales)] + ([] if zeros is None else [Constant(zeros)])
    seq = SizeVar("seq")
    x = Var("x", TensorType((seq, k), "float32"))
    ids = Var("ids", TensorType((seq,), "int64"))
    attrs = dict(K=k, bits=bits, block_size=block, zero=zero)
    bb = Builder()
    with bb.function("main", [x, ids]):
        with bb.dataflow():
            y = bb.emit(make_call("matmul_nbits", [x, *consts, Constant(bias)],
                                  dict(N=n, has_bias=True, act=act, **attrs)))
            e = bb.emit(make_call("gather_nbits", [*consts, ids], attrs))
            out = bb.emit_output(Tuple([y, e]))
        bb.ret(out)
    rest = [] if zeros is None else [zeros]

    def expected(xv, idv):
        return (matmul_nbits_reference(xv, qweight, scales, *rest, bias, K=k, N=n, bits=bits, block_size=block,
                                       zero=zero, has_bias=True, act=act),
                gather_nbits_reference(qweight, scales, *rest, idv, K=k, bits=bits, block_size=block, zero=zero))
    return bb.get(), expected, qweight.nbytes + scales.nbytes + (0 if zeros is None else zeros.nbytes) + bias.nbytes


def check_graph(tmp_path, board, backend, seqs, k=96, n=40, bits=4, block=32, zero="default", act="f32"):
    mod, expected, packed_bytes = tied_graph(k, n, bits, block, zero, seed=k + n, act=act)
    art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / "art", name="nbits", quiet=True,
                    profile=False)
    assert art.weights_bytes <= packed_bytes + 256   # the packed constants once (shared by both calls)
    rng = np.random.default_rng(0)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for seq in seqs:
            xv = rng.standard_normal((seq, k)).astype(np.float32)
            idv = rng.integers(-n, n, seq).astype(np.int64)
            y, e = loaded.run(xv, idv)
            want_y, want_e = expected(xv, idv)
            np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-4, err_msg=f"{board} {backend} seq {seq}")
            np.testing.assert_array_equal(e, want_e)


def test_interpreted_legalized_module_runs_the_reference():
    from relax_edge.transform.legalize import legalize
    mod, expected, _ = tied_graph(48, 20, 8, 16, "uint8", seed=3)
    lowered = legalize(mod)
    assert {"rxe_lib_matmul_nbits_f32", "rxe_lib_gather_nbits_f32"} <= set(lowered.externs)
    xv = np.random.default_rng(1).standard_normal((3, 48)).astype(np.float32)
    idv = np.array([0, -1, 7], np.int64)
    y, e = interpret(lowered, xv, idv)
    want_y, want_e = expected(xv, idv)
    np.testing.assert_allclose(y, want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(e, want_e)


@pytest.mark.parametrize("backend, act", [("c", "f32"), ("llvm", "f32"), ("c", "int8"), ("llvm", "int8")])
def test_compiled_graph_matches_the_reference_at_each_seq(tmp_path, backend, act):
    check_graph(tmp_path, "host", backend, [1, 2, 4, 5, 37], zero="float" if backend == "llvm" else "default", act=act)


def test_weight_blob_holds_the_packed_size(tmp_path):
    """A 4-bit matmul_nbits's blob is about 1/8 of its float32 weight (plus the scales)."""
    k, n = 512, 256
    mod, _, packed_bytes = tied_graph(k, n, 4, 32, "default", seed=5)
    art = rxe.build(mod, board="host", backend="c", out_dir=tmp_path / "art", name="blob", quiet=True, profile=False)
    assert art.weights_bytes <= packed_bytes + 256
    assert art.weights_bytes < 0.16 * (4 * k * n)


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("board", ["qemu-aarch64", "qemu-riscv64"])   # NEON, the portable C
def test_compiled_graph_under_qemu(tmp_path, board):
    check_graph(tmp_path, board, "c", [1, 3, 8], k=80, n=21, bits=8 if board == "qemu-riscv64" else 4,
                zero="uint8")


AVX512 = ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mfma"]


@pytest.mark.parametrize("flags", [[], ["-mavx2", "-mfma"], AVX512])
def test_stack_use_within_the_stated_bounds(tmp_path, flags):
    """kernels_quant.h's bounds against gcc -fstack-usage: an entry's frame plus its deepest callee's."""
    compile_c(["gcc", "-O2", "-std=c99", *flags, f"-I{RUNTIME / 'include'}", "-fstack-usage", "-c",
               RUNTIME / "kernels" / "matmul_nbits.c", "-o", tmp_path / "m.o"])
    frames = {line.split("\t")[0].rsplit(":", 1)[-1]: int(line.split("\t")[1])
              for line in (tmp_path / "m.su").read_text().splitlines()}
    assert all("dynamic" not in line or "bounded" in line for line in (tmp_path / "m.su").read_text().splitlines())
    assert frames["gemm_task"] <= 10240
    gemv = frames["gemv_task"] + frames.get("fast_task", 0)   # the AVX-512 decode path, when not inlined
    f32 = frames["rxe_lib_matmul_nbits_f32"] + max(frames["gemm_task"], gemv)
    q8 = frames["rxe_lib_matmul_nbits_q8_f32"] + max(f32, frames["q8_task"])
    assert f32 <= 11264 and q8 <= 11264 and frames["rxe_lib_gather_nbits_f32"] <= 512


@pytest.mark.parametrize("board_name", ["host", "qemu-aarch64", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"])
def test_compiles_without_warnings_for_each_board(tmp_path, board_name):
    target = load_board(board_name).target
    freestanding = ["-ffreestanding"] if target.freestanding else []
    compile_c([target.compiler, *target.cflags, *freestanding, *WARNINGS, f"-I{RUNTIME / 'include'}", "-c",
               RUNTIME / "kernels" / "matmul_nbits.c", "-o", tmp_path / "matmul_nbits.o"])
