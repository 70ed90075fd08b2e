"""int64 and bool buffers on the device (kernel.py's module docstring):
kernels of the operator matrix that read or write them run through the
Vulkan runtime against the tensor-program interpreter at n = 1, 3, 4, 5 and
65 (bool buffers are packed four per word: partial words, a word boundary,
one past it), with the views packed back to back at word offsets that are
not aligned, so that neighbouring bool tensors share words; plus the
refusals of int64 values the device cannot hold."""

from __future__ import annotations

import numpy as np
import pytest

from relax_edge.codegen.vulkan import GlslUnsupported, compile_spirv, emit_glsl
from relax_edge.codegen.vulkan.kernel import NARROW, PACKED
from relax_edge.ir.shape import evaluate
from relax_edge.op.registry import make_call
from relax_edge.tir import TensorProgram
from relax_edge.tir.expr import logical_not
from relax_edge.tir.stmt import Buffer, For, Store, loop_var
from tests.vulkan import vkrt
from tests.vulkan.glsl_cases import CASES, programs

pytestmark = pytest.mark.skipif(not __import__("shutil").which("glslc"), reason="glslc is not installed")

BY_ID = {c[0]: c for c in CASES}
SIZES = [1, 3, 4, 5, 65]
# cases whose programs read or write int64 / bool buffers
DTYPE_CASES = ["cast_bool", "take", "gather_elements", "arange", "shape_to_tensor", "compare", "logical", "not",
               "where", "isnan", "isinf", "isinf_negative", "isinf_positive", "bit_shift_left_int8",
               "bit_shift_right_int8", "bitwise_not_int8", "bit_shift_left_uint8", "bit_shift_right_uint8",
               "bitwise_or_uint8", "bitwise_not_uint8_then_shift"]


def _nbytes(b, env) -> int:
    return int(evaluate(b.numel(), env)) * np.dtype(b.dtype).itemsize


def _inputs(p, env, seed):
    """Random inputs: bools, integers in [-3, 3] (valid indices of the axes here, negative ones included), normal
    floats with a NaN and infinities."""
    rng = np.random.default_rng(seed)
    out = []
    for k, b in enumerate(p.inputs):
        count = int(evaluate(b.numel(), env))
        if b.dtype == "bool":
            a = rng.integers(0, 2, count).astype(bool)
        elif b.dtype == "float32":
            a = rng.standard_normal(count).astype(np.float32)
            special = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -1.0, 2.0], dtype=np.float32)
            a[::3] = np.resize(special, len(a[::3]))
        elif b.dtype in NARROW and k == 0:   # the whole range: sign extension, the top bits
            info = np.iinfo(b.dtype)
            a = rng.integers(info.min, info.max + 1, count).astype(b.dtype)
        elif b.dtype in NARROW:   # shift counts and second operands
            a = rng.integers(0, 8, count).astype(b.dtype)
        else:
            a = rng.integers(-1, 2, count).astype(b.dtype)
        out.append(a)
    return out


def load(ctx, p, tmp_path):
    glsl, record = emit_glsl(p)
    words = np.frombuffer(compile_spirv(glsl, tmp_path, p.name), dtype=np.uint32)
    ctx.load([vkrt.kernel(p.name, words, record.num_buffers, len(p.size_params), record.local_size_x)])
    return record


