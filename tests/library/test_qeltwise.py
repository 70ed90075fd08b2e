"""rxe_lib_qadd_s8 and rxe_lib_max_pool2d_s8 (runtime_c/kernels/qeltwise.c)
built with the host cc for the portable C, AVX2 and -march=native (AVX-512)
paths, and for aarch64 (NEON) under QEMU, against the operators' numpy
references (op/quant_int8.qadd_reference, op/nn max_pool2d): shapes around
the vector widths and the thread pool's units, every int8 / uint8 mix,
zero points, fused clamps, left shifts (the scalar path), padding, strides,
dilation and ceil mode; then both lowered from a graph and compiled."""

import ctypes
import re

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.ir import Builder, CallExtern, Constant, TensorType, Tuple, Var
from relax_edge.library import qeltwise as E
from relax_edge.op import make_call
from relax_edge.op.quant_int8 import add_multipliers, qadd_reference
from relax_edge.op.registry import OPS
from relax_edge.transform.legalize import legalize
from tests.library import test_stack_usage
from tests.library.qint8_lib import RUNTIME, WARNINGS, Error, compile_c
from tests.library.test_stack_usage import ROOT, deepest, measure

SOURCES = [RUNTIME / "kernels" / "qeltwise.c", RUNTIME / "src" / "status.c", RUNTIME / "src" / "threads.c"]
HEADER = ROOT / "runtime_c" / "include" / "relax_edge" / "kernels_qeltwise.h"
FLAGS = {"c": ["-O2"], "avx2": ["-O3", "-mavx2", "-mfma"], "native": ["-O3", "-march=native"]}
RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


@pytest.fixture(scope="module", params=list(FLAGS))
def lib(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("qelt") / f"qelt_{request.param}.so"
    compile_c(["cc", *FLAGS[request.param], *WARNINGS, "-shared", "-fPIC", "-pthread",
               f"-I{RUNTIME / 'include'}", *SOURCES, "-o", path])
    library = ctypes.CDLL(str(path))
    yield library
    library.rxe_threads_set_count(1)


def call(lib, symbol, arrays, sizes):
    err = Error()
    fn = getattr(lib, symbol)
    fn.restype = ctypes.c_int
    status = fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in arrays], *[ctypes.c_int64(int(s)) for s in sizes],
                ctypes.byref(err))
    return status, err.message.decode()


def ints(rng, dtype, shape):
    lo, hi = RANGE[dtype]
    return rng.integers(lo, hi + 1, shape).astype(dtype)


# ------------------------------------------------------------ qadd

def add_attrs(rng, a_dtype, b_dtype, out_dtype, relu=False, scales=None):
    sa, sb, so = scales if scales is not None else rng.uniform(0.005, 0.1, 3)
    (aq, ash), (bq, bsh), (q, sh) = add_multipliers(sa, sb, so)
    out_zero = int(rng.integers(*RANGE[out_dtype]))
    lo, hi = RANGE[out_dtype]
    return {"a_zero": int(rng.integers(*RANGE[a_dtype])), "b_zero": int(rng.integers(*RANGE[b_dtype])),
            "a_multiplier": aq, "a_shift": ash, "b_multiplier": bq, "b_shift": bsh, "multiplier": q, "shift": sh,
            "out_zero": out_zero, "out_dtype": out_dtype, "act_min": max(lo, out_zero) if relu else None,
            "act_max": None}


def qadd_sizes(count, attrs, a_dtype, b_dtype):
    lo, hi = RANGE[attrs["out_dtype"]]
    dtypes = (a_dtype == "uint8") * E.A_UNSIGNED | (b_dtype == "uint8") * E.B_UNSIGNED | \
        (attrs["out_dtype"] == "uint8") * E.OUT_UNSIGNED
    return [count, attrs["a_zero"], attrs["b_zero"], attrs["a_multiplier"], attrs["a_shift"], attrs["b_multiplier"],
            attrs["b_shift"], attrs["multiplier"], attrs["shift"], attrs["out_zero"],
            lo if attrs["act_min"] is None else attrs["act_min"], hi if attrs["act_max"] is None else attrs["act_max"],
            dtypes]


def check_qadd(lib, a, b, attrs):
    expected = qadd_reference(a, b, **attrs)
    out = np.full(a.shape, 0x5a, attrs["out_dtype"])
    status, message = call(lib, E.QADD, [a, b, out], qadd_sizes(a.size, attrs, a.dtype.name, b.dtype.name))
    assert status == 0, message
    np.testing.assert_array_equal(out, expected, err_msg=str(attrs))


@pytest.mark.parametrize("dtypes", [("uint8", "uint8", "uint8"), ("int8", "int8", "int8"), ("uint8", "int8", "int8"),
                                    ("int8", "uint8", "uint8")])
def test_qadd_matches_the_reference(lib, dtypes):
    rng = np.random.default_rng(len(dtypes[0]) + 3 * len(dtypes[2]))
    a_dtype, b_dtype, out_dtype = dtypes
    for count in (1, 7, 15, 16, 17, 31, 33, 100, 1000):
        for relu in (False, True):
            attrs = add_attrs(rng, a_dtype, b_dtype, out_dtype, relu)
            check_qadd(lib, ints(rng, a_dtype, count), ints(rng, b_dtype, count), attrs)


