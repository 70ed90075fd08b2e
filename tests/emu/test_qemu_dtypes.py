"""float64, int16, uint16, uint32, uint64, float16 and bfloat16 (ml_dtypes'
arrays) cross-compiled for the emulated Linux boards and run under qemu-user
against numpy: representative operators per dtype (add, a compare, a cast,
a sum; exp on float64 and float16), in two builds per board and backend (the
RPC server takes at most 16 outputs)."""

import pytest

import relax_edge as rxe
from tests.codegen.dtype_cases import arrays, combined_module, compare, expected

OPS = ("add", "less", "cast_float32", "sum")
GROUPS = [{"float64": OPS + ("exp",), "int16": OPS, "uint16": OPS},
          {"uint32": OPS, "uint64": OPS, "float16": OPS[:3] + ("exp",), "bfloat16": OPS}]
RUNS = [(board, backend) for board in ("qemu-aarch64", "qemu-armv7", "qemu-riscv64") for backend in ("c", "llvm")]


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("board, backend", RUNS, ids=[f"{b}-{k}" for b, k in RUNS])
def test_new_dtypes_on_emulated_board(board, backend, tmp_path):
    pytest.importorskip("ml_dtypes")   # bfloat16 arrays
    for k, group in enumerate(GROUPS):
        mod, plan = combined_module(group)
        art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / str(k), name="dtypes", quiet=True,
                        profile=False)
        with rxe.connect(board) as dev:
            loaded = dev.load(art)
            for rows in (1, 3):
                inputs = {d: arrays(d, rows, seed=rows) for d in group}
                got = loaded.run(*[inputs[d][v] for d, _ in plan for v in "xy"])
                start = 0
                for dtype, selected in plan:
                    end = start + len(selected)
                    compare(selected, got[start:end], expected(selected, inputs[dtype]),
                            f"{board} {backend} {dtype}")
                    start = end


FREESTANDING = {"float64": ("exp", "tanh", "sin", "fmod", "floor", "divide"), "uint64": ("divide", "mod"),
                "float16": ("add", "exp"), "bfloat16": ("multiply", "cast_float32")}


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_new_dtypes_without_libm_on_cortex_m4(backend, tmp_path):
    """float64 math through runtime_c/src/math.c's double functions (RXE_NO_LIBM), 64-bit integer division
    on a 32-bit core, and the narrow floats, under qemu-system-arm."""
    pytest.importorskip("ml_dtypes")
    mod, plan = combined_module(FREESTANDING)
    art = rxe.build(mod, board="qemu-cortex-m4", backend=backend, out_dir=tmp_path, name="dtypes", quiet=True,
                    profile=False)
    inputs = {d: arrays(d, 3, seed=5) for d in FREESTANDING}
    with rxe.connect("qemu-cortex-m4") as dev:
        got = dev.load(art).run(*[inputs[d][v] for d, _ in plan for v in "xy"])
    start = 0
    for dtype, selected in plan:
        end = start + len(selected)
        compare(selected, got[start:end], expected(selected, inputs[dtype]), f"cortex-m4 {backend} {dtype}")
        start = end
