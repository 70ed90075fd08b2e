"""Reductions over the last axis as one workgroup per row (codegen/vulkan/reduce.py)
through rxe.build on host-vulkan: softmax, layer norm, mean, sum and max from
one build over symbolic rows and row length, against numpy at row lengths
that do not divide the workgroup size and at more rows than one grid
dimension holds (66,000 workgroups fold into y), with the validation layer
on (when installed) and zero messages."""

from __future__ import annotations

import numpy as np

import relax_edge as rxe
from relax_edge import op
from relax_edge.codegen.vulkan import emit_glsl
from relax_edge.ir import Builder, SizeVar, TensorType, Tuple, Var
from relax_edge.op.reduce import reduce_max
from relax_edge.transform.legalize import legalize
from tests.vulkan import vkrt


def _module():
    n, c = SizeVar("n", upper=70_000), SizeVar("c", upper=1100)
    x = Var("x", TensorType((n, c), "float32"))
    g = Var("g", TensorType((c,), "float32"))
    b = Var("b", TensorType((c,), "float32"))
    bb = Builder()
    with bb.function("main", [x, g, b]):
        with bb.dataflow():
            out = bb.emit_output(Tuple([op.softmax(x), op.layer_norm(x, g, b), op.mean(x, axis=(-1,)),
                                        op.sum(x, axis=(-1,), keepdims=True), reduce_max(x, axis=(-1,))]))
        bb.ret(out)
    return bb.get()


def _reference(x, g, b):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    return [e / e.sum(-1, keepdims=True), (x64 - mean) / np.sqrt(var + 1e-5) * g + b, x64.mean(-1),
            x64.sum(-1, keepdims=True), x64.max(-1)]


def test_every_reduction_program_takes_the_workgroup_form():
    for p in legalize(_module()).tensor_programs.values():
        text, record = emit_glsl(p)
        assert record.shared_bytes == 4 * 64 and "barrier();" in text, p.name
        assert "return;" not in text, p.name   # no early return before a barrier


def test_row_reductions_match_numpy_from_one_build(vulkan_env, tmp_path):
    art = rxe.build(_module(), board="host-vulkan", backend="vulkan", out_dir=tmp_path, profile=False)
    rng = np.random.default_rng(0)
    with rxe.connect("host-vulkan") as dev:
        mod = dev.load(art)
        for n, c in ((3, 1000), (66_000, 67), (2, 1), (5, 64)):
            x = rng.standard_normal((n, c)).astype("float32")
            g = rng.standard_normal(c).astype("float32")
            b = rng.standard_normal(c).astype("float32")
            got = mod.run(x, g, b)
            for k, (y, want) in enumerate(zip(got, _reference(x, g, b))):
                np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5, err_msg=f"output {k} at n={n} c={c}")
        vkrt.assert_clean(mod, vulkan_env)


def test_a_reduction_shorter_than_a_workgroup_keeps_one_invocation_per_row():
    x = Var("x", TensorType((SizeVar("n", upper=1000), 6), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        bb.ret(bb.emit(op.softmax(x)))
    (p,) = legalize(bb.get()).tensor_programs.values()
    text, record = emit_glsl(p)
    assert record.shared_bytes == 0 and "barrier" not in text
