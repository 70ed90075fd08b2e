"""Emitted GLSL kernels run through the Vulkan runtime (runtime_c/vulkan, on
lavapipe unless RXE_VK_ANY_DEVICE=1) against the tensor program's own numpy
interpreter: one shader per symbolic program serves every size (1, 63, 64,
65, 4097, so sizes that are not multiples of the workgroup; the whole
operator matrix of test_glsl_ops.py at 1 and 65), every buffer
sits in one arena at an offset that is not a multiple of the device's
storage-buffer alignment (the remainder travels in push constants), and
the validation layer, when installed, reports nothing (tests/vulkan/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from relax_edge.codegen.vulkan import GlslUnsupported, compile_spirv, emit_glsl
from relax_edge.codegen.vulkan.kernel import PACKED
from relax_edge.ir import SizeVar, evaluate
from relax_edge.tir import TensorProgram
from relax_edge.tir.expr import intrinsic
from relax_edge.tir.stmt import Buffer, For, Store, loop_var
from relax_edge.transform.schedule import schedule_program
from tests.vulkan import vkrt
from tests.vulkan.glsl_cases import CASES, programs
from tests.vulkan.test_glsl_ops import REFUSED

N = [1, 63, 64, 65, 4097]
N_HEAVY = [1, 63, 65, 130]     # convolutions, pools, matmuls, norms: the interpreter is slow past that
# (case id, the program of its module to run: the last one unless named)
ELEMENTWISE = ["add_broadcast", "tanh", "gelu", "unary_erf", "unary_log", "unary_sqrt", "unary_round",
               "unary_sin", "unary_cos",
               ("round_halves", "round"), ("power", "power"), "sign_int", "div_int_truncates", ("mod_int_floor", "mod"),
               ("bit_shift_left_int32", "bit_shift"), "slice_reverse_step", "pad_reflect", "clip", "cast_int"]
HEAVY = ["log_softmax", "softmax_last", "layer_norm_last_axis_bias", "matmul_batch_broadcast", "conv2d_symbolic_h",
         "max_pool_symbolic_h", "reduce_sum_all", "reduce_max_keep"]
BY_ID = {c[0]: c for c in CASES}
F = "float32"
SKEW = 3   # elements between buffers in the arena: offsets not aligned to minStorageBufferOffsetAlignment


def _inputs(p, env, seed):
    """Random inputs for the buffers of `p`: normal floats, integers in [-5, 5]
    (divisors never 0), positive values where the operator needs them."""
    rng = np.random.default_rng(seed)
    out = []
    for k, b in enumerate(p.inputs):
        count = int(evaluate(b.numel(), env))
        if b.dtype == "float32":
            a = rng.standard_normal(count).astype(np.float32)
            if p.name in ("log", "sqrt") or (p.name == "power" and k == 0):
                a = np.abs(a) + np.float32(0.01)
            if p.name == "round":   # halves, to see half to even
                a = np.round(a * 4) / np.float32(2)
        else:
            a = rng.integers(-5, 6, count).astype(b.dtype)
            if p.name in ("divide", "mod") and k == 1:
                a[a == 0] = 3
            if p.name == "bit_shift" and k == 1:
                a = np.abs(a)
        out.append(a)
    return out


def _program(entry):
    name, wanted = (entry, None) if isinstance(entry, str) else entry
    found = programs(BY_ID[name], "symbolic")
    return found[-1] if wanted is None else next(p for p in found if p.name == wanted)


def run_program(ctx, p, tmp_path, sizes_list):
    glsl, record = emit_glsl(p)
    words = np.frombuffer(compile_spirv(glsl, tmp_path, p.name), dtype=np.uint32)
    ctx.load([vkrt.kernel(p.name, words, record.num_buffers, len(p.size_params), record.local_size_x)])
    checked = 0
    for k, dims in enumerate(sizes_list):
        sizes = {"n": dims, "m": 5, "h": 7 + dims % 3}
        env = {v: sizes[v.name] for v in p.size_params}
        inputs = _inputs(p, env, k)
        expected = p.interpret(inputs, None, [env[v] for v in p.size_params])
        expected = expected if isinstance(expected, tuple) else (expected,)
        counts = [int(evaluate(b.numel(), env)) for b in p.params]
        offsets, total = [], 0
        for count in counts:
            offsets.append((total + SKEW) * 4)
            total += SKEW + count
        arena = ctx.buffer(total * 4 + 4)
        for off, a in zip(offsets, inputs):
            ctx.write(arena, a, off)
        ctx.begin()
        status = [(ctx.buffer(256), 0, 0)] if record.status else []   # the asserts' status block
        ctx.dispatch(0, [(arena, off, count * 4) for off, count in zip(offsets, counts)] + status,
                     [env[v] for v in p.size_params], int(evaluate(record.items, env)))
        ctx.submit()
        for j, (b, want) in enumerate(zip(p.outputs, expected)):
            slot = len(p.inputs) + j
            got = ctx.read(arena, counts[slot], np.dtype(b.dtype), offsets[slot])
            if b.dtype == "float32":
                np.testing.assert_allclose(got, want.reshape(-1), rtol=2e-6, atol=1e-6, err_msg=f"{p.name} {sizes}")
            else:
                np.testing.assert_array_equal(got, want.reshape(-1), err_msg=f"{p.name} {sizes}")
            checked += 1
    return checked


@pytest.mark.parametrize("entry", ELEMENTWISE + HEAVY, ids=lambda e: e if isinstance(e, str) else e[0])
def test_emitted_kernel_matches_the_interpreter(open_vk, entry, tmp_path):
    ctx = open_vk()
    sizes = N if entry in ELEMENTWISE else N_HEAVY
    p = _program(entry)
    assert run_program(ctx, p, tmp_path, sizes) == len(sizes) * len(p.outputs)
    assert ctx.pipelines_created == 1   # one shader for every size


def _load(ctx, p, tmp_path, local_size_x=64):
    """Emit, compile and load `p` as kernel 0 of `ctx`; its record."""
    glsl, record = emit_glsl(p, local_size_x=local_size_x)
    words = np.frombuffer(compile_spirv(glsl, tmp_path, p.name), dtype=np.uint32)
    ctx.load([vkrt.kernel(p.name, words, record.num_buffers, len(p.size_params), record.local_size_x)])
    return record


def _dispatch(ctx, p, record, inputs, env):
    """Run loaded kernel 0 once on `inputs` (numpy arrays, a buffer each); its outputs as flat arrays."""
    counts = [int(evaluate(b.numel(), env)) for b in p.params]
    buffers = [ctx.buffer(c * 4) for c in counts]
    for b, a in zip(buffers, inputs):
        ctx.write(b, a)
    ctx.begin()
    status = [(ctx.buffer(256), 0, 0)] if record.status else []   # the asserts' status block
    ctx.dispatch(0, [(b, 0, c * 4) for b, c in zip(buffers, counts)] + status, [env[v] for v in p.size_params],
                 int(evaluate(record.items, env)))
    ctx.submit()
    return [ctx.read(buffers[len(p.inputs) + j], counts[len(p.inputs) + j], np.dtype(b.dtype))
            for j, b in enumerate(p.outputs)]


def _run_direct(ctx, p, tmp_path, inputs, env):
    record = _load(ctx, p, tmp_path)
    return _dispatch(ctx, p, record, inputs, env), record


def test_pow_of_negative_and_zero_bases(open_vk, tmp_path):
    """GLSL leaves pow undefined for x < 0 and for 0 ** y with y <= 0; the helper gives C's powf values."""
    n, i = SizeVar("n", upper=4096), loop_var("i")
    x, y, out = Buffer("x", F, (n,)), Buffer("y", F, (n,)), Buffer("out", F, (n,))
    p = TensorProgram("pow_signs", (x, y), (out,), For(i, n, Store(out, (i,), intrinsic("pow", x[i], y[i]))), (n,))
    bases = np.array([-2.0, -2.0, -2.0, -0.5, 0.0, 0.0, 0.0, -0.0, -0.0, 3.0, -3.0, 2.0], np.float32)
    exps = np.array([3.0, 2.0, -1.0, 0.5, 2.0, 0.0, -1.0, 3.0, -3.0, 0.5, 0.0, -2.0], np.float32)
    (got,), _ = _run_direct(open_vk(), p, tmp_path, [bases, exps], {n: bases.size})
    with np.errstate(all="ignore"):
        want = np.power(bases, exps)   # numpy follows C's pow here
    np.testing.assert_allclose(got, want, rtol=1e-6)
    finite = ~np.isnan(want)
    assert np.array_equal(np.isnan(got), ~finite) and np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


