"""The GLSL emitter's ABI and refusals: the push-constant block and its
storage-buffer fallback, the grid and its items expression, 32-bit index
bounds, scheduled programs, and named errors."""

import re
import shutil

import pytest

from relax_edge.codegen.vulkan import GlslUnsupported, ShaderCompileError, compile_spirv, emit_glsl, map_grid
from relax_edge.errors import RelaxEdgeError
from relax_edge.ir import SizeVar, evaluate
from relax_edge.ir.shape import Proof, prove_equal
from relax_edge.op.registry import make_call
from relax_edge.tir import TensorProgram
from relax_edge.tir.stmt import Buffer, For, Seq, Store, loop_var
from relax_edge.transform.legalize import legalize
from relax_edge.transform.schedule import schedule_program
from tests.vulkan.glsl_cases import bounded_module

needs_glslc = pytest.mark.skipif(shutil.which("glslc") is None, reason="glslc is not installed")
F = "float32"


def legalized(templates, dtypes, build, sizes=None):
    (p,) = legalize(bounded_module(templates, dtypes, build, sizes)).tensor_programs.values()
    return p


def sum_program(inputs: int, n):
    """out[i] = x0[i] + ... + x{inputs-1}[i] over `n` elements."""
    xs = [Buffer(f"x{k}", F, (n,)) for k in range(inputs)]
    out = Buffer("out", F, (n,))
    i = loop_var("i")
    value = xs[0][i]
    for x in xs[1:]:
        value = value + x[i]
    sizes = (n,) if isinstance(n, SizeVar) else ()
    return TensorProgram("sum_many", tuple(xs), (out,), For(i, n, Store(out, (i,), value)), sizes)


@needs_glslc
def test_push_constants_fall_back_to_a_storage_buffer_past_128_bytes(tmp_path):
    n = SizeVar("n", upper=1 << 20)
    small, big = sum_program(28, n), sum_program(29, n)   # 29 / 30 buffers: 2 + 29 + 1 = 32 words, then 33
    text, record = emit_glsl(small)
    assert record.push_words == 32 and not record.push_in_buffer
    assert "layout(push_constant, std430) uniform PC" in text
    compile_spirv(text, tmp_path, "small")
    text, record = emit_glsl(big)
    assert record.push_words == 2 + 30 + 1 and record.push_in_buffer and record.num_buffers == 30
    assert "layout(std430, set = 0, binding = 30) readonly buffer PC" in text and "push_constant" not in text
    compile_spirv(text, tmp_path, "big")


@needs_glslc
def test_bindings_in_params_order_with_access_qualifiers(tmp_path):
    p = legalized([("n", 5)], [F], lambda x: make_call("log_softmax", [x], {"axis": 1}))
    text, record = emit_glsl(p)
    bindings = re.findall(r"binding = (\d+)\) (\w+ )?buffer B\d+ \{ float v\[\]; \} b\d+;  // (\w+)", text)
    assert [(int(k), name) for k, _, name in bindings] == [(k, b.name) for k, b in enumerate(p.params)]
    assert [q.strip() for _, q, _ in bindings] == ["readonly", "writeonly", "", ""]   # scratch: read and written
    assert "if (gid >= pc.items) return;" in text and "local_size_x_id = 0" in text
    assert record.grid == ("i0",) and record.flags == 0 and record.shared_bytes == 0
    compile_spirv(text, tmp_path, p.name)


def test_items_is_the_product_of_the_grid_extents():
    p = legalized([("n", 1, 2, 3), (4, 3, "m")], [F, F], lambda a, b: make_call("matmul", [a, b]))
    _, record = emit_glsl(p, local_size_x=128)
    assert record.local_size_x == 128 and len(record.grid) == 4
    env = {v: {"n": 7, "m": 65}[v.name] for v in p.size_params}
    assert evaluate(record.items, env) == 7 * 4 * 2 * 65   # the output's elements: one invocation each
    assert record.size_params == tuple(v.name for v in p.size_params)
    assert eval(record.items_c, {}, {"n": 7, "m": 65}) == 7 * 4 * 2 * 65   # noqa: S307  (a C product of names)