def run_on_device(ctx, p, record, env, inputs):
    """Run `p` once; its outputs as flat arrays. The buffers lie back to back in one arena, each starting on the
    word after the previous one ends (bool tensors of 1, 3 or 5 bytes share no word, but sit unaligned)."""
    offsets, total = [], 4
    for b in p.params:
        offsets.append(total)
        total += (_nbytes(b, env) + 3) // 4 * 4 + 4
    arena = ctx.buffer(total + 4)
    ctx.write(arena, np.full(total // 4 + 1, 0xA5A5A5A5, dtype=np.uint32), 0)   # garbage around every tensor
    for off, a in zip(offsets, inputs):
        ctx.write(arena, np.ascontiguousarray(a).view(np.uint8), off)
    ctx.begin()
    status = [(ctx.buffer(256), 0, 0)] if record.status else []   # the asserts' status block
    ctx.dispatch(0, [(arena, off, _nbytes(b, env)) for off, b in zip(offsets, p.params)] + status,
                 [env[v] for v in p.size_params], int(evaluate(record.items, env)))
    ctx.submit()
    got = []
    for j, b in enumerate(p.outputs):
        slot = len(p.inputs) + j
        count = int(evaluate(b.numel(), env))
        raw = ctx.read(arena, _nbytes(b, env), np.uint8, offsets[slot])
        got.append(raw.view(np.dtype(b.dtype))[:count])
    return got


def _equal_to_the_interpreter(ctx, p, tmp_path, size, make_inputs) -> None:
    """p loaded once, run at each n of SIZES (size variable v set to size(v, n)) bit for bit equal to the
    interpreter's result on the same inputs (make_inputs(p, env, seed))."""
    record = load(ctx, p, tmp_path)
    for k, n in enumerate(SIZES):
        env = {v: size(v, n) for v in p.size_params}
        inputs = make_inputs(p, env, k)
        want = p.interpret(inputs, None, [env[v] for v in p.size_params])
        want = want if isinstance(want, tuple) else (want,)
        got = run_on_device(ctx, p, record, env, inputs)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, np.asarray(w).reshape(-1), err_msg=f"{p.name} n={n}")


@pytest.mark.parametrize("name", DTYPE_CASES)
def test_dtype_kernels_match_the_interpreter(open_vk, name, tmp_path):
    ran = 0
    for p in programs(BY_ID[name], "symbolic"):
        try:
            emit_glsl(p)
        except GlslUnsupported:
            continue   # test_glsl_ops.py lists the refusals that remain
        if not any(b.dtype in ("int64", *PACKED) for b in p.params):
            continue
        _equal_to_the_interpreter(open_vk(), p, tmp_path, lambda v, n: n, _inputs)
        ran += 1
    assert ran, f"{name}: no program with int64 / bool buffers emitted"


@pytest.mark.parametrize("name", ["mod_int_fmod", "bitwise_xor_int64"])
def test_int64_results_past_the_device_range_are_refused(name):
    """An int64 value computed from data may leave [-2^30, 2^30): the kernel is refused, naming the buffer."""
    reasons = set()
    for p in programs(BY_ID[name], "symbolic"):
        try:
            emit_glsl(p)
        except GlslUnsupported as e:
            assert "int64 buffer" in str(e)
            reasons.add(e.reason)
    assert reasons == {"int64 store may exceed 2^30"}



def test_bool_store_in_place_reads_its_byte_before_clearing_it(open_vk, tmp_path):
    """out = not x with out in x's memory (the host's in-place reuse): each invocation reads its byte, then
    clears and sets it; the bytes around the tensor stay as they were."""
    for k, n in enumerate(SIZES):
        x, out, i = Buffer("x", "bool", (n,)), Buffer("out", "bool", (n,)), loop_var("i")
        p = TensorProgram(f"not_{n}", (x,), (out,), For(i, n, Store(out, (i,), logical_not(x[i]))))
        ctx = open_vk()
        record = load(ctx, p, tmp_path)
        a = np.random.default_rng(k).integers(0, 2, n).astype(bool)
        arena = ctx.buffer(256)
        ctx.write(arena, np.full(64, 0xA5A5A5A5, dtype=np.uint32), 0)
        ctx.write(arena, a.view(np.uint8), 4)
        ctx.begin()
        ctx.dispatch(0, [(arena, 4, n), (arena, 4, n)], [], int(evaluate(record.items, {})))
        ctx.submit()
        raw = ctx.read(arena, 4 + n + 4, np.uint8, 0)
        np.testing.assert_array_equal(raw[4:4 + n].view(bool), ~a, err_msg=f"n={n}")
        assert (raw[:4] == 0xA5).all() and (raw[4 + n:] == 0xA5).all()


def _quant_cases():
    from relax_edge.op.registry import make_call
    from tests.transform.test_quantize_ops import CASES as QUANT_CASES
    extra = [("cast_to_int8", [("n", 5)], ["float32"], lambda x: make_call("cast", [x], {"dtype": "int8"})),
             ("cast_int8_to_float", [("n", 5)], ["int8"], lambda x: make_call("cast", [x], {"dtype": "float32"})),
             ("cast_uint8_to_int32", [("n", 5)], ["uint8"], lambda x: make_call("cast", [x], {"dtype": "int32"})),
             ("cast_int16_to_uint8", [("n", 5)], ["int16"], lambda x: make_call("cast", [x], {"dtype": "uint8"})),
             ("take_int8", [("n", 6), ("m", 2)], ["int8", "int64"],
              lambda x, i: make_call("take", [x, i], {"axis": 1})),
             ("take_uint16", [("n", 6), ("m", 2)], ["uint16", "int64"],
              lambda x, i: make_call("take", [x, i], {"axis": 1}))]
    return [c for c in QUANT_CASES if c[0] in ("quantize", "dequantize", "qrequantize_down", "qrequantize_up",
                                               "qadd_broadcast", "qmul", "qlut_sigmoid")] + extra


QUANT_CASES = _quant_cases()
# fixed-point requantization multiplies in int64 (a 32 x 32-bit product shifted): not emitted yet, by name
REQUANTIZED = ("qrequantize_down", "qrequantize_up", "qadd_broadcast", "qmul")


def _quant_inputs(p, env, seed):
    """Whole-range narrow integers, floats in [-40, 40) (past int8's range once scaled), positive scales,
    indices in [-2, 2) (m = 2 below), small zero points."""
    rng = np.random.default_rng(seed)
    out = []
    for b in p.inputs:
        count = int(evaluate(b.numel(), env))
        if b.dtype == "float32":
            a = rng.uniform(-40, 40, count).astype(np.float32)
            if count <= 3 and len(b.shape) <= 1 and b is not p.inputs[0]:   # a scale
                a = rng.uniform(0.05, 0.5, count).astype(np.float32)
        elif b.dtype == "int64":
            a = rng.integers(-2, 2, count).astype(np.int64)
        elif b is not p.inputs[0] and count <= 3:   # a zero point
            a = rng.integers(0, 10, count).astype(b.dtype)
        else:
            info = np.iinfo(b.dtype)
            a = rng.integers(info.min, info.max + 1, count).astype(b.dtype)
        out.append(a)
    return out


@pytest.mark.parametrize("case", QUANT_CASES, ids=[c[0] for c in QUANT_CASES])
def test_narrow_integer_kernels_match_the_interpreter(open_vk, case, tmp_path):
    """int8 / uint8 / int16 / uint16 tensors packed in words: quantize, dequantize, requantize, the integer
    adds and multiplies, a lookup table, casts and take, at sizes around a word and the workgroup."""
    ran = 0
    for p in programs(case, "symbolic"):
        if not any(b.dtype in NARROW for b in p.params):
            continue
        if case[0] in REQUANTIZED:
            with pytest.raises(GlslUnsupported, match="int64 min of data values") as refused:
                emit_glsl(p)
            assert refused.value.reason == "int64 arithmetic on data"
            ran += 1
            continue
        # every such program emits: nothing here is refused
        _equal_to_the_interpreter(open_vk(), p, tmp_path, lambda v, n: 2 if v.name == "m" else n, _quant_inputs)
        ran += 1
    assert ran, f"{case[0]}: no program with narrow integer buffers"


@pytest.mark.parametrize("out", ["int8", "float32"])
def test_quantize_model_builds_and_matches_numpy(vk_lib, out, tmp_path, monkeypatch):
    """rxe.build(backend="vulkan") of x -> QuantizeLinear (int8 output), and of x -> Quantize -> Dequantize (an
    int8 tensor between two kernels in the arena), at n = 1, 3, 5, 130 against numpy."""
    import relax_edge as rxe
    from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Var
    from relax_edge.op.registry import make_call
    if vkrt.validation_installed():
        monkeypatch.setenv("RXE_VK_VALIDATION", "1")
    x = Var("x", TensorType([SizeVar("n", upper=4096), 7], "float32"))
    scale, zero = Constant(np.float32(0.1)), Constant(np.int8(3))
    bb = Builder()
    with bb.function("main", [x]):
        q = bb.emit(make_call("quantize", [x, scale, zero], {"out_dtype": "int8", "qmin": -128, "qmax": 127}))
        bb.ret(q if out == "int8" else bb.emit(make_call("dequantize", [q, scale, zero], {})))
    art = rxe.build(bb.get(), board="host-vulkan", backend="vulkan", out_dir=tmp_path, profile=False)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        for n in (1, 3, 5, 130):
            xv = np.random.default_rng(n).uniform(-20, 20, (n, 7)).astype(np.float32)
            want = np.clip(np.rint(xv / np.float32(0.1)) + 3, -128, 127).astype(np.int8)
            if out == "float32":
                want = (want.astype(np.float32) - 3) * np.float32(0.1)
            got = m.run(xv)[0]
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"n={n}")
        count, first = m.validation_messages()
        assert count == 0, first


