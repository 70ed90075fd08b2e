"""The LLVM backend's host functions and entry table (codegen/llvm/host.py):
a backend="llvm" artifact has no generated C for the model. Whole models
(the MLP with a bounded dynamic batch, the CNN, BERT with seq <= 64) match
the numpy reference or ONNX Runtime at two sizes on the host and under
qemu-aarch64 (through the profiled host module of the RPC server), the MLP
on armv7 and riscv64 and the CNN on a Cortex-M4F; bad inputs, workspaces and
outputs get the C build's status and message; the fixed arena is reported
the same way; benchmark and profile work; the host modules pass the LLVM
verifier for every target; and the ABI structs that LLVM lays out for each
target agree with the board's C compiler on abi.h."""

import ctypes
import json
import subprocess

import llvmlite.binding as llvm
import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from relax_edge.cli import main as cli_main
from relax_edge.codegen import abi
from relax_edge.codegen.llvm import abi as llvm_abi
from relax_edge.codegen.llvm import generate_llvm, prepare_module
from relax_edge.codegen.llvm.target import machine_spec, target_machine
from relax_edge.deploy.host import _tensor
from relax_edge.ir import SizeVar
from relax_edge.target import load_board
from relax_edge.toolchain import RUNTIME_DIR, Toolchain
from relax_edge.transform.legalize import legalize
from tests import models
from tests.onnx_models import get_model

