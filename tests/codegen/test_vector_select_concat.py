"""A concat of fused branches that the scheduler vectorizes (Inception v2's
`fused_multiply_add_relu_..._concat`): each output lane picks its branch by
a uniform condition, so the vector loop holds a `cond ? a : b` whose arms
are a blend (the Relu) and a plain vector load (the last input). In C the
arms had different types (the unaligned load type against the vector
type: "type mismatch in conditional expression"). Compiled on the host with
the C and LLVM backends and compared with ONNX Runtime and numpy, at
several sizes of a symbolic batch and of a symbolic width (a remainder
after the vector lanes)."""

from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import relax_edge as rxe
from tests.frontend.test_onnx_import import make_model, ort, vi

CHANNELS = (4, 2, 3)   # two scale-shift-relu branches, then a plain input


def _concat_of_branches(width):
    rng = np.random.default_rng(7)
    inits, nodes = {}, []
    for k, c in enumerate(CHANNELS[:2]):
        inits[f"s{k}"] = rng.uniform(0.5, 2.0, (1, c, 1, 1)).astype(np.float32)
        inits[f"b{k}"] = rng.uniform(-1.0, 1.0, (1, c, 1, 1)).astype(np.float32)
        nodes += [helper.make_node("Mul", [f"x{k}", f"s{k}"], [f"m{k}"]),
                  helper.make_node("Add", [f"m{k}", f"b{k}"], [f"a{k}"]),
                  helper.make_node("Relu", [f"a{k}"], [f"r{k}"])]
    nodes.append(helper.make_node("Concat", ["r0", "r1", "x2"], ["y"], axis=1))
    inputs = [vi(f"x{k}", ["N", c, 3, width]) for k, c in enumerate(CHANNELS)]
    return make_model(nodes, inputs, [vi("y", ["N", sum(CHANNELS), 3, width])], inits), inits


def _numpy(inits, x0, x1, x2):
    r0 = np.maximum(x0 * inits["s0"] + inits["b0"], 0)
    r1 = np.maximum(x1 * inits["s1"] + inits["b1"], 0)
    return np.concatenate([r0, r1, x2], axis=1)


def _arrays(batch, width, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, c, 3, width)).astype(np.float32) for c in CHANNELS]


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("width", [14, "W"])
def test_concat_of_fused_branches_compiles_and_matches(backend, width, tmp_path):
    model, inits = _concat_of_branches(width)
    mod = rxe.from_onnx(model, dim_bounds={"N": 8} | ({"W": 64} if width == "W" else {}))
    loaded = rxe.connect("host").load(rxe.build(mod, board="host", backend=backend, out_dir=tmp_path,
                                                 name="concat_branches", quiet=True, profile=False))
    widths = [14] if width == 14 else [1, 8, 13, 30]
    for seed, (batch, w) in enumerate((b, w) for b in (1, 3) for w in widths):
        xs = _arrays(batch, w, seed)
        got = loaded.run(*xs)[0]
        np.testing.assert_allclose(got, ort(model, *xs)[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got, _numpy(inits, *xs), rtol=1e-6, atol=1e-6)


def test_the_kernel_holds_a_vector_select_of_a_blend_and_a_load(tmp_path):
    """The case above reaches the emitter's uniform-condition select (so the
    test keeps testing it), with both arms cast to the vector type."""
    model, _ = _concat_of_branches(14)
    art = rxe.build(rxe.from_onnx(model), board="host", backend="c", out_dir=tmp_path, name="m", quiet=True,
                    profile=False)
    text = (tmp_path / "m.c").read_text()
    assert art.backend == "c"
    assert " ? (rxe_v8f32)(rxe_v8f32_blend(" in text and " : (rxe_v8f32)(rxe_v8f32_load(" in text



@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_light_inception_v2_compiles_and_matches_onnxruntime(backend, tmp_path):
    """The model where the mismatch was found: the onnx package's light
    Inception v2 (constant weights, so the uniform softmax output says
    little: its input, the logits, is compared too)."""
    import onnx
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_inception_v2.onnx"
    model = onnx.load(path)
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"][-1]
    model.graph.output.append(helper.make_tensor_value_info(softmax.input[0], onnx.TensorProto.FLOAT, None))
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    expected = ort(model, x)
    art = rxe.build(rxe.from_onnx(model), board="host", backend=backend, out_dir=tmp_path, name="inception_v2",
                    quiet=True, profile=False)
    for got, want in zip(rxe.connect("host").load(art).run(x), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