def test_stages_of_one_extent_fuse_into_the_grid():
    p = legalized([("n", 5)], [F], lambda x: make_call("softmax", [x], {"axis": 1}))
    grid = map_grid(p)
    assert len(grid.loops) == 1 and prove_equal(grid.items, p.size_params[0]) is Proof.YES


def test_a_whole_reduction_runs_in_one_workgroup():
    p = legalized([("n", 3)], [F], lambda x: make_call("sum", [x]))
    text, record = emit_glsl(p)
    assert record.grid == () and record.items_c == "64" and record.shared_bytes == 4 * 64   # reduce.py
    assert "barrier();" in text and "return;" not in text


def test_unbounded_sizes_are_refused_naming_the_buffer():
    n = SizeVar("n")   # no upper bound: 32-bit indexing cannot be proven
    with pytest.raises(GlslUnsupported, match=r"buffer x0 has up to inf elements.*SizeVar\(name, upper=") as info:
        emit_glsl(sum_program(2, n))
    assert info.value.reason == "buffer may exceed 2^31 elements"
    with pytest.raises(GlslUnsupported, match="buffer x0 has up to 4294967296 elements"):
        emit_glsl(sum_program(2, SizeVar("n", upper=1 << 32)))


def test_unsupported_dtype_is_named():
    with pytest.raises(GlslUnsupported, match=r"buffer x0 is uint64 .*not supported yet: dtype uint64"):
        emit_glsl(legalized([("n", 5)], ["uint64"], lambda x: make_call("cast", [x], {"dtype": "float32"})))


def test_bad_workgroup_size_is_an_error():
    for bad in (0, 2048, 64.0, True):
        with pytest.raises(RelaxEdgeError, match="local_size_x must be an integer in"):
            emit_glsl(sum_program(2, 16), local_size_x=bad)


@needs_glslc
@pytest.mark.parametrize("bits", [128, 256])
def test_scheduled_programs_emit_vector_and_parallel_loops_as_scalar_code(bits, tmp_path):
    """The host schedule's vectorized loops, reductions over partial sums and
    parallel split (`if work > T`) come out as plain loops and a grid."""
    n = SizeVar("n", upper=1 << 16)
    for build, templates in ((lambda x: make_call("gelu", [x]), [(n, 100)]),
                             (lambda x: make_call("softmax", [x], {"axis": 1}), [(n, 100)])):
        p = legalize(bounded_module(templates, [F], build)).tensor_programs
        (p,) = p.values()
        s = schedule_program(p, bits, True)
        assert "parallel" in str(s) and "vectorized" in str(s)
        text, record = emit_glsl(s)
        assert record.grid, "the parallel branch of the split became the grid"
        compile_spirv(text, tmp_path, f"{s.name}_{bits}")


@needs_glslc
def test_shader_errors_carry_the_compiler_output(tmp_path):
    with pytest.raises(ShaderCompileError, match=r"(?s)glslc failed .*'nope' : undeclared identifier"):
        compile_spirv("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { nope = 1; }\n", tmp_path, "bad")
    with pytest.raises(ShaderCompileError, match="shader name"):
        compile_spirv("", tmp_path, "../escape")


def test_index_math_past_32_bits_is_refused():
    """A loop bound by a size whose index expression can exceed 2^31 even though no buffer is that large."""
    n = SizeVar("n", upper=1 << 20)
    x, out, i, j = Buffer("x", F, (n,)), Buffer("out", F, (n,)), loop_var("i"), loop_var("j")
    body = For(i, n, For(j, n, Store(out, (i,), x[(i * n + j) // n])))
    p = TensorProgram("wide", (x,), (out,), Seq([body]), (n,))
    with pytest.raises(GlslUnsupported, match="index expression .* outside 32-bit int"):
        emit_glsl(p)
