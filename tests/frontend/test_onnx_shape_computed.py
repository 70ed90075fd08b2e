"""Operator inputs that exported models compute from shapes (Shape, Slice, Concat) rather than store:
found by the fresh zoo exports (tests/zoo_models.py), each checked against ONNX Runtime at several
sizes of a dynamic dim, interpreted and compiled for the host."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from tests.frontend.one_node import assert_matches, check_compiled, check_interpreted, reference_outputs


def _tile_by_batch_model():
    """DeBERTa-v2's relative embeddings: Tile(rel (1, 2, 3), Concat(Shape(x)[:1], [2, 1])), x (n, 4)."""
    ints = lambda name, values: helper.make_tensor(name, TensorProto.INT64, [len(values)], values)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero", "one"], ["batch"]),
             helper.make_node("Concat", ["batch", "rest"], ["repeats"], axis=0),
             helper.make_node("Tile", ["rel", "repeats"], ["y"], name="tile_by_batch")]
    graph = helper.make_graph(
        nodes, "tile_by_batch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("rel", TensorProto.FLOAT, [1, 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 3])],
        initializer=[ints("zero", [0]), ints("one", [1]), ints("rest", [2, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _tile_example(n):
    rng = np.random.default_rng(n)
    feeds = {"x": rng.standard_normal((n, 4)).astype(np.float32),
             "rel": rng.standard_normal((1, 2, 3)).astype(np.float32)}
    return list(feeds.values()), reference_outputs(_tile_by_batch_model(), feeds)


def test_tile_repeats_from_shape_interpreted():
    check_interpreted(_tile_by_batch_model(), (1, 3, 5), _tile_example)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_tile_repeats_from_shape_compiled(backend, tmp_path):
    check_compiled(_tile_by_batch_model(), backend, tmp_path, (2, 5), _tile_example)


@pytest.mark.slow
@pytest.mark.emu
def test_tile_repeats_from_shape_on_qemu_aarch64(tmp_path):
    art = rxe.build(rxe.from_onnx(_tile_by_batch_model()), board="qemu-aarch64", out_dir=tmp_path / "art", name="m")
    loaded = rxe.connect("qemu-aarch64").load(art)
    inputs, expected = _tile_example(3)
    assert_matches(list(loaded.run(*inputs))[0], expected[0])


def test_tile_repeats_from_data_refused():
    model = _tile_by_batch_model()
    model.graph.node[0].CopyFrom(helper.make_node("Cast", ["x"], ["cast"], to=TensorProto.INT64))
    model.graph.node[1].CopyFrom(helper.make_node("ReduceMax", ["cast"], ["batch"], keepdims=0))
    model.graph.node[2].CopyFrom(helper.make_node("Concat", ["batch1", "rest"], ["repeats"], axis=0))
    model.graph.node.insert(2, helper.make_node("Unsqueeze", ["batch", "zero"], ["batch1"]))
    with pytest.raises(rxe.OnnxImportError, match=r"tile_by_batch.*repeats.*known at compile time"):
        rxe.from_onnx(model)


def _ints(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def _model(nodes, name, inputs, output, initializers):
    graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, output)],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _pad_to_window_model():
    """swin_t's window padding: x (1, 2, h) padded at the end of h by (7 - h % 7) % 7."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "two", "three"], ["h"]),
             helper.make_node("Mod", ["h", "seven"], ["rest"]),
             helper.make_node("Sub", ["seven", "rest"], ["short"]),
             helper.make_node("Mod", ["short", "seven"], ["pad"]),
             helper.make_node("Concat", ["zeros", "pad"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_to_window", mode="constant")]
    return _model(nodes, "pad_to_window", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h"])],
                  [1, 2, "padded"], [_ints("two", [2]), _ints("three", [3]), _ints("seven", [7]),
                                     _ints("zeros", [0, 0, 0, 0, 0])])


def _pad_example(h):
    feeds = {"x": np.random.default_rng(h).standard_normal((1, 2, h)).astype(np.float32)}
    return list(feeds.values()), reference_outputs(_pad_to_window_model(), feeds)


def test_pad_pads_from_shape_interpreted():
    check_interpreted(_pad_to_window_model(), (3, 7, 10), _pad_example)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_pad_pads_from_shape_compiled(backend, tmp_path):
    check_compiled(_pad_to_window_model(), backend, tmp_path, (5, 14), _pad_example)


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
    return _model(nodes, "windows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])],
                  ["n", "m"], [_ints("zero", [0]), _ints("one", [1]), _ints("two", [2]), _ints("four", [4])])


def _windows_example(n):
    feeds = {"x": np.random.default_rng(n).standard_normal((n, 4 * n + 3)).astype(np.float32)}
    return list(feeds.values()), reference_outputs(_windows_model(), feeds)


def test_div_by_a_size_that_may_be_zero_exact_quotient():
    mod = rxe.from_onnx(_windows_model())
    assert str(mod.functions["main"].ret_type.shape) == "(n, m)"
    check_interpreted(_windows_model(), (1, 4), _windows_example)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_div_by_a_size_that_may_be_zero_compiled(backend, tmp_path):
    check_compiled(_windows_model(), backend, tmp_path, (2, 3), _windows_example)


def test_div_by_a_size_that_may_be_zero_inexact_not_simplified():
    model = _windows_model()
    model.graph.node[4].input[:] = ["n", "n"]  # (n * n) / k: no exact quotient, left to run time
    with pytest.raises(rxe.OnnxImportError, match="cannot decide|must be known at compile time"):
        rxe.from_onnx(model)
