"""Write the corpus of malformed and adversarial ONNX models that
tests/frontend/test_onnx_malformed.py feeds to `from_onnx`.

    python scripts/make_malformed_onnx.py [OUT_DIR]   (default tests/frontend/malformed)

Each case is a small .onnx file (some with a companion data file) and the
fragment of the message its OnnxImportError must contain; the fragments go
to expected.json beside the models. Everything is deterministic: rerunning
the script rewrites the same bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from onnx import AttributeProto, TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
F = TensorProto.FLOAT


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs=(), outputs=(), inits=(), opset=17, ir_version=8, domains=()):
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(inits))
    imports = [helper.make_opsetid("", opset)] if opset is not None else []
    imports += [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = ir_version
    return m


def const(name, value, dtype=None):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def relu(x="x", y="y", name="relu"):
    return helper.make_node("Relu", [x], [y], name=name)


def unary_model(inits=(), inputs=None, **kw):
    """x -> Relu -> y, with extra initializers."""
    return model([relu()], inputs or [vi("x", [2, 3])], [vi("y", [2, 3])], inits, **kw)


def raw_init(name, dims, raw, dtype=F):
    t = TensorProto(name=name, data_type=dtype, dims=list(dims))
    t.raw_data = raw
    return t


def typed_init(name, dtype, dims, values):
    """A TensorProto built field by field (helper.make_tensor refuses bad shapes)."""
    field = {F: "float_data", TensorProto.INT64: "int64_data", TensorProto.DOUBLE: "double_data",
             TensorProto.STRING: "string_data"}.get(dtype, "int32_data")
    t = TensorProto(name=name, data_type=dtype, dims=list(dims))
    getattr(t, field).extend(values)
    return t


def external_init(name, dims, location, offset=None, length=None):
    t = TensorProto(name=name, data_type=F, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    if location is not None:
        t.external_data.add(key="location", value=location)
    if offset is not None:
        t.external_data.add(key="offset", value=str(offset))
    if length is not None:
        t.external_data.add(key="length", value=str(length))
    return t


def with_init_input(init, shape):
    """A model adding initializer `init` (of `shape`) to x."""
    return model([helper.make_node("Add", ["x", init.name], ["y"], name="add")],
                 [vi("x", shape)], [vi("y", shape)], [init])


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, encoded by hand."""
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def nested_if(depth) -> bytes:
    """A model whose If's then-branch holds an If ... `depth` levels down,
    encoded by hand (protobuf refuses to build messages this deep)."""
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["r0"])], "leaf", [], [vi("r0", [1])])
    graph = leaf.SerializeToString()
    for level in range(1, depth + 1):
        then = AttributeProto(name="then_branch", type=AttributeProto.GRAPH).SerializeToString() + _field(6, graph)
        node = helper.make_node("If", ["c"], [f"r{level}"], name=f"if{level}", else_branch=leaf)
        graph = _field(1, node.SerializeToString() + _field(5, then)) + \
            helper.make_graph([], f"level{level}", [], [vi(f"r{level}", [1])]).SerializeToString()
    top = helper.make_graph([], "g", [vi("c", [], TensorProto.BOOL), vi("x", [1])], [vi(f"r{depth}", [1])])
    shell = model([], opset=17)
    shell.ClearField("graph")
    return shell.SerializeToString() + _field(7, graph + top.SerializeToString())


def _patched(m, placeholder: bytes, replacement: bytes) -> bytes:
    """The model's bytes with every `placeholder` replaced (same length)."""
    assert len(placeholder) == len(replacement)
    return m.SerializeToString().replace(placeholder, replacement)