def test_qadd_extreme_values_and_scales(lib):
    """Every pair of byte values, scales far apart (an output much finer than the inputs saturates), equal
    scales (the exact halves of the rounding)."""
    rng = np.random.default_rng(5)
    a = np.repeat(np.arange(256), 256).astype(np.uint8)
    b = np.tile(np.arange(256), 256).astype(np.uint8)
    for scales in ((0.02, 0.02, 0.02), (0.02, 0.02, 0.04), (0.1, 0.001, 0.05), (0.001, 0.1, 0.0005),
                   (0.05, 0.05, 0.0001)):
        attrs = add_attrs(rng, "uint8", "uint8", "uint8", scales=scales)
        check_qadd(lib, a, b, attrs)
        attrs = add_attrs(rng, "int8", "int8", "int8", scales=scales)
        check_qadd(lib, a.view(np.int8), b.view(np.int8), attrs)


def test_qadd_left_shifts_take_the_scalar_path(lib):
    """Shifts above 0 (not what add_multipliers makes, but in the operator's range): the saturating left shift."""
    rng = np.random.default_rng(6)
    for a_shift, b_shift, shift in ((0, 0, 3), (2, -1, -5), (-1, 4, 1), (0, 0, 30)):
        attrs = add_attrs(rng, "int8", "uint8", "int8")
        attrs.update(a_shift=a_shift, b_shift=b_shift, shift=shift)
        check_qadd(lib, ints(rng, "int8", 50), ints(rng, "uint8", 50), attrs)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_qadd_over_threads(lib, threads):
    """Counts above the kernel's parallel threshold, not multiples of its units: the same bits for every count."""
    lib.rxe_threads_set_count(threads)
    rng = np.random.default_rng(7)
    for count in (40000, 16384 * 3 + 5):
        attrs = add_attrs(rng, "uint8", "uint8", "uint8", relu=True)
        check_qadd(lib, ints(rng, "uint8", count), ints(rng, "uint8", count), attrs)
    lib.rxe_threads_set_count(1)


def test_qadd_bad_arguments_are_errors(lib):
    a = np.zeros(4, np.uint8)
    attrs = add_attrs(np.random.default_rng(8), "uint8", "uint8", "uint8")
    sizes = qadd_sizes(4, attrs, "uint8", "uint8")
    for index, value, match in ((1, 300, "a_zero 300 is outside the uint8 range"), (7, -1, "multiplier -1"),
                                (8, 31, "shift 31"), (12, 9, "dtypes 9"), (0, -2, "negative count")):
        bad = list(sizes)
        bad[index] = value
        status, message = call(lib, E.QADD, [a, a, a.copy()], bad)
        assert status != 0 and match in message, message


# ------------------------------------------------------------ max_pool2d

POOLS = [  # (shape, kernel, strides, padding (t, l, b, r), dilation, ceil_mode)
    ((1, 3, 112, 112), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),     # ResNet's
    ((2, 2, 9, 10), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((1, 2, 9, 10), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True),
    ((1, 4, 7, 13), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),
    ((1, 2, 11, 12), (3, 2), (2, 3), (2, 1, 0, 1), (2, 2), False),
    ((1, 1, 5, 5), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), False),
    ((1, 2, 6, 1300), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),       # rows wider than one line
    ((1, 1, 4, 700), (1, 3), (1, 1), (0, 1, 0, 1), (1, 1), False),
    ((1, 1, 3, 40), (1, 4), (1, 1), (0, 0, 0, 0), (1, 9), False),
]


def pool_case(rng, dtype, shape, kernel, strides, padding, dilation, ceil_mode):
    x = ints(rng, dtype, shape)
    attrs = {"kernel_size": kernel, "strides": strides, "padding": padding, "dilation": dilation,
             "ceil_mode": ceil_mode}
    expected = OPS["max_pool2d"].reference(x, **attrs)
    sizes = [*shape, *kernel, *expected.shape[2:], *strides, padding[0], padding[1], *dilation, int(dtype == "uint8")]
    return x, expected, sizes


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("case", range(len(POOLS)))
def test_max_pool_matches_the_reference(lib, dtype, case):
    x, expected, sizes = pool_case(np.random.default_rng(case), dtype, *POOLS[case])
    out = np.full(expected.shape, 0x5a, dtype)
    status, message = call(lib, E.MAX_POOL2D, [x, out], sizes)
    assert status == 0, message
    np.testing.assert_array_equal(out, expected, err_msg=str(POOLS[case]))


def test_max_pool_over_threads(lib):
    lib.rxe_threads_set_count(2)
    x, expected, sizes = pool_case(np.random.default_rng(9), "uint8", *POOLS[0])
    out = np.zeros_like(expected)
    assert call(lib, E.MAX_POOL2D, [x, out], sizes)[0] == 0
    lib.rxe_threads_set_count(1)
    np.testing.assert_array_equal(out, expected)