def test_a_grid_past_65535_workgroups_folds(open_vk, tmp_path):
    """1,100,000 x 5 items at 64 per workgroup: 85,938 workgroups, two rows of x."""
    size = 1_100_000
    x = np.random.default_rng(5).standard_normal(size * 5).astype(np.float32)
    n = SizeVar("n", upper=1 << 21)
    src, out, i, j = Buffer("x", F, (n, 5)), Buffer("out", F, (n, 5)), loop_var("i"), loop_var("j")
    big = TensorProgram("abs_big", (src,), (out,),
                        For(i, n, For(j, 5, Store(out, (i, j), intrinsic("fabs", src[i, j])))), (n,))
    (got,), record = _run_direct(open_vk(), big, tmp_path, [x], {n: size})
    assert record.grid == ("i", "j")
    np.testing.assert_array_equal(got, np.abs(x))


def test_push_constants_past_128_bytes_run_from_a_storage_buffer(open_vk, tmp_path):
    n = SizeVar("n", upper=4096)
    xs = [Buffer(f"x{k}", F, (n,)) for k in range(30)]
    out, i = Buffer("out", F, (n,)), loop_var("i")
    value = xs[0][i]
    for x in xs[1:]:
        value = value + x[i]
    p = TensorProgram("sum30", tuple(xs), (out,), For(i, n, Store(out, (i,), value)), (n,))
    arrays = [np.random.default_rng(k).standard_normal(65).astype(np.float32) for k in range(30)]
    (got,), record = _run_direct(open_vk(), p, tmp_path, arrays, {n: 65})
    assert record.push_in_buffer and record.push_words == 34
    want = arrays[0].copy()
    for a in arrays[1:]:
        want = want + a   # the kernel's order, in float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_emitted_program_of_the_matrix_matches_the_interpreter(open_vk, case, tmp_path):
    """The whole operator matrix of test_glsl_ops.py at n = 1 and 65: each
    program that emits runs and matches; the others are the listed refusals."""
    ran = 0
    for p in programs(case, "symbolic"):
        try:
            emit_glsl(p)
        except GlslUnsupported as e:
            assert e.reason in REFUSED.get(case[0], set()), e
            continue
        if any(b.dtype in ("int64", *PACKED) for b in p.params):
            ran += 1   # packed and paired buffers: test_glsl_dtypes.py runs these at n = 1, 3, 4, 5, 65
            continue
        ctx = open_vk()
        assert run_program(ctx, p, tmp_path, [1, 65]) == 2 * len(p.outputs)
        ran += 1
    assert ran or case[0] in REFUSED