TARGETS = ["host", "qemu-aarch64", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"]
MAX_BATCH = 16
# rxe_error_t is left out: its status is an enum, one byte with arm-none-eabi's short
# enums; the generated code only passes `err` on (the runtime writes it)
C_NAMES = {abi.DType: "rxe_dtype_t", abi.Tensor: "rxe_tensor_t",
           abi.ArgInfo: "rxe_arg_info_t", abi.ProfileEntry: "rxe_profile_entry_t", abi.Function: "rxe_function_t",
           abi.Module: "rxe_module_t"}


def mlp_module():
    """The MLP over a batch n <= 16: a fixed arena."""
    return models.build_mlp(models.mlp_weights(), batch=SizeVar("n", upper=MAX_BATCH))


def cnn_module():
    return models.build_cnn(models.cnn_weights())


def mlp_input(batch, seed=0):
    return np.random.default_rng(seed).standard_normal((batch, 784)).astype(np.float32)


def cnn_input(batch, seed=0):
    return np.random.default_rng(seed).standard_normal((batch, 1, 16, 16)).astype(np.float32)


def build(mod, board, directory, name, backend="llvm"):
    return rxe.build(mod, board=board, backend=backend, out_dir=directory, name=name)


@pytest.fixture(scope="module")
def mlp_arts(tmp_path_factory):
    """The MLP built with LLVM and with C for the host."""
    mod = mlp_module()
    return mod, {b: build(mod, "host", tmp_path_factory.mktemp(f"mlp_{b}"), "mlp", b) for b in ("llvm", "c")}


def assert_no_model_c(art):
    files = {p.name for p in art.out_dir.iterdir()}
    assert f"{art.prefix}.c" not in files, files
    assert {f"{art.prefix}_host.o", f"{art.prefix}_kernels.o", f"{art.prefix}_weights.S"} <= files, files


# ---- numerics ------------------------------------------------------------------

@pytest.mark.parametrize("board", ["host", "qemu-aarch64"])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_model_matches_reference_at_two_sizes(model, board, tmp_path):
    mod, make = (mlp_module(), mlp_input) if model == "mlp" else (cnn_module(), cnn_input)
    art = build(mod, board, tmp_path, model)
    assert_no_model_c(art)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for batch in (1, 5):
            x = make(batch, seed=batch)
            out = loaded.run(x)[0]
            assert out.shape[0] == batch
            np.testing.assert_allclose(out, rxe.interpret(mod, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("board", ["qemu-armv7", "qemu-riscv64"])
def test_mlp_on_32_bit_arm_and_riscv64(board, tmp_path):
    mod = mlp_module()
    art = build(mod, board, tmp_path, "mlp")
    assert_no_model_c(art)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for batch in (1, MAX_BATCH):
            x = mlp_input(batch, seed=batch)
            np.testing.assert_allclose(loaded.run(x)[0], rxe.interpret(mod, x), rtol=1e-4, atol=1e-5)
        with pytest.raises(rxe.RuntimeCheckError, match=r"RXE_ERR_BOUND: input x dimension 0: n = 17 exceeds"):
            loaded.run(mlp_input(MAX_BATCH + 1))


@pytest.mark.emu
def test_cnn_on_cortex_m4_runner(tmp_path):
    """No OS: the runner (semihosting) reads the 32-bit entry table; it holds the profiled host module (the
    runner is what profiles on bare metal), and there is no server."""
    mod = cnn_module()
    art = build(mod, "qemu-cortex-m4", tmp_path, "cnn")
    assert_no_model_c(art)
    assert art.server is None and (tmp_path / "cnn_host_profiled.o").exists()
    with rxe.connect("qemu-cortex-m4") as dev:
        loaded = dev.load(art)
        for batch in (1, 2):
            x = cnn_input(batch, seed=batch)
            np.testing.assert_allclose(loaded.run(x)[0], rxe.interpret(mod, x), rtol=1e-4, atol=1e-5)
        with pytest.raises(rxe.RuntimeCheckError, match=r"RXE_ERR_SHAPE: input x dimension 2 is 15, but it must be 16"):
            loaded.run(np.zeros((1, 1, 15, 16), np.float32))


@pytest.mark.parametrize("board", ["host", "qemu-aarch64"])
def test_bert_matches_onnxruntime_at_two_lengths(board, tmp_path):
    path, spec = get_model("bert")
    art = build(rxe.from_onnx(str(path), dim_bounds={"seq": 64}), board, tmp_path, "bert")
    assert_no_model_c(art)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for k in (0, 1):
            feeds = spec["make_inputs"](seed=k, **{d: pair[k] for d, pair in spec["dynamic"].items()})
            for ours, ref in zip(loaded.run(*feeds.values()), session.run(None, feeds), strict=True):
                assert ours.shape == ref.shape
                np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
        ids = np.zeros((1, 8), np.int64)
        with pytest.raises(rxe.RuntimeCheckError,
                           match=r"RXE_ERR_SHAPE: input attention_mask dimension 1 is 9, but it must equal seq = 8"):
            loaded.run(ids, np.zeros((1, 9), np.int64))
        with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_BOUND: input input_ids dimension 1: seq = 65 exceeds"):
            loaded.run(np.zeros((1, 65), np.int64), np.zeros((1, 65), np.int64))


# ---- checks: the C build's statuses and messages --------------------------------

def raw_run(loaded, x, out_shape, ws_bytes, ws_shift=0):
    """Call the run entry directly (status, message) with a chosen output and workspace."""
    keep = []
    out = np.zeros(out_shape, np.float32)
    inputs = (abi.Tensor * 1)(_tensor(x, keep))
    outputs = (abi.Tensor * 1)(_tensor(out, keep))
    raw = np.zeros(ws_bytes + 2 * abi.WORKSPACE_ALIGNMENT, np.uint8)
    start = (-raw.ctypes.data) % abi.WORKSPACE_ALIGNMENT + ws_shift
    err = abi.Error()
    status = loaded.fn.run(inputs, outputs, raw.ctypes.data + start, ws_bytes, ctypes.byref(err))
    return abi.STATUS_NAMES[status], err.message.decode()


def outcome(case, loaded):
    """(status, message) of a failing case, ("RXE_OK", result) of one that returns."""
    try:
        return "RXE_OK", case(loaded)
    except rxe.RuntimeCheckError as err:
        return str(err).split(": ", 1)


def test_bad_inputs_get_the_c_builds_status_and_message(mlp_arts):
    _, arts = mlp_arts
    host = rxe.connect("host")
    loaded = {b: host.load(a) for b, a in arts.items()}
    x = mlp_input(3)
    _, fixed = loaded["c"].plan(x)
    cases = {
        "dimension": lambda m: m.run(mlp_input(3)[:, :5]),
        "bound": lambda m: m.run(mlp_input(MAX_BATCH + 1)),
        "dtype": lambda m: m.run(x.astype(np.float64)),
        "rank": lambda m: m.run(x[0]),
        "workspace size": lambda m: m.workspace_bytes(n=MAX_BATCH + 1),
        "small workspace": lambda m: raw_run(m, x, (3, 10), fixed - 1),
        "misaligned workspace": lambda m: raw_run(m, x, (3, 10), fixed, ws_shift=8),
        "output dimension": lambda m: raw_run(m, x, (3, 9), fixed),
        "output rank": lambda m: raw_run(m, x, (30,), fixed),
        "good": lambda m: raw_run(m, x, (3, 10), fixed),
    }
    seen = {name: [outcome(case, m) for m in loaded.values()] for name, case in cases.items()}
    for name, (ours, theirs) in seen.items():
        assert list(ours) == list(theirs), name
    assert list(seen["dimension"][0]) == ["RXE_ERR_SHAPE", "input x dimension 1 is 5, but it must be 784"]
    assert seen["bound"][0][0] == "RXE_ERR_BOUND" and "n = 17 exceeds" in seen["bound"][0][1]
    assert seen["small workspace"][0][1] == ("RXE_ERR_WORKSPACE", f"workspace of {fixed - 1} bytes, {fixed} needed")
    assert seen["misaligned workspace"][0][1] == ("RXE_ERR_WORKSPACE", "workspace is not aligned to 64 bytes")
    assert seen["output dimension"][0][1][0] == "RXE_ERR_SHAPE"
    assert seen["good"][0][1] == ("RXE_OK", "")


def test_fixed_arena_is_reported_and_planned(mlp_arts):
    _, arts = mlp_arts
    art = arts["llvm"]
    assert art.workspace_bytes is not None and art.workspace_bytes > 0
    assert art.workspace_bytes == arts["c"].workspace_bytes
    loaded = rxe.connect("host").load(art)
    assert loaded.fn.fixed_workspace_bytes == art.workspace_bytes
    assert [loaded.fn.size_names[i] for i in range(loaded.fn.num_sizes + 1)] == [b"n", None]
    for batch in (1, MAX_BATCH):
        shapes, ws = loaded.plan(mlp_input(batch))
        assert shapes == [(batch, 10)] and ws == art.workspace_bytes
        assert loaded.workspace_bytes(n=batch) == art.workspace_bytes
    assert f"#define MLP_WORKSPACE_BYTES {art.workspace_bytes}u" in art.header.read_text()


# ---- benchmark and profile --------------------------------------------------------

def test_benchmark_and_profile_on_host(mlp_arts):
    _, arts = mlp_arts
    x = mlp_input(4)
    loaded = rxe.connect("host").load(arts["llvm"])
    try:
        stats = loaded.benchmark(x, warmup=1, repeat=3)
        prof = loaded.profile(x)
    finally:
        loaded.close()
    assert stats["repeat"] == 3 and stats["median_ms"] > 0
    kernels = {row["kernel"] for row in prof["rows"]}
    assert "rxe_lib_dense_f32" in kernels and "mlp_k_softmax" in kernels   # a library kernel and a generated one
    assert all(row["calls"] == 1 for row in prof["rows"]) and prof["kernels_ms"] > 0


@pytest.mark.parametrize("board", ["host", "qemu-aarch64"])
def test_cli_bench_profile_of_an_llvm_artifact(board, tmp_path, capsys):
    art = build(mlp_module(), board, tmp_path / "mlp", "mlp")
    out = tmp_path / "bench.json"
    assert cli_main(["bench", str(art.out_dir), "--profile", "--repeat", "2", "--warmup", "1",
                     "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["board"] == board and result["benchmark"]["repeat"] == 2
    assert {row["kernel"] for row in result["profile"]["rows"]} >= {"rxe_lib_dense_f32", "mlp_k_softmax"}


# ---- IR and ABI -----------------------------------------------------------------

def test_host_modules_pass_the_verifier_on_every_target():
    for mod in (mlp_module(), cnn_module()):
        sources = generate_llvm(legalize(mod), "m")
        assert set(sources.modules) == {"kernels", "host", "host_profiled"}
        for board in TARGETS:
            for stem in ("host", "host_profiled"):
                prepare_module(sources.modules[stem], load_board(board).target)   # raises when invalid


def _llvm_layout(ctype, target_data) -> tuple:
    """(size, field offsets) of a mirrored struct under a target's data layout."""
    ref = llvm.parse_assembly(f"@g = external global {llvm_abi.llvm_type(ctype)}")
    t = ref.get_global_variable("g").global_value_type
    return target_data.get_abi_size(t), [target_data.get_element_offset(t, i) for i in range(len(ctype._fields_))]


@pytest.mark.parametrize("board", TARGETS)
def test_abi_structs_laid_out_as_the_boards_c_compiler_does(board, tmp_path):
    target = load_board(board).target
    target_data = target_machine(machine_spec(target)).target_data
    lines = ['#include <stddef.h>', '#include "relax_edge/abi.h"']
    for ctype, c_name in C_NAMES.items():
        size, offsets = _llvm_layout(ctype, target_data)
        lines.append(f"_Static_assert(sizeof({c_name}) == {size}, \"sizeof {c_name}\");")
        for (name, _), offset in zip(ctype._fields_, offsets):
            lines.append(f"_Static_assert(offsetof({c_name}, {name}) == {offset}, \"{c_name}.{name}\");")
    if board == "host":   # and the ctypes mirror itself, on this machine
        assert _llvm_layout(abi.Function, target_data) == (ctypes.sizeof(abi.Function),
                                                           [getattr(abi.Function, n).offset for n, _ in
                                                            abi.Function._fields_])
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    tc = Toolchain.for_board(load_board(board))
    proc = subprocess.run([tc.cc, *tc.cflags, "-std=c11", f"-I{RUNTIME_DIR / 'include'}", "-c", str(src), "-o",
                           str(tmp_path / "layout.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