def test_max_pool_bad_sizes_are_errors(lib):
    x = np.zeros((1, 1, 4, 4), np.uint8)
    _, _, sizes = pool_case(np.random.default_rng(0), "uint8", (1, 1, 4, 4), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1),
                            False)
    for index, value, match in ((8, 0, "bad sizes"), (5, 600, "wider than 512"), (14, 3, "dtypes 3")):
        bad = list(sizes)
        bad[index] = value
        status, message = call(lib, E.MAX_POOL2D, [x, np.zeros((1, 1, 2, 2), np.uint8)], bad)
        assert status != 0 and match in message, message


# ------------------------------------------------------------ stack

def test_stack_usage_within_stated_bounds(tmp_path, monkeypatch):
    text = HEADER.read_text()
    stated = {m.group(2): int(m.group(1)) for m in
              re.finditer(r"/\* stack: at most (\d+) bytes.*?\*/\s*rxe_status_t (rxe_lib_\w+)\(", text, re.S)}
    assert set(stated) == {E.QADD, E.MAX_POOL2D}
    monkeypatch.setattr(test_stack_usage, "SOURCES", [RUNTIME / "kernels" / "qeltwise.c"])
    for flags in ([], ["-mavx2", "-mfma"], ["-march=native"]):
        frames, calls = measure("gcc", flags, tmp_path)
        for entry, bound in stated.items():   # the caller runs chunk 0 of the pool's task itself
            calls["rxe_threads_parallel_for"] = {E.QADD: {"qadd_task"}, E.MAX_POOL2D: {"max_pool_task"}}[entry]
            size, path = deepest(entry, frames, calls, [])
            assert size <= bound, f"{flags} {entry}: {size} bytes along {' -> '.join(path)} > {bound}"


# ------------------------------------------------------------ lowered and compiled

def graph(rng):
    """x, y (batch 2, 4, 10, 12) uint8 -> qadd (relu, uint8) -> max_pool 3x3 s2 p1; qadd of broadcast shapes
    keeps its tensor program; a float max_pool too."""
    x = Var("x", TensorType((2, 4, 10, 12), "uint8"))
    y = Var("y", TensorType((2, 4, 10, 12), "uint8"))
    f = Var("f", TensorType((1, 2, 6, 6), "float32"))
    z = Var("z", TensorType((2, 4, 10, 12), "int8"))
    add3 = {**add_attrs(rng, "int8", "int8", "int8", relu=True), "a_zero": -100, "b_zero": -3, "out_zero": -128}
    add = add_attrs(rng, "uint8", "uint8", "uint8", relu=True)
    add2 = add_attrs(rng, "uint8", "int8", "int8")
    row = Constant(ints(rng, "int8", (1, 4, 1, 12)))
    pool = {"kernel_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}
    bb = Builder()
    with bb.function("main", [x, y, f, z]):
        with bb.dataflow():
            s = bb.emit(make_call("qadd", [x, y], add))
            p = bb.emit(make_call("max_pool2d", [s], pool))
            t = bb.emit(make_call("qadd", [s, row], add2))
            g = bb.emit(make_call("max_pool2d", [f], {"kernel_size": (2, 2)}))
            u = bb.emit(make_call("qadd", [z, z], add3))   # negative zero points through the C call
            out = bb.emit_output(Tuple([p, t, g, u]))
        bb.ret(out)

    def expected(xv, yv, fv, zv):
        sv = qadd_reference(xv, yv, **add)
        return [OPS["max_pool2d"].reference(sv, **{**pool, "dilation": (1, 1), "ceil_mode": False}),
                qadd_reference(sv, row.data, **add2),
                OPS["max_pool2d"].reference(fv, kernel_size=(2, 2), strides=None, padding=(0, 0, 0, 0),
                                            dilation=(1, 1), ceil_mode=False),
                qadd_reference(zv, zv, **add3)]
    return bb.get(), expected


def test_legalize_calls_the_kernels_where_they_apply():
    mod, _ = graph(np.random.default_rng(10))
    main = legalize(mod).functions["main"]
    calls = [b.value for blk in main.body.blocks for b in blk.bindings if isinstance(b.value, CallExtern)]
    assert [c.name for c in calls] == [E.QADD, E.MAX_POOL2D, E.QADD]


@pytest.mark.parametrize("board, backend", [("host", "c"), ("host", "llvm"),
                                            pytest.param("qemu-aarch64", "c", marks=[pytest.mark.emu])])
def test_compiled_graph_matches_the_references(tmp_path, board, backend):
    rng = np.random.default_rng(11)
    mod, expected = graph(rng)
    feeds = [ints(rng, "uint8", (2, 4, 10, 12)), ints(rng, "uint8", (2, 4, 10, 12)),
             rng.standard_normal((1, 2, 6, 6)).astype(np.float32), ints(rng, "int8", (2, 4, 10, 12))]
    art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / "art", name="qelt", quiet=True,
                    profile=False)
    with rxe.connect(board) as dev:
        outs = dev.load(art).run(*feeds)
    for got, want in zip(outs, expected(*feeds)):
        np.testing.assert_array_equal(got, want)