def _bits_case(name, dtypes, build, dims=("n", "m")):
    """One operator over an n x m tensor of each of `dtypes`."""
    return (name, [dims] * len(dtypes), dtypes, build)


def _narrow_program(case, n, m):
    (p,) = [q for q in programs(case, "symbolic") if any(b.dtype in ("float16", "bfloat16") for b in q.params)]
    env = {v: {"n": n, "m": m}[v.name] for v in p.size_params}
    return p, env


def _run_bits(open_vk, tmp_path, case, inputs, shape):
    """The case's kernel run once on raw input bits (arrays of shape `shape`); its outputs' raw bits."""
    p, env = _narrow_program(case, *shape)
    ctx = open_vk()
    record = load(ctx, p, tmp_path)
    return p, run_on_device(ctx, p, record, env, inputs)


def _floats_around_every_half():
    """float32 values that exercise float32 -> float16 rounding: every finite float16 value, the midpoints
    between neighbours (ties, to even), a float32 ulp either side of each midpoint, the subnormal and overflow
    edges, zeros, infinities and NaNs (quiet and signalling)."""
    halves = np.arange(0, 0x7c00, dtype=np.uint16).view(np.float16).astype(np.float32)
    mids = (halves[:-1].astype(np.float64) + halves[1:]) / 2
    mids = mids.astype(np.float32)   # exact: the midpoint of two float16 values fits float32
    up, down = np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0))
    edges = np.array([65504, 65519.996, 65520, 65536, 1e10, 2.0 ** -24, 2.0 ** -25, np.nextafter(2.0 ** -25, 1),
                      2.0 ** -26, 2.0 ** -14, 1e-30, 1e-45, 0.0], dtype=np.float32)
    nans = np.array([0x7fc00000, 0x7f800001, 0x7fa00000, 0x7fffffff, 0x7f802000], dtype=np.uint32).view(np.float32)
    x = np.concatenate([halves, mids, up, down, edges, np.array([np.inf], np.float32), nans])
    return np.concatenate([x, -x])   # float32 throughout: a float64 round trip would quiet the signalling NaNs