def cases(out: Path):
    """Yield (file name, model bytes or ModelProto, expected message fragment)."""
    good = unary_model([const("w", np.ones(3, np.float32))]).SerializeToString()

    # files that are not ONNX models at all
    yield "empty", b"", "ir_version 0"
    yield "garbage_bytes", bytes(range(256)) * 4, "not a readable ONNX model"
    yield "truncated", good[: len(good) - 7], "not a readable ONNX model"
    yield "text_file", b"this is a text file, not a model\n" * 8, "not a readable ONNX model"
    yield "ir_version_0", unary_model(ir_version=0), "ir_version 0"
    yield "ir_version_negative", unary_model(ir_version=-3), "ir_version -3"

    # opsets
    yield "opset_missing", unary_model(opset=None, domains=["com.example"]), "imports no version of the default"
    yield "opset_too_new", unary_model(opset=99), "opset 99"
    yield "opset_zero", unary_model(opset=0), "opset 0"
    yield "opset_too_old", model([helper.make_node("Add", ["x", "x"], ["y"], name="add")],
                                 [vi("x", [2])], [vi("y", [2])], opset=3), "these changed: Add"

    # initializers: dims, data, element types
    yield "init_negative_dim", unary_model([typed_init("w", F, [-5], [1.0] * 5)]), \
        "initializer w: dimension 0 is -5"
    yield "init_negative_dim_raw", unary_model([raw_init("w", [2, -1], np.ones(2, np.float32).tobytes())]), \
        "initializer w: dimension 1 is -1"
    yield "init_huge_dim", unary_model([typed_init("w", F, [1 << 40], [])]), \
        "initializer w: float_data holds 0 values"
    yield "init_dims_overflow_int64", unary_model([typed_init("w", F, [1 << 32, 1 << 32], [])]), \
        "are too large (their size in bytes overflows int64)"
    yield "init_dims_overflow_many", unary_model([typed_init("w", F, [1 << 20] * 4, [])]), \
        "are too large (their size in bytes overflows int64)"
    yield "init_raw_short", unary_model([raw_init("w", [4], b"\0" * 12)]), \
        "initializer w: raw_data holds 12 bytes, dims [4] of float need 16"
    yield "init_raw_long", unary_model([raw_init("w", [2, 2], b"\0" * 40)]), \
        "raw_data holds 40 bytes, dims [2, 2] of float need 16"
    yield "init_float_data_short", unary_model([typed_init("w", F, [2, 2], [1.0, 2.0, 3.0])]), \
        "initializer w: float_data holds 3 values"
    yield "init_int64_data_long", unary_model([typed_init("w", TensorProto.INT64, [2], [1, 2, 3])]), \
        "int64_data holds 3 values"
    yield "init_float16_mismatch", unary_model([typed_init("w", TensorProto.FLOAT16, [3], [0, 0])]), \
        "int32_data holds 2 values"
    yield "init_string", unary_model([helper.make_tensor("w", TensorProto.STRING, [1], [b"hello"])]), \
        "initializer w: string tensors are not supported"
    yield "init_undefined_type", unary_model([TensorProto(name="w", data_type=0, dims=[1])]), \
        "initializer w: the element type is undefined"
    yield "init_unknown_type", unary_model([raw_init("w", [1], b"\0" * 4, dtype=99)]), \
        "initializer w: unknown element type 99"
    yield "init_duplicate_name", unary_model([const("w", [1.0]), const("w", [2.0])]), \
        "initializer w: two initializers have this name"
    sparse = unary_model()
    sparse.graph.sparse_initializer.add().CopyFrom(helper.make_sparse_tensor(
        helper.make_tensor("sv", F, [1], [1.0]), helper.make_tensor("si", TensorProto.INT64, [1], [0]), [4]))
    yield "init_sparse", sparse, "initializer sv: sparse initializers are not supported"
    yield "init_complex_used", with_init_input(TensorProto(
        name="w", data_type=TensorProto.COMPLEX64, dims=[3], float_data=[0.0] * 6), [3]), \
        "node add (Add): unsupported dtype dtype('complex64')"

    # external data
    for name, location, fragment in [
            ("external_parent_dirs", "../../etc/passwd",
             "external data location '../../etc/passwd' is outside the model's folder"),
            ("external_absolute", "/etc/passwd", "external data location '/etc/passwd' is an absolute path"),
            ("external_missing", "no_such_weights.bin", "external data file 'no_such_weights.bin' does not exist"),
            ("external_no_location", None, "external data gives no location")]:
        yield name, with_init_input(external_init("w", [3], location), [3]), f"initializer w: {fragment}"
    (out / "external_short.bin").write_bytes(b"\0" * 8)
    yield "external_past_end", with_init_input(external_init("w", [3], "external_short.bin"), [3]), \
        "runs past the end of 'external_short.bin' (8 bytes)"
    yield "external_length_mismatch", with_init_input(external_init("w", [3], "external_short.bin", 0, 8), [3]), \
        "external data length 8 bytes, dims [3] need 12"
    yield "external_bad_offset", with_init_input(external_init("w", [3], "external_short.bin", "abc"), [3]), \
        "offset/length are not integers"

    # graph structure
    yield "dangling_input", model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
                                  [vi("x", [2])], [vi("y", [2])]), \
        "node add (Add): input 'ghost' is not produced by any node"
    yield "cycle", model([helper.make_node("Relu", ["b"], ["a"], name="first"),
                          helper.make_node("Relu", ["a"], ["b"], name="second")],
                         [vi("x", [2])], [vi("b", [2])]), "node first (Relu): input 'b' is produced by the later " \
                                                           "node second (Relu) (a cycle)"
    yield "out_of_order", model([helper.make_node("Relu", ["a"], ["y"], name="late"),
                                 helper.make_node("Relu", ["x"], ["a"], name="early")],
                                [vi("x", [2])], [vi("y", [2])]), "(out of topological order)"
    yield "duplicate_node_outputs", model([helper.make_node("Relu", ["x"], ["y"], name="one"),
                                           helper.make_node("Neg", ["x"], ["y"], name="two")],
                                          [vi("x", [2])], [vi("y", [2])]), \
        "node two (Neg): output 'y' is also written by node one (Relu)"
    yield "output_overwrites_input", model([helper.make_node("Relu", ["x"], ["x"], name="inplace")],
                                           [vi("x", [2])], [vi("x", [2])]), \
        "node inplace (Relu): output 'x' overwrites the graph input x"
    yield "duplicate_graph_inputs", model([relu()], [vi("x", [2]), vi("x", [3])], [vi("y", [2])]), \
        "graph input x: two graph inputs have this name"
    yield "no_outputs", model([relu()], [vi("x", [2])], []), "the graph has no outputs"
    yield "output_never_produced", model([relu()], [vi("x", [2])], [vi("z", [2])]), \
        "graph output z is not produced"
    yield "empty_op_type", model([helper.make_node("", ["x"], ["y"], name="blank")], [vi("x", [2])],
                                 [vi("y", [2])]), "node blank (): the node has no op type"
    yield "input_string_dtype", model([relu()], [vi("x", [2], TensorProto.STRING)], [vi("y", [2])]), \
        "input x: element type string is not supported"
    yield "input_negative_dim", model([relu()], [vi("x", [2, -4])], [vi("y", [2])]), \
        "input x dimension 1 is -4"
    seq = helper.make_tensor_sequence_value_info("x", F, [2])
    yield "input_sequence", model([relu()], [seq], [vi("y", [2])]), "input x: only tensor inputs are supported"

    # operators and domains
    yield "unknown_op", model([helper.make_node("FooBar", ["x"], ["y"], name="foo")], [vi("x", [2])],
                              [vi("y", [2])]), "unsupported ONNX operators: FooBar (1 node)"
    yield "unknown_domain", model([helper.make_node("Relu", ["x"], ["y"], domain="com.example")],
                                  [vi("x", [2])], [vi("y", [2])], domains=["com.example"]), \
        "unsupported ONNX operators: com.example.Relu"
    yield "if_malformed_branch", model([helper.make_node(
        "If", ["c"], ["y"], name="branch",
        then_branch=helper.make_graph([helper.make_node("Relu", ["nowhere"], ["t"])], "then", [], [vi("t", [2])]),
        else_branch=helper.make_graph([], "else", [], []))], [vi("c", [], TensorProto.BOOL)], [vi("y", [2])]), \
        "node branch (If) attribute else_branch: the graph has no outputs"
    yield "nested_subgraphs_deep", nested_if(120), "not a readable ONNX model (DecodeError"
    yield "op_not_in_opset", model([helper.make_node("Gelu", ["x"], ["y"], name="gelu")], [vi("x", [2])],
                                   [vi("y", [2])], opset=13), \
        "node gelu (Gelu): operator Gelu does not exist at opset 13"

    # attributes and input counts (checked against the operator's schema)
    yield "attr_int_for_list", model([helper.make_node("Transpose", ["x"], ["y"], name="tr", perm=1)],
                                     [vi("x", [2, 3])], [vi("y", [3, 2])]), \
        "node tr (Transpose): attribute perm must be list of int, got int 1"
    yield "attr_string_for_int", model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis="last")],
                                       [vi("x", [2])], [vi("y", [2])]), "attribute axis must be int, got str 'last'"
    yield "attr_float_for_int", model([helper.make_node("Flatten", ["x"], ["y"], name="fl", axis=1.5)],
                                      [vi("x", [2, 3])], [vi("y", [2, 3])]), "attribute axis must be int, got float 1.5"
    untyped = helper.make_node("LeakyRelu", ["x"], ["y"], name="leaky")
    untyped.attribute.add(name="alpha", f=0.1)  # no type given
    yield "attr_untyped", model([untyped], [vi("x", [2])], [vi("y", [2])]), \
        "node leaky (LeakyRelu): attribute alpha must be float, got undefined"
    yield "attr_twice", model([helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=0)],
                              [vi("x", [2])], [vi("y", [4])]), None  # patched below
    yield "attr_missing_required", model([helper.make_node("Concat", ["x", "x"], ["y"], name="cat")],
                                         [vi("x", [2])], [vi("y", [4])]), \
        "node cat (Concat): required attribute axis is missing"
    yield "attr_tensor_string_dtype", model([helper.make_node(
        "ConstantOfShape", ["s"], ["y"], name="fill", value=helper.make_tensor("v", TensorProto.STRING, [1], [b"a"]))],
        [], [vi("y", [2])], [const("s", [2], np.int64)]), \
        "node fill (ConstantOfShape): attribute value: string tensors are not supported"
    yield "attr_tensor_double", model([helper.make_node(
        "ConstantOfShape", ["s"], ["y"], name="fill", value=helper.make_tensor("v", TensorProto.DOUBLE, [1], [1.0]))],
        [], [vi("y", [2])], [const("s", [2], np.int64)]), "value of type double is not supported"
    yield "attr_tensor_bad_data", model([helper.make_node(
        "Constant", [], ["y"], name="k", value=raw_init("v", [3], b"\0" * 5))], [], [vi("y", [3])]), \
        "node k (Constant): attribute value: raw_data holds 5 bytes"
    yield "attr_tensor_negative_dim", model([helper.make_node(
        "Constant", [], ["y"], name="k", value=typed_init("v", F, [-2], [1.0, 2.0]))], [], [vi("y", [2])]), \
        "node k (Constant): attribute value: dimension 0 is -2"
    yield "constant_two_values", model([helper.make_node(
        "Constant", [], ["y"], name="k", value=helper.make_tensor("v", F, [1], [1.0]), value_float=2.0)],
        [], [vi("y", [1])]), "node k (Constant): a Constant needs exactly one value attribute, got 2"
    yield "constant_no_value", model([helper.make_node("Constant", [], ["y"], name="k")], [], [vi("y", [1])]), \
        "node k (Constant): a Constant needs exactly one value attribute, got 0"
    yield "constant_string", model([helper.make_node("Constant", [], ["y"], name="k", value_string="hi")],
                                   [], [vi("y", [1])]), "node k (Constant): only tensor, float(s) and int(s)"
    yield "too_many_inputs", model([helper.make_node("Relu", ["x", "x"], ["y"], name="relu2")],
                                   [vi("x", [2])], [vi("y", [2])]), "node relu2 (Relu): has 2 inputs, Relu-14 takes 1"
    yield "too_few_inputs", model([helper.make_node("Add", ["x"], ["y"], name="add1")], [vi("x", [2])],
                                  [vi("y", [2])]), "node add1 (Add): has 1 inputs, Add-14 takes 2"
    yield "too_many_outputs", model([helper.make_node("Relu", ["x"], ["y", "z"], name="relu_two")],
                                    [vi("x", [2])], [vi("y", [2])]), "node relu_two (Relu): has 2 outputs"
    yield "cast_to_string", model([helper.make_node("Cast", ["x"], ["y"], name="cast", to=TensorProto.STRING)],
                                  [vi("x", [2])], [vi("y", [2])]), \
        "node cast (Cast): attribute to: element type string is not supported"

    # shapes and values that cannot be
    yield "reshape_impossible", model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                                      [vi("x", [2, 3])], [vi("y", [4, 5])], [const("s", [4, 5], np.int64)]), \
        "node rs (Reshape): reshape (node rs): cannot reshape (2, 3) (6 elements) to (4, 5)"
    yield "reshape_two_minus_one", model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                                         [vi("x", [2, 3])], [vi("y", None)], [const("s", [-1, -1], np.int64)]), \
        "node rs (Reshape): reshape (node rs): at most one -1 in the new shape"
    yield "gather_index_out_of_range", model([helper.make_node("Gather", ["x", "i"], ["y"], name="pick")],
                                             [vi("x", [3, 2])], [vi("y", [2])], [const("i", 7, np.int64)]), \
        "node pick (Gather): index 7 is out of range for axis 0 of size 3"
    yield "gather_const_data_out_of_range", model([helper.make_node("Gather", ["d", "i"], ["y"], name="pick")],
                                                  [], [vi("y", [1])], [const("d", [1.0, 2.0], np.float32),
                                                                       const("i", [-3], np.int64)]), \
        "node pick (Gather): index -3 is out of range for axis 0 of size 2"
    yield "concat_mismatched", model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=0)],
                                     [vi("a", [2, 3]), vi("b", [2, 4])], [vi("y", None)]), \
        "node cat (Concat): concat (node cat): input 1 dimension 1 differs: 3 vs 4"
    yield "concat_axis_out_of_range", model([helper.make_node("Concat", ["a", "a"], ["y"], name="cat", axis=5)],
                                            [vi("a", [2, 3])], [vi("y", None)]), \
        "node cat (Concat): concat (node cat): axis 5 out of range for rank 2"
    yield "matmul_mismatched", model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                                     [vi("a", [2, 3]), vi("b", [4, 5])], [vi("y", None)]), \
        "node mm (MatMul): matmul (node mm): inner dimensions differ: 3 vs 4"
    yield "add_not_broadcastable", model([helper.make_node("Add", ["a", "b"], ["y"], name="add")],
                                         [vi("a", [2, 3]), vi("b", [4])], [vi("y", None)]), \
        "node add (Add): add (node add): shapes (2, 3) and (1, 4) at axis 1: cannot broadcast"
    yield "squeeze_non_unit", model([helper.make_node("Squeeze", ["x", "ax"], ["y"], name="sq")],
                                    [vi("x", [2, 3])], [vi("y", None)], [const("ax", [1], np.int64)]), \
        "node sq (Squeeze): cannot squeeze axis 1 of size 3"
    yield "transpose_bad_perm", model([helper.make_node("Transpose", ["x"], ["y"], name="tr", perm=[0, 0])],
                                      [vi("x", [2, 3])], [vi("y", None)]), \
        "node tr (Transpose): transpose (node tr): axes (0, 0) are not a permutation"
    yield "slice_step_zero", model([helper.make_node("Slice", ["x", "b", "e", "a", "st"], ["y"], name="sl")],
                                   [vi("x", [4])], [vi("y", None)],
                                   [const(n, v, np.int64) for n, v in
                                    [("b", [0]), ("e", [4]), ("a", [0]), ("st", [0])]]), \
        "node sl (Slice): slice step must not be 0"
    yield "softmax_axis_out_of_range", model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=4)],
                                             [vi("x", [2, 3])], [vi("y", None)]), \
        "node sm (Softmax): softmax (node sm): axis 4 out of range for rank 2"
    yield "unsqueeze_axis_out_of_range", model([helper.make_node("Unsqueeze", ["x", "ax"], ["y"], name="us")],
                                               [vi("x", [2])], [vi("y", None)], [const("ax", [9], np.int64)]), \
        "node us (Unsqueeze): axis 9 out of range"
    yield "pad_wrong_count", model([helper.make_node("Pad", ["x", "p"], ["y"], name="pad")],
                                   [vi("x", [2, 3])], [vi("y", None)], [const("p", [1, 1, 1], np.int64)]), \
        "node pad (Pad): pads has 3 values, rank 2 needs 4"
    yield "range_delta_zero", model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                                    [vi("y", None)], [const("s", 0, np.int64), const("l", 5, np.int64),
                                                      const("d", 0, np.int64)]), \
        "node rg (Range): delta must not be 0"
    yield "conv_weight_rank", model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
                                    [vi("x", [1, 3, 8, 8])], [vi("y", None)],
                                    [const("w", np.ones((4, 3), np.float32))]), \
        "node conv (Conv): the weight has rank 2, an input with 2 spatial axes needs 4"

    # regressions found by scripts/fuzz_onnx.py
    yield "conv1d_weight_rank4", model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
                                       [vi("x", [1, 3, 8])], [vi("y", None)],
                                       [const("w", np.ones((4, 3, 3, 3), np.float32))]), \
        "node conv (Conv): the weight has rank 4, an input with 1 spatial axes needs 3"
    yield "conv_strides_count", model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[1, 1, 1])],
                                      [vi("x", [1, 3, 8, 8])], [vi("y", None)],
                                      [const("w", np.ones((4, 3, 3, 3), np.float32))]), \
        "node conv (Conv): attribute strides has 3 values, 2 expected"
    yield "conv_strides_zero", model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[0, 1])],
                                     [vi("x", [1, 3, 8, 8])], [vi("y", None)],
                                     [const("w", np.ones((4, 3, 3, 3), np.float32))]), \
        "node conv (Conv): attribute strides [0, 1] must be at least 1"
    yield "clip_min_not_scalar", model([helper.make_node("Clip", ["x", "lo"], ["y"], name="clip")],
                                       [vi("x", [2])], [vi("y", [2])], [const("lo", [0.0, 1.0], np.float32)]), \
        "node clip (Clip): min must be a scalar, got shape (2,)"
    yield "split_num_outputs_mismatch", model([helper.make_node("Split", ["x"], ["a", "b"], name="split", axis=0,
                                                                num_outputs=1 << 40)],
                                              [vi("x", [4])], [vi("a", None)], opset=18), \
        "node split (Split): num_outputs is 1099511627776, the node has 2 outputs"
    yield "split_sizes_count", model([helper.make_node("Split", ["x", "s"], ["a", "b"], name="split", axis=0)],
                                     [vi("x", [4])], [vi("a", None)], [const("s", [1, 1, 2], np.int64)]), \
        "node split (Split): split gives 3 sizes for 2 outputs"
    yield "trilu_k_empty", model([helper.make_node("Trilu", ["x", "k"], ["y"], name="tri")],
                                 [vi("x", [3, 3])], [vi("y", None)], [const("k", np.zeros(0, np.int64))]), \
        "node tri (Trilu): input 1 (k) must hold one value, got shape (0,)"
    yield "trilu_k_float", model([helper.make_node("Trilu", ["x", "k"], ["y"], name="tri")],
                                 [vi("x", [3, 3])], [vi("y", None)], [const("k", np.float32(np.nan))]), \
        "node tri (Trilu): input 1 (k) must be an integer, got float32"
    yield "range_start_empty", model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                                     [vi("y", None)], [const("s", np.zeros(0, np.int64)), const("l", 5, np.int64),
                                                       const("d", 1, np.int64)]), \
        "node rg (Range): input 0 (start) must hold one value, got shape (0,)"
    yield "range_bool", model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                              [vi("y", None)], [const("s", False), const("l", True), const("d", True)]), \
        "node rg (Range): input 0 (start) must be a number, got bool"
    yield "reshape_rank_huge", model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                                     [vi("x", [2, 3]), vi("s", [1 << 31], TensorProto.INT64)], [vi("y", None)]), \
        "node rs (Reshape): the result would have rank 2147483648, more than 64"
    yield "input_rank_huge", model([relu()], [vi("x", [1] * 65)], [vi("y", None)]), \
        "input x: rank 65 is more than 64"
    yield "init_rank_huge", unary_model([typed_init("w", F, [1] * 70, [1.0])]), \
        "initializer w: rank 70 is more than 64"
    yield "reduce_axes_float", model([helper.make_node("ReduceSum", ["x", "ax"], ["y"], name="sum")],
                                     [vi("x", [2, 3])], [vi("y", None)], [const("ax", [np.nan], np.float32)]), \
        "node sum (ReduceSum): input 1 (axes) must hold integers, got float32"
    yield "dropout_training_not_scalar", model([helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")],
                                               [vi("x", [2])], [vi("y", None)],
                                               [const("r", 0.5, np.float32), const("t", [False, False])]), \
        "node drop (Dropout): training_mode must be a scalar, got shape (2,)"
    yield "pad_axes_pads_mismatch", model([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], name="pad")],
                                          [vi("x", [2, 3])], [vi("y", None)],
                                          [const("p", [1, 1, 1], np.int64), const("ax", [0, 1], np.int64)], opset=18), \
        "node pad (Pad): pads has 3 values, 2 axes need 4"
    yield "constant_of_shape_value_empty", model([helper.make_node(
        "ConstantOfShape", ["s"], ["y"], name="fill", value=helper.make_tensor("v", F, [0], []))],
        [], [vi("y", None)], [const("s", [2], np.int64)]), "node fill (ConstantOfShape): attribute value must hold one"
    yield "concat_scalars_of_shape", model([
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i"], ["d"], name="pick", axis=0),
        helper.make_node("Concat", ["d", "d"], ["y"], name="cat", axis=0)],
        [vi("x", ["n", 3])], [vi("y", None)], [const("i", 0, np.int64)]), \
        "node cat (Concat): concat (node cat): axis 0 out of range for rank 0"
    yield "shape_values_not_broadcastable", model([
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Equal", ["s", "e"], ["y"], name="eq")],
        [vi("x", ["n", 3, 4, 5])], [vi("y", None)], [const("e", np.zeros(0, np.int64))]), \
        "node eq (Equal): shapes (4,), (0,) cannot be broadcast together"
    yield "attr_unknown", model([helper.make_node("Relu", ["x"], ["y"], name="relu", alpha=0.5)], [vi("x", [2])],
                                [vi("y", [2])]), "node relu (Relu): Relu-14 has no attribute alpha"
    yield "shape_end_before_opset15", model([helper.make_node("Shape", ["x"], ["y"], name="shape", end=1)],
                                            [vi("x", [2, 3])], [vi("y", None)], opset=13), \
        "node shape (Shape): Shape-13 has no attribute end"
    yield "init_zero_and_huge_dims", unary_model([typed_init("w", F, [0, 1 << 40, 1 << 40], [])]), \
        "initializer w: dims [0, 1099511627776, 1099511627776] are too large"
    yield "attr_tensor_zero_and_huge_dims", model([helper.make_node(
        "Constant", [], ["y"], name="k", value=typed_init("v", F, [1 << 40, 0, 1 << 40], []))], [], [vi("y", None)]), \
        "node k (Constant): attribute value: dims [1099511627776, 0, 1099511627776] are too large"
    yield "input_dims_overflow", model([helper.make_node("Reshape", ["v", "s"], ["y"], name="rs")],
                                       [vi("v", [(1 << 63) - 1, 6, 24])], [vi("y", None)],
                                       [const("s", [2, 6, 3, -1], np.int64)]), \
        "input v: dims [9223372036854775807, 6, 24] are too large"
    yield "reshape_target_negative", model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                                           [vi("x", [2, 3])], [vi("y", None)], [const("s", [-2, -3], np.int64)]), \
        "node rs (Reshape): target dimension 0 is -2; only -1 (infer) may be negative"
    yield "resize_scales_inf", model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up", mode="nearest")],
                                     [vi("x", [1, 1, 4, 4])], [vi("y", None)],
                                     [const("sc", [np.inf, 1.0, 2.0, 2.0], np.float32)]), \
        "node up (Resize): scales must be finite and positive, got [inf, 1.0, 2.0, 2.0]"
    yield "resize_scale_overflow", model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up",
                                                           mode="linear")],
                                         [vi("x", [1, 1, 2, 2])], [vi("y", None)],
                                         [const("sc", [1.0, 1.0, 1.7e38, 2.0], np.float32)]), \
        "node up (Resize): scale 1.6999999760721821e+38 on axis 2 (size 2) gives an output size too large"
    yield "resize_empty_but_huge", model([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], name="up")],
                                         [], [vi("y", None)], [const("x", np.ones((1, 1, 4, 4), np.float32)),
                                                               const("sz", [0, 1, 2147483651, 1], np.int64)]), \
        "node up (Resize): the result of resize of shape (0, 1, 2147483651, 1) (float32) is empty, but its other dims"
    # names that are not UTF-8: written with a placeholder, then patched in the bytes
    yield "pad_mode_not_utf8", _patched(model([helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode="QQQQ")],
                                              [vi("x", [2])], [vi("y", None)], [const("p", [1, 1], np.int64)]),
                                        b"QQQQ", b"\xff\xfeQQ"), "node pad (Pad): attribute mode is not valid UTF-8"
    yield "op_type_not_utf8", _patched(model([helper.make_node("QQQQ", ["x"], ["y"], name="weird")], [vi("x", [2])],
                                             [vi("y", [2])]), b"QQQQ", b"\xff\xfeQQ"), \
        "node 0: the op_type b'\\xff\\xfeQQ' is not valid UTF-8"
    yield "dim_param_not_utf8", _patched(model([relu()], [vi("x", ["QQQQ", 2])], [vi("y", None)]),
                                         b"QQQQ", b"s\xff\xffQ"), \
        "graph input x dimension 0: the name b's\\xff\\xffQ' is not valid UTF-8"
    yield "input_name_not_utf8", _patched(model([relu("QQQQ")], [vi("QQQQ", [2])], [vi("y", [2])]),
                                          b"QQQQ", b"\x80QQQ"), \
        "graph input 0: the name b'\\x80QQQ' is not valid UTF-8"

    # constants too large to make (max_constant_bytes)
    yield "constant_of_shape_1e12", model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
                                          [vi("y", None)], [const("s", [1000000, 1000000], np.int64)]), \
        "node fill (ConstantOfShape): the result of full of shape (1000000, 1000000) (float32) would take " \
        "4000000000000 bytes, more than max_constant_bytes"
    yield "constant_of_shape_negative", model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")],
                                              [], [vi("y", None)], [const("s", [3, -2], np.int64)]), \
        "node fill (ConstantOfShape): the result of full would have a negative dimension -2"
    yield "expand_huge", model([helper.make_node("Expand", ["c", "s"], ["y"], name="grow")], [], [vi("y", None)],
                               [const("c", [1.0], np.float32), const("s", [1 << 20, 1 << 20, 16], np.int64)]), \
        "node grow (Expand): the result of broadcast_to of shape (1048576, 1048576, 16)"
    yield "tile_huge", model([helper.make_node("Tile", ["c", "r"], ["y"], name="tile")], [], [vi("y", None)],
                             [const("c", [[1.0]], np.float32), const("r", [1 << 30, 1 << 30], np.int64)]), \
        "node tile (Tile): the result of tile"
    yield "range_huge", model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [], [vi("y", None)],
                              [const("s", 0, np.int64), const("l", 1 << 50, np.int64), const("d", 1, np.int64)]), \
        "node rg (Range): the Range of shape (1125899906842624) (int64) would take"
    yield "range_float_huge", model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                                    [vi("y", None)], [const("s", 0.0, np.float32), const("l", 1e30, np.float32),
                                                      const("d", 1.0, np.float32)]), \
        "node rg (Range): the Range of shape"
    yield "range_mixed_types", model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                                     [vi("y", None)], [const("s", 0, np.int64), const("l", np.inf, np.float32),
                                                       const("d", 1, np.int64)]), \
        "node rg (Range): start, limit and delta must have one type, got int64, float32, int64"
    yield "range_float_nan", model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                                   [vi("y", None)], [const("s", 0.0, np.float32), const("l", np.nan, np.float32),
                                                     const("d", 1.0, np.float32)]), \
        "node rg (Range): start, limit and delta must be finite"
    yield "shape_of_huge_then_fill", model([
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Mul", ["s", "k"], ["s2"], name="scale"),
        helper.make_node("ConstantOfShape", ["s2"], ["y"], name="fill")],
        [vi("x", [4, 4])], [vi("y", None)], [const("k", [1 << 20, 1 << 20], np.int64)]), \
        "node fill (ConstantOfShape): the result of full of shape (4194304, 4194304)"


def main(argv=None) -> int:
    out = Path((argv or sys.argv[1:] or [ROOT / "tests" / "frontend" / "malformed"])[0])
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.onnx"):
        old.unlink()
    expected = {}
    for name, m, fragment in cases(out):
        if name == "attr_twice":
            m.graph.node[0].attribute.add().CopyFrom(helper.make_attribute("axis", 0))
            fragment = "node cat (Concat): attribute axis is given twice"
        data = m if isinstance(m, bytes) else m.SerializeToString()
        (out / f"{name}.onnx").write_bytes(data)
        expected[f"{name}.onnx"] = fragment
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(expected)} models to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
