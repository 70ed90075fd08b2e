"""Golden text of generated kernels: the C (the kernels section of PREFIX.c)
and the LLVM IR (the kernels module) of four small modules after the whole
pipeline: an elementwise add + relu, a GELU fused from multiply, erf and
add, a sum over the last axis (4 partial accumulators), and a
scale-and-shift over symbolic (m, n) with a vector main loop, a remainder
loop and a parallel branch taken above a work threshold.

The modules are scheduled for qemu-aarch64 (128-bit NEON, 4 float lanes,
fixed in its board file): the host board's width is probed from the CPU it
runs on, so its text would differ between machines. The same scheduled
module is then built for the host with both backends, and must match the
numpy reference at two sizes (the larger ones of the 2-D kernels take the
parallel branch), so the golden text is code that works.

    RXE_UPDATE_GOLDEN=1 pytest tests/codegen/test_golden_kernels.py   # rewrites tests/codegen/golden/
"""

import difflib
import os
from pathlib import Path

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.codegen.c.module import generate_c
from relax_edge.codegen.llvm import generate_llvm
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.op.registry import make_call
from tests.legalize.harness import random_arrays

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN_BOARD = "qemu-aarch64"
UPDATE = os.environ.get("RXE_UPDATE_GOLDEN") == "1"
REGENERATE = "RXE_UPDATE_GOLDEN=1 pytest tests/codegen/test_golden_kernels.py"
C_KERNELS_BEGIN, C_KERNELS_END = "/* ---- kernels ---- */\n", "/* ---- host functions ---- */"


def _constant(value):
    return np.array(value, np.float32)


def gelu_erf(x):
    """0.5 x (1 + erf(x / sqrt 2)), as ONNX exporters write it."""
    half_x = op.multiply(x, _constant(0.5))
    return op.multiply(half_x, op.add(make_call("erf", [op.multiply(x, _constant(0.5 ** 0.5))]), _constant(1.0)))


# name: (templates, dtypes, build, what the C kernel must show, sizes of the two runs)
CASES = {
    "add_relu": ([("n",), ("n",)], ["float32"] * 2, lambda a, b: op.relu(op.add(a, b)),
                 ("k_fused_add_relu", "(n / 4)", "(n % 4)"), ({"n": 3}, {"n": 37})),
    "gelu_erf": ([("n",)], ["float32"], gelu_erf,
                 ("k_fused_", "rxe_v4f32_erf", "rxe_f32_erf"), ({"n": 5}, {"n": 64})),
    "row_sum": ([("m", "n")], ["float32"], lambda x: op.sum(x, axis=(1,)),
                ("sum_acc_lanes", "(n / 4)", "(n % 4)"), ({"m": 2, "n": 3}, {"m": 300, "n": 129})),
    "scale_shift": ([("m", "n"), ("n",), ("n",)], ["float32"] * 3, lambda x, s, b: op.add(op.multiply(x, s), b),
                    ("k_fused_multiply_add", "(n / 4)", "(n % 4)", "rxe_threads_parallel_for"),
                    ({"m": 1, "n": 7}, {"m": 300, "n": 129})),
}


def dataflow_module(templates, dtypes, build):
    """`build` over inputs of the templates' dims ('m', 'n' symbolic), in one dataflow block (which fuse merges)."""
    size_vars = {}

    def dim(d):
        return size_vars.setdefault(d, SizeVar(d)) if isinstance(d, str) else d

    params = [Var(f"x{i}", TensorType([dim(d) for d in t], dt)) for i, (t, dt) in enumerate(zip(templates, dtypes))]
    bb = Builder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(build(*params))
        bb.ret(out)
    return bb.get()


def c_kernels(mod, name) -> str:
    """The kernels section of the generated PREFIX.c (no host code, no weights)."""
    (text,) = [t for f, t in generate_c(mod, name).files.items() if f.endswith(".c")]
    begin = text.index(C_KERNELS_BEGIN) + len(C_KERNELS_BEGIN)
    return text[begin:text.index(C_KERNELS_END, begin)].strip() + "\n"


def llvm_kernels(mod, name) -> str:
    """The generated LLVM kernels module without its module header lines."""
    text = str(generate_llvm(mod, name, profiled=False).modules["kernels"])
    lines = [line for line in text.splitlines() if not line.startswith(("; ModuleID", "target "))]
    return "\n".join(lines).strip() + "\n"


def check_golden(path: Path, actual: str) -> None:
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual)
        return
    if not path.exists():
        pytest.fail(f"{path} is missing; make it with {REGENERATE}")
    expected = path.read_text()
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            fromfile=str(path), tofile="generated"))
        pytest.fail(f"generated code differs from {path.name}:\n{diff}\nif the change is intended: {REGENERATE}")


@pytest.mark.parametrize("name", CASES)
def test_golden_kernel_text_and_numbers(name, tmp_path):
    templates, dtypes, build, shows, sizes = CASES[name]
    mod = dataflow_module(templates, dtypes, build)
    scheduled = rxe.optimize(mod, GOLDEN_BOARD)
    again = rxe.optimize(dataflow_module(templates, dtypes, build), GOLDEN_BOARD)
    c_text, ll_text = c_kernels(scheduled, name), llvm_kernels(scheduled, name)
    assert (c_kernels(again, name), llvm_kernels(again, name)) == (c_text, ll_text), "the generated code varies"
    missing = [s for s in shows if s not in c_text]
    assert not missing, f"{name}: the C kernel does not show {missing}"
    check_golden(GOLDEN_DIR / f"{name}.c", c_text)
    check_golden(GOLDEN_DIR / f"{name}.ll", ll_text)

    device = rxe.connect("host")
    for backend in ("c", "llvm"):
        art = rxe.build(scheduled, board="host", backend=backend, out_dir=tmp_path / backend, name=name, profile=False)
        if backend == "c":   # the golden text is what was compiled
            assert c_text.strip() in (tmp_path / backend / f"{art.prefix}.c").read_text()
        loaded = device.load(art)
        for k, size in enumerate(sizes):
            arrays = random_arrays(templates, dtypes, size, k)
            np.testing.assert_allclose(loaded.run(*arrays)[0], rxe.interpret(mod, *arrays), rtol=2e-5, atol=1e-5,
                                       err_msg=f"{name} ({backend}) at {size}")