NARROWING = [_bits_case("cast_to_float16", ["float32"], lambda x: make_call("cast", [x], {"dtype": "float16"})),
             _bits_case("cast_to_bfloat16", ["float32"], lambda x: make_call("cast", [x], {"dtype": "bfloat16"}))]


@pytest.mark.parametrize("case", NARROWING, ids=[c[0] for c in NARROWING])
def test_float32_to_narrow_float_rounds_as_ml_dtypes(open_vk, case, tmp_path):
    """float32 -> float16 / bfloat16 on the device (the store's integer rounding) bit for bit equal to
    numpy's float16 / ml_dtypes' bfloat16 conversion (round to nearest even, subnormals kept); NaN stays NaN."""
    import ml_dtypes
    x = _floats_around_every_half()
    m = 64
    x = np.resize(x, (len(x) + m - 1) // m * m).reshape(-1, m)   # repeats the first values to fill the rows
    assert x.shape[0] <= 4096 * 4   # the size variables' bound (rows of 64 below it in each launch)
    target = np.float16 if case[0] == "cast_to_float16" else ml_dtypes.bfloat16
    for start in range(0, x.shape[0], 4096):
        rows = x[start:start + 4096]
        _, (got,) = _run_bits(open_vk, tmp_path, case, [rows], rows.shape)
        got = got.view(np.uint16)
        with np.errstate(over="ignore", invalid="ignore"):   # the overflows to inf and the NaNs are meant
            want = rows.reshape(-1).astype(target).view(np.uint16)
        nan = np.isnan(rows.reshape(-1))
        np.testing.assert_array_equal(got[~nan], want[~nan])
        assert np.isnan(got[nan].view(target).astype(np.float32)).all()
        assert ((got[nan] & 0x8000) == (rows.reshape(-1)[nan].view(np.uint32) >> 16 & 0x8000)).all()


WIDENING = [_bits_case("cast_float16_to_float32", ["float16"],
                       lambda x: make_call("cast", [x], {"dtype": "float32"})),
            _bits_case("cast_bfloat16_to_float32", ["bfloat16"],
                       lambda x: make_call("cast", [x], {"dtype": "float32"}))]


@pytest.mark.parametrize("case", WIDENING, ids=[c[0] for c in WIDENING])
def test_every_narrow_float_widens_as_ml_dtypes(open_vk, case, tmp_path):
    """All 65,536 float16 (bfloat16) bit patterns widened on the device bit for bit equal to numpy's (ml_dtypes')
    conversion: subnormals, infinities and NaN payloads."""
    import ml_dtypes
    source = np.float16 if "_float16_" in case[0] else ml_dtypes.bfloat16
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16).reshape(256, 256)
    _, (got,) = _run_bits(open_vk, tmp_path, case, [bits], bits.shape)
    want = bits.reshape(-1).view(source).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _fp16(x):
    with np.errstate(over="ignore"):   # values past 65504 become inf on purpose
        return np.asarray(x, dtype=np.float32).astype(np.float16)