@pytest.mark.parametrize("local_size_x", [32, 128])
@pytest.mark.parametrize("name", ["gelu", "softmax_last", "reduce_sum_all"])
def test_host_scheduled_programs_and_other_workgroup_sizes(open_vk, name, local_size_x, tmp_path):
    """The host schedule's vector loops, partial-sum reductions and parallel split, emitted as scalar loops
    and a grid, at workgroup sizes other than the default."""
    p = schedule_program(_program(name), 256, True)
    ctx = open_vk()
    record = _load(ctx, p, tmp_path, local_size_x)
    assert record.local_size_x == local_size_x
    for k, n in enumerate([1, 65, 4097]):
        env = {v: n for v in p.size_params}
        inputs = _inputs(p, env, k)
        (got,) = _dispatch(ctx, p, record, inputs, env)
        want = p.interpret(inputs, None, [n] * len(p.size_params))
        rtol = 1e-5 if name == "reduce_sum_all" else 2e-6   # a workgroup's tree adds in another order
        np.testing.assert_allclose(got, np.asarray(want).reshape(-1), rtol=rtol, atol=1e-6)


def test_int64_accumulators_wrap_to_the_int32_result(open_vk, tmp_path):
    """A sum of squares past 2^31 accumulates in int64 and is stored as int32: the kernel's 32-bit sum
    wraps to the same bits."""
    p = _program("reduce_sum_square_int")
    env = {v: 65 for v in p.size_params}
    count = int(evaluate(p.inputs[0].numel(), env))
    x = np.random.default_rng(9).integers(30_000, 46_000, count).astype(np.int32)
    (got,), _ = _run_direct(open_vk(), p, tmp_path, [x], env)
    want = (x.astype(np.int64) ** 2).reshape(65, -1).sum(axis=0)
    assert (np.abs(want) >= 2 ** 31).all()
    np.testing.assert_array_equal(got, want.astype(np.int32))   # numpy's cast keeps the low 32 bits
