"""Shared by the one-node ONNX operator tests: the one-node model, outputs
checked against a reference at several sizes, the model interpreted or
compiled for the host and loaded."""

import contextlib
import functools

import numpy as np
import onnxruntime as ort
from onnx import ModelProto, helper
from onnx.reference import ReferenceEvaluator

import relax_edge as rxe


def one_node_model(op_type: str, inputs, *, opset: int, node_inputs=None, outputs=("y",), attrs=None,
                   initializers=(), graph_name: str = "one_node", node_name: str | None = None,
                   ir_version: int = 8) -> ModelProto:
    """A model of one `op_type` node at `opset` of the default domain.

    `inputs`: the graph inputs as (name, ONNX element type, shape); `initializers`: TensorProtos;
    `node_inputs`: the node's input names in order ("" for an omitted optional one), by default the
    graph inputs and then the initializers; `outputs`: the node's outputs, graph outputs of no stated
    type or shape."""
    if node_inputs is None:
        node_inputs = [name for name, _, _ in inputs] + [t.name for t in initializers]
    node = helper.make_node(op_type, list(node_inputs), list(outputs), name=node_name, **(attrs or {}))
    graph = helper.make_graph(
        [node], graph_name, [helper.make_tensor_value_info(name, elem, list(shape)) for name, elem, shape in inputs],
        [helper.make_empty_tensor_value_info(name) for name in outputs], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def reference_outputs(model, feeds: dict, by_ort: bool = True) -> list:
    """The outputs of `model` (ONNX) on `feeds` by ONNX Runtime, or by onnx.reference (`by_ort` False)."""
    if by_ort:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    return ReferenceEvaluator(model).run(None, feeds)


def assert_matches(actual, expected, tol: float = 0.0, float16_tol: float | None = None) -> None:
    """Same shape and dtype; floats within `tol` (float16 within `float16_tol`
    where given), everything else exactly (`tol` 0: floats exactly too)."""
    actual = np.asarray(actual)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, \
        (actual.shape, actual.dtype, expected.shape, expected.dtype)
    if expected.dtype == np.float16 and float16_tol is not None:
        np.testing.assert_allclose(actual.astype(np.float32), expected, rtol=float16_tol, atol=float16_tol)
    elif expected.dtype.kind == "f" and tol:
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(actual, expected)


@contextlib.contextmanager
def compiled(model, backend: str, out_dir):
    """`model` (ONNX) built for the host with `backend` into `out_dir`, loaded."""
    art = rxe.build(rxe.from_onnx(model), board="host", backend=backend, out_dir=out_dir, name="m", profile=False)
    with rxe.connect("host") as dev:
        yield dev.load(art)



def check_interpreted(model, sizes, example, check=assert_matches) -> None:
    """`model` (ONNX) imported once and interpreted at each n of `sizes`: example(n) gives (inputs,
    expected outputs), and each output must pass check(actual, expected)."""
    module = rxe.from_onnx(model)
    _check_at_sizes(functools.partial(rxe.interpret, module), sizes, example, check)


def check_compiled(model, backend: str, out_dir, sizes, example, check=assert_matches) -> None:
    """As check_interpreted, with `model` compiled for the host with `backend` into `out_dir`."""
    with compiled(model, backend, out_dir) as loaded:
        _check_at_sizes(loaded.run, sizes, example, check)


def _check_at_sizes(run, sizes, example, check) -> None:
    for n in sizes:
        inputs, expected = example(n)
        actual = run(*inputs)
        actual = list(actual) if isinstance(actual, (tuple, list)) else [actual]
        assert len(actual) == len(expected), (n, len(actual), len(expected))
        for got, want in zip(actual, expected):
            check(got, want)