F16_ARITH = [
    _bits_case("add_float16", ["float16", "float16"], lambda a, b: make_call("add", [a, b])),
    _bits_case("mul_float16", ["float16", "float16"], lambda a, b: make_call("multiply", [a, b])),
    _bits_case("divide_float16", ["float16", "float16"], lambda a, b: make_call("divide", [a, b])),
    _bits_case("max_float16", ["float16", "float16"], lambda a, b: make_call("maximum", [a, b])),
]


@pytest.mark.parametrize("case", F16_ARITH, ids=[c[0] for c in F16_ARITH])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (65, 63)])
def test_float16_arithmetic_matches_numpy(open_vk, case, shape, tmp_path):
    """float16 + - * / max on the device (float32 arithmetic, rounded once when stored) equal to numpy's float16
    arithmetic (correctly rounded: float32 holds every exact sum and product of two float16 values, and rounding a
    float32 quotient again gives the correctly rounded float16 one), at sizes that share words between elements
    and split rows across words; overflow to inf and subnormal results included."""
    rng = np.random.default_rng(sum(shape))
    a = _fp16(rng.standard_normal(shape) * rng.choice([1e-6, 1e-3, 1, 300, 3e4], shape))
    b = _fp16(rng.standard_normal(shape) * rng.choice([1e-3, 1, 10, 3e4], shape))
    _, (got,) = _run_bits(open_vk, tmp_path, case, [a, b], shape)
    fn = {"add": np.add, "mul": np.multiply, "divide": np.divide, "max": np.maximum}[case[0].split("_")[0]]
    with np.errstate(all="ignore"):
        want = fn(a, b).reshape(-1)
    np.testing.assert_array_equal(got.view(np.float16), want)


F16_MATH = [_bits_case(f"{name}_float16", ["float16"], lambda x, name=name: make_call(name, [x]))
            for name in ("exp", "tanh", "sigmoid", "sqrt")]


@pytest.mark.parametrize("case", F16_MATH, ids=[c[0] for c in F16_MATH])
def test_float16_math_is_float32_math_rounded(open_vk, case, tmp_path):
    """Math on float16 values computes in float32 and rounds once: within one float16 ulp of numpy's float64
    value (the float32 error is far below a float16 half ulp, so only ties of the two roundings may differ)."""
    name = case[0].split("_")[0]
    x = _fp16(np.linspace(-12, 12, 65 * 63)).reshape(65, 63)
    if name == "sqrt":
        x = np.abs(x)
    _, (got,) = _run_bits(open_vk, tmp_path, case, [x], x.shape)
    z = x.reshape(-1).astype(np.float64)
    want = {"exp": np.exp, "tanh": np.tanh, "sqrt": np.sqrt, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[name](z)
    got = got.view(np.float16).astype(np.float64)
    finite = np.isfinite(want) & (np.abs(want) < 65504)
    got, want = got[finite], want[finite]
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    assert finite.sum() > len(finite) // 2
    assert (np.abs(got - want) <= ulp).all()


def test_float16_bits_reinterpret_as_int16_and_back(open_vk, tmp_path):
    """BitCast float16 -> int16 -> float16 keeps every bit pattern but NaNs' (widened to float, a NaN stays NaN)."""
    case = _bits_case("bitcast_float16_int16_float16", ["float16"],
                      lambda x: make_call("bitcast", [make_call("bitcast", [x], {"to": "int16"})],
                                          {"to": "float16"}))
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16).reshape(256, 256)
    programs_ = [q for q in programs(case, "symbolic")]
    assert programs_
    got_all = []
    for p in programs_:
        env = {v: 256 for v in p.size_params}
        ctx = open_vk()
        record = load(ctx, p, tmp_path)
        (got,) = run_on_device(ctx, p, record, env, [bits if not got_all else got_all[-1]])
        got_all.append(got.view(np.uint16).reshape(256, 256))
    nan = np.isnan(bits.reshape(-1).view(np.float16))
    np.testing.assert_array_equal(got_all[-1].reshape(-1)[~nan], bits.reshape(-1)[~nan])


