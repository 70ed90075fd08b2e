"""Operator inputs that exported models compute from shapes (Shape, Slice, Mod, Div, Concat) rather than
store, found by fresh zoo exports (tests/zoo_models.py): each model checked against ONNX Runtime at several
sizes of its dynamic dims, interpreted and compiled for the host (C, LLVM; one on qemu-aarch64)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from tests.frontend.one_node import assert_matches, check_compiled, check_interpreted, reference_outputs


def _ints(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def _model(nodes, name, inputs, output, initializers):
    """A graph of `nodes` at opset 17: float `inputs` (name, shape), one float output y of shape `output`."""
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output)],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _tile_by_batch_model():
    """DeBERTa-v2's relative embeddings: Tile(rel (1, 2, 3), Concat(Shape(x)[:1], [2, 1])), x (n, 4)."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero", "one"], ["batch"]),
             helper.make_node("Concat", ["batch", "rest"], ["repeats"], axis=0),
             helper.make_node("Tile", ["rel", "repeats"], ["y"], name="tile_by_batch")]
    return _model(nodes, "tile_by_batch", [("x", ["n", 4]), ("rel", [1, 2, 3])], ["n", 4, 3],
                  [_ints("zero", [0]), _ints("one", [1]), _ints("rest", [2, 1])])


def _pad_to_window_model():
    """swin_t's window padding: x (1, 2, h) padded at the end of h by (7 - h % 7) % 7."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "two", "three"], ["h"]),
             helper.make_node("Mod", ["h", "seven"], ["rest"]),
             helper.make_node("Sub", ["seven", "rest"], ["short"]),
             helper.make_node("Mod", ["short", "seven"], ["pad"]),
             helper.make_node("Concat", ["zeros", "pad"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_to_window", mode="constant")]
    return _model(nodes, "pad_to_window", [("x", [1, 2, "h"])], [1, 2, "padded"],
                  [_ints("two", [2]), _ints("three", [3]), _ints("seven", [7]), _ints("zeros", [0, 0, 0, 0, 0])])


def _windows_model():
    """swin_t's attention mask: ones of shape ((n * k) / k, m) added to x (n, m), where k = m / 4 is 0 at
    its lower bound (integer Div by it is then undefined): the quotient must simplify to n."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero", "one"], ["n"]),
             helper.make_node("Slice", ["shape", "one", "two"], ["m"]),
             helper.make_node("Div", ["m", "four"], ["k"]),
             helper.make_node("Mul", ["n", "k"], ["nk"]),
             helper.make_node("Div", ["nk", "k"], ["q"], name="windows_div"),
             helper.make_node("Concat", ["q", "m"], ["target"], axis=0),
             helper.make_node("ConstantOfShape", ["target"], ["ones"],
                              value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("Add", ["ones", "x"], ["y"])]
    return _model(nodes, "windows", [("x", ["n", "m"])], ["n", "m"],
                  [_ints("zero", [0]), _ints("one", [1]), _ints("two", [2]), _ints("four", [4])])


# name: (model, {input: shape at size n}, sizes interpreted, sizes compiled)
CASES = {
    "tile_repeats": (_tile_by_batch_model, lambda n: {"x": (n, 4), "rel": (1, 2, 3)}, (1, 3, 5), (2, 5)),
    "pad_pads": (_pad_to_window_model, lambda n: {"x": (1, 2, n)}, (3, 7, 10), (5, 14)),
    "div_exact_quotient": (_windows_model, lambda n: {"x": (n, 4 * n + 3)}, (1, 4), (2, 3)),
}


def _example(name):
    build, shapes, _, _ = CASES[name]

    def example(n):
        rng = np.random.default_rng(n)
        feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes(n).items()}
        return list(feeds.values()), reference_outputs(build(), feeds)
    return example


@pytest.mark.parametrize("name", list(CASES))
def test_shape_computed_input_interpreted(name):
    check_interpreted(CASES[name][0](), CASES[name][2], _example(name))


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", list(CASES))
def test_shape_computed_input_compiled(name, backend, tmp_path):
    check_compiled(CASES[name][0](), backend, tmp_path, CASES[name][3], _example(name))


@pytest.mark.slow
@pytest.mark.emu
def test_tile_repeats_from_shape_on_qemu_aarch64(tmp_path):
    art = rxe.build(rxe.from_onnx(_tile_by_batch_model()), board="qemu-aarch64", out_dir=tmp_path / "art", name="m",
                    profile=False)
    inputs, expected = _example("tile_repeats")(3)
    assert_matches(list(rxe.connect("qemu-aarch64").load(art).run(*inputs))[0], expected[0])


def test_div_exact_quotient_simplified():
    main = rxe.from_onnx(_windows_model()).functions["main"]
    assert str(main.ret_type.shape) == "(n, m)"


def test_div_inexact_quotient_not_simplified():
    model = _windows_model()
    model.graph.node[4].input[:] = ["n", "n"]  # (n * n) / k: no exact quotient, left to run time
    with pytest.raises(rxe.OnnxImportError, match="ConstantOfShape.*must be known at compile time"):
        rxe.from_onnx(model)


def test_tile_repeats_from_data_refused():
    model = _tile_by_batch_model()
    model.graph.node[0].CopyFrom(helper.make_node("Cast", ["x"], ["cast"], to=TensorProto.INT64))
    model.graph.node[1].CopyFrom(helper.make_node("ReduceMax", ["cast"], ["batch"], keepdims=0))
    model.graph.node[2].CopyFrom(helper.make_node("Concat", ["batch1", "rest"], ["repeats"], axis=0))
    model.graph.node.insert(2, helper.make_node("Unsqueeze", ["batch", "zero"], ["batch1"]))
    with pytest.raises(rxe.OnnxImportError, match=r"tile_by_batch.*repeats.*known at compile time"):
        rxe.from_onnx(model)