def _doubles(shape, seed):
    """float64 values over many magnitudes, with zeros, infinities, NaN and values past float32's range."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-300, 300, shape)
    flat = x.reshape(-1)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e-310, 3.5, -2.5, 0.5])
    flat[::7] = np.resize(special, len(flat[::7]))
    return x


F64_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
              "maximum": np.maximum}
F64_UNARY = {"floor": np.floor, "ceil": np.ceil, "abs": np.abs, "sqrt": np.sqrt, "round": np.rint,
             "negative": np.negative}
F64_CASES = ([_bits_case(f"{name}_float64", ["float64", "float64"], lambda a, b, name=name: make_call(name, [a, b]))
              for name in F64_BINARY]
             + [_bits_case(f"{name}_float64", ["float64"], lambda x, name=name: make_call(name, [x]))
                for name in F64_UNARY])


@pytest.mark.parametrize("case", F64_CASES, ids=[c[0] for c in F64_CASES])
def test_float64_kernels_match_numpy_bit_for_bit(open_vk, case, tmp_path):
    """float64 tensors (two words per element) and double arithmetic on the device (shaderFloat64, the kernel's
    record flags say so) equal to numpy's float64 results bit for bit on lavapipe, whose doubles are IEEE (Vulkan
    itself only promises float32 precision for double operations), at sizes around a workgroup."""
    from relax_edge.codegen.vulkan.kernel import KERNEL_FP64
    name = case[0].rsplit("_", 1)[0]
    for shape in [(1, 1), (3, 5), (65, 63)]:
        p, env = _float64_program(case, shape)
        ctx = open_vk()
        record = load(ctx, p, tmp_path)
        assert record.flags & KERNEL_FP64
        inputs = [_doubles(shape, seed) for seed in range(len(p.inputs))]
        (got,) = run_on_device(ctx, p, record, env, inputs)
        with np.errstate(all="ignore"):
            want = (F64_BINARY.get(name) or F64_UNARY[name])(*inputs).reshape(-1)
        np.testing.assert_array_equal(got, want, err_msg=f"{case[0]} at {shape}")


def _float64_program(case, shape):
    (p,) = [q for q in programs(case, "symbolic") if any(b.dtype == "float64" for b in q.params)]
    return p, {v: dict(zip("nm", shape))[v.name] for v in p.size_params}


F64_CASTS = [_bits_case(f"cast_{src}_to_{dst}", [src], lambda x, dst=dst: make_call("cast", [x], {"dtype": dst}))
             for src, dst in [("float64", "float32"), ("float32", "float64"), ("int32", "float64"),
                              ("float64", "int32"), ("float64", "float16"), ("float64", "bool")]]


@pytest.mark.parametrize("case", F64_CASTS, ids=[c[0] for c in F64_CASTS])
def test_float64_casts_match_numpy(open_vk, case, tmp_path):
    """Casts to and from float64 on the device as numpy's astype (float64 -> float32 rounds to nearest even,
    overflowing to inf; -> int32 truncates, for values inside int32; -> float16 through float32, as C does)."""
    src, dst = case[2][0], case[0].rsplit("_to_", 1)[1]
    shape = (65, 63)
    rng = np.random.default_rng(7)
    if src == "float64" and dst == "int32":
        x = rng.uniform(-2.0 ** 31 + 1, 2.0 ** 31 - 1, shape) * 10.0 ** rng.integers(-9, 1, shape)
    elif src == "float64":
        x = _doubles(shape, 1) if dst != "float16" else rng.standard_normal(shape) * 10.0 ** rng.integers(-9, 6, shape)
    elif src == "int32":
        x = rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32)
    else:
        x = rng.standard_normal(shape).astype(np.float32) * np.float32(1e30)
    p, env = _float64_program(case, shape)
    ctx = open_vk()
    record = load(ctx, p, tmp_path)
    (got,) = run_on_device(ctx, p, record, env, [x])
    with np.errstate(all="ignore"):
        want = (x.astype(np.float32).astype(np.float16) if dst == "float16" else x.astype(dst)).reshape(-1)
    np.testing.assert_array_equal(got, want)
