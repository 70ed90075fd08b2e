"""The LLM operators: Attention, RMSNormalization, RotaryEmbedding, SwiGLU,
CausalConvWithState and LinearAttention. The ONNX backend node cases that use
them; one-node models over symbolic sequence dims (`s` the new tokens, `p`
the cached ones) and a symbolic batch `b`, imported and interpreted at several sizes and compiled on
the host with the C and LLVM backends, against ONNX Runtime (onnx.reference
where ONNX Runtime lacks the operator); bad attributes refused with the node
named; one row compiled for qemu-aarch64."""

import zlib
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import relax_edge as rxe
from relax_edge.deploy.session import RuntimeCheckError
from relax_edge.frontend.onnx import node_tests
from relax_edge.frontend.onnx.context import ONNX_DTYPES, OnnxImportError
from tests.frontend.one_node import assert_matches, compiled

OPS = frozenset({"Attention", "RMSNormalization", "RotaryEmbedding", "SwiGLU", "CausalConvWithState",
                 "LinearAttention"})
# ONNX Runtime fails it as well: its stored outputs are the float16 reference's rounding, one float16
# step (2^-11) away from ONNX Runtime's and ours on one element (the `near_miss` test checks our distance)
NEAR_MISS = {"test_attention_4d_causal_fp16"}


def _supported(case) -> bool:
    """bfloat16 cases left out: the runner compares bfloat16 exactly, and attention rounds each
    operator's result to it (test_onnx_node_cases.py lists them as known disagreements)."""
    graph = case.model.graph
    types = [v.type.tensor_type.elem_type for v in list(graph.input) + list(graph.output) if v.name]
    return node_tests.case_ops(case) <= OPS and all(t in ONNX_DTYPES and t != TensorProto.BFLOAT16 for t in types)


NODE_CASES = [c for c in node_tests.collect_cases() if _supported(c) and c.name not in NEAR_MISS]


def test_every_operator_has_node_cases():
    ops = set().union(*(node_tests.case_ops(c) for c in NODE_CASES))
    assert ops == OPS
    assert len([c for c in NODE_CASES if "Attention" in node_tests.case_ops(c)]) >= 80


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


def test_near_miss_node_case_is_one_float16_step_off():
    (case,) = [c for c in node_tests.collect_cases() if c.name in NEAR_MISS]
    inputs, outputs = case.data_sets[0]
    got = rxe.interpret(rxe.from_onnx(case.model), *[np.asarray(x) for x in inputs])
    want = np.asarray(outputs[0]).astype(np.float32)
    assert node_tests.run_case(case).status == "fail"  # passing now: move it back to NODE_CASES
    np.testing.assert_allclose(np.asarray(got).astype(np.float32), want, rtol=0, atol=2.0 ** -11)


# ------------------------------------------------ one-node models over symbolic sequence dims

_TYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "int64": TensorProto.INT64,
          "bool": TensorProto.BOOL}
SIZES = [{"s": 1, "p": 2, "b": 2}, {"s": 3, "p": 1, "b": 1}, {"s": 6, "p": 4, "b": 3}]


@dataclass
class Case:
    name: str
    op_type: str
    inputs: list                  # (name, dtype, shape): "" leaves an optional input out; dims may be
                                  # "s", "p", "t" (= s + p) or expressions of them, as strings
    outputs: list
    attrs: dict = field(default_factory=dict)
    opset: int = 23
    ort: bool = True              # False: onnx.reference gives the expected values
    tol: float = 2e-5
    sizes: list = field(default_factory=lambda: SIZES)


def _dim(d, sizes):
    return d if isinstance(d, int) else int(eval(d, {}, {**sizes, "t": sizes["s"] + sizes["p"]}))  # noqa: S307


def _model(case: Case):
    inputs = [helper.make_tensor_value_info(n, _TYPES[t], [d if isinstance(d, int) else d.replace(" ", "")
                                                           for d in shape])
              for n, t, shape in case.inputs if n]
    node = helper.make_node(case.op_type, [n for n, _, _ in case.inputs], case.outputs, name="node", **case.attrs)
    graph = helper.make_graph([node], case.name, inputs,
                              [helper.make_empty_tensor_value_info(o) for o in case.outputs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 10
    return model


def _arrays(case: Case, sizes: dict, seed: int = 0):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + seed)
    out = []
    for name, dtype, shape in case.inputs:
        if not name:
            continue
        shape = tuple(_dim(d, sizes) for d in shape)
        if name == "position_ids":
            out.append(rng.integers(0, 16, shape).astype(np.int64))
        elif name == "nonpad_kv_seqlen":
            out.append(rng.integers(1, 9, shape).astype(np.int64))  # the nonpad case's cache holds 8 keys
        elif dtype == "bool":
            out.append(rng.random(shape) > 0.3)
        elif name == "decay":
            out.append(-rng.random(shape).astype(dtype))
        elif name == "beta":
            out.append(rng.random(shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def _expected(case: Case, model, arrays):
    names = [n for n, _, _ in case.inputs if n]
    if case.ort:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, dict(zip(names, arrays)))
    return ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))


def _attention(name, inputs, attrs=None, outputs=("Y",), opset=23, **kw):
    return Case(name, "Attention", inputs, list(outputs), attrs or {}, opset, **kw)


Q4, K4, V4 = ("Q", "float32", ["b", 4, "s", 8]), ("K", "float32", ["b", 2, "s", 8]), ("V", "float32", ["b", 2, "s", 6])
CASES = [
    _attention("attn_4d_gqa_causal", [Q4, K4, V4], {"is_causal": 1}),
    _attention("attn_4d_cross_scaled", [Q4, ("K", "float32", ["b", 4, "p", 8]), ("V", "float32", ["b", 4, "p", 8])],
               {"scale": 0.3}),
    _attention("attn_4d_past_causal", [Q4, K4, V4, ("", "", []), ("past_key", "float32", ["b", 2, "p", 8]),
                                       ("past_value", "float32", ["b", 2, "p", 6])],
               {"is_causal": 1}, ("Y", "present_key", "present_value"), opset=24),
    _attention("attn_3d_past_float_mask", [("Q", "float32", [1, "s", 24]), ("K", "float32", [1, "s", 12]),
                                           ("V", "float32", [1, "s", 12]), ("attn_mask", "float32", ["s", "t"]),
                                           ("past_key", "float32", [1, 2, "p", 6]),
                                           ("past_value", "float32", [1, 2, "p", 6])],
               {"q_num_heads": 4, "kv_num_heads": 2}, ("Y", "present_key", "present_value")),
    _attention("attn_4d_bool_mask_causal_softcap_qk", [Q4, K4, V4, ("attn_mask", "bool", ["b", 1, "s", "s"])],
               {"is_causal": 1, "softcap": 2.5, "qk_matmul_output_mode": 1}, ("Y", "", "", "qk")),
    _attention("attn_4d_short_bool_mask_qk_bias", [Q4, K4, V4, ("attn_mask", "bool", ["s", 1])],
               {"qk_matmul_output_mode": 2}, ("Y", "", "", "qk"), ort=False),  # ONNX Runtime pads no short mask
    _attention("attn_4d_causal_qk_softmax", [Q4, K4, V4], {"is_causal": 1, "qk_matmul_output_mode": 3},
               ("Y", "", "", "qk")),
    _attention("attn_4d_nonpad_causal", [("Q", "float32", [2, 4, "s", 8]), ("K", "float32", [2, 2, 8, 8]),
                                         ("V", "float32", [2, 2, 8, 8]), ("", "", []), ("", "", []), ("", "", []),
                                         ("nonpad_kv_seqlen", "int64", [2])], {"is_causal": 1}, opset=24),
    _attention("attn_4d_fp16_softmax_fp32", [("Q", "float16", [1, 2, "s", 8]), ("K", "float16", [1, 2, "s", 8]),
                                             ("V", "float16", [1, 2, "s", 8])],
               {"is_causal": 1, "softmax_precision": 1}, tol=3e-3),
    _attention("attn_4d_window", [Q4, K4, V4], {"left_window_size": 1, "right_window_size": 0}, opset=25),
    # mode 0 is the raw product, softcap or not (as the spec and ONNX Runtime; onnx.reference gives it capped)
    _attention("attn_4d_softcap_qk_raw", [Q4, K4, V4], {"softcap": 2.0}, ("Y", "", "", "qk")),
    _attention("attn_4d_window_past", [Q4, K4, V4, ("", "", []), ("past_key", "float32", ["b", 2, "p", 8]),
                                       ("past_value", "float32", ["b", 2, "p", 6])],
               {"left_window_size": 2, "is_causal": 1}, ("Y", "present_key", "present_value"), opset=25),
    _attention("attn_4d_nonpad_head_mask_window", [("Q", "float32", [2, 4, "s", 8]), ("K", "float32", [2, 2, 8, 8]),
                                                   ("V", "float32", [2, 2, 8, 8]),
                                                   ("attn_mask", "float32", [4, "s", 8]), ("", "", []), ("", "", []),
                                                   ("nonpad_kv_seqlen", "int64", [2])],
               {"left_window_size": 3, "right_window_size": 1}, opset=25),
    Case("rms_last_axis", "RMSNormalization", [("X", "float32", ["b", "s", 16]), ("scale", "float32", [16])], ["Y"]),
    Case("rms_axis1_eps", "RMSNormalization", [("X", "float32", ["s", 3, 8]), ("scale", "float32", [3, 8])],
         ["Y"], {"axis": 1, "epsilon": 0.1}),
    Case("rms_fp16", "RMSNormalization", [("X", "float16", [2, "s", 16]), ("scale", "float16", [16])], ["Y"],
         tol=3e-3),
    Case("rope_4d", "RotaryEmbedding", [("X", "float32", [1, 2, "s", 8]), ("cos_cache", "float32", [16, 4]),
                                        ("sin_cache", "float32", [16, 4]), ("position_ids", "int64", [1, "s"])],
         ["Y"]),
    Case("rope_3d_interleaved_partial", "RotaryEmbedding",
         [("X", "float32", ["b", "s", 16]), ("cos_cache", "float32", [16, 2]), ("sin_cache", "float32", [16, 2]),
          ("position_ids", "int64", ["b", "s"])], ["Y"], {"num_heads": 2, "interleaved": 1, "rotary_embedding_dim": 4}),
    Case("rope_no_position_ids", "RotaryEmbedding",
         [("X", "float32", [2, 3, "s", 8]), ("cos_cache", "float32", [2, "s", 4]),
          ("sin_cache", "float32", [2, "s", 4])], ["Y"], {"interleaved": 1}),
    Case("causal_conv_past_silu", "CausalConvWithState",
         [("input", "float32", ["b", 4, "s"]), ("weight", "float32", [4, 1, 3]), ("bias", "float32", [4]),
          ("past_state", "float32", ["b", 4, 2])], ["output", "present_state"], {"activation": "silu"}, opset=27),
    Case("causal_conv_no_state", "CausalConvWithState",
         [("input", "float32", [1, 3, "s"]), ("weight", "float32", [3, 1, 4])], ["output", "present_state"],
         opset=27),
    Case("linear_attention_linear_gqa", "LinearAttention",
         [("query", "float32", ["b", "s", 16]), ("key", "float32", ["b", "s", 8]), ("value", "float32", ["b", "s", 6]),
          ("past_state", "float32", ["b", 2, 4, 3])], ["output", "present_state"],
         {"update_rule": "linear", "q_num_heads": 4, "kv_num_heads": 2}, opset=27),
    Case("linear_attention_gated_gqa_past", "LinearAttention",
         [("query", "float32", ["b", "s", 16]), ("key", "float32", ["b", "s", 8]), ("value", "float32", ["b", "s", 6]),
          ("past_state", "float32", ["b", 2, 4, 3]), ("decay", "float32", ["b", "s", 8])],
         ["output", "present_state"], {"update_rule": "gated", "q_num_heads": 4, "kv_num_heads": 2}, opset=27),
    Case("linear_attention_gated_per_head", "LinearAttention",
         [("query", "float32", [1, "s", 8]), ("key", "float32", [1, "s", 8]), ("value", "float32", [1, "s", 8]),
          ("", "", []), ("decay", "float32", [1, "s", 2])],
         ["output", "present_state"], {"update_rule": "gated", "q_num_heads": 2, "kv_num_heads": 2, "scale": 0.5},
         opset=27),
    Case("linear_attention_gated_delta", "LinearAttention",
         [("query", "float32", [1, 3, 16]), ("key", "float32", [1, 3, 16]), ("value", "float32", [1, 3, 8]),
          ("", "", []), ("decay", "float32", [1, 3, 2]), ("beta", "float32", [1, 3, 2])],
         ["output", "present_state"], {"q_num_heads": 2, "kv_num_heads": 2}, opset=27, sizes=SIZES[:1]),
    Case("swiglu", "SwiGLU", [("A", "float32", ["s", 8]), ("B", "float32", ["s", 8])], ["Y"], {"alpha": 1.5},
         opset=28, ort=False),
]
BY_NAME = {c.name: c for c in CASES}


def _check(case, actual, expected):
    actual = list(actual) if isinstance(actual, (list, tuple)) else [actual]
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_matches(np.asarray(a), e, tol=case.tol, float16_tol=case.tol)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted_matches_reference(case):
    model = _model(case)
    mod = rxe.from_onnx(model)
    for sizes in case.sizes:
        arrays = _arrays(case, sizes)
        _check(case, rxe.interpret(mod, *arrays), _expected(case, model, arrays))


# every operator with both backends (the backends have no float16 kernels: float16 is interpreted only)
COMPILED = [("attn_4d_gqa_causal", "c"), ("attn_4d_gqa_causal", "llvm"), ("attn_3d_past_float_mask", "c"),
            ("attn_3d_past_float_mask", "llvm"), ("attn_4d_bool_mask_causal_softcap_qk", "llvm"),
            ("attn_4d_nonpad_causal", "c"), ("rms_axis1_eps", "c"), ("rms_axis1_eps", "llvm"),
            ("rope_3d_interleaved_partial", "c"), ("rope_4d", "llvm"), ("causal_conv_past_silu", "c"),
            ("causal_conv_past_silu", "llvm"), ("linear_attention_linear_gqa", "llvm"),
            ("linear_attention_gated_gqa_past", "c"),
            ("linear_attention_gated_delta", "c")]


@pytest.mark.parametrize("name,backend", COMPILED, ids=[f"{n}-{b}" for n, b in COMPILED])
def test_compiled_matches_reference(name, backend, tmp_path):
    case = BY_NAME[name]
    model = _model(case)
    with compiled(model, backend, tmp_path) as loaded:
        for sizes in case.sizes:
            arrays = _arrays(case, sizes)
            _check(case, loaded.run(*arrays), _expected(case, model, arrays))


@pytest.mark.slow
@pytest.mark.emu
def test_llm_operators_on_qemu_aarch64(tmp_path):
    """An Attention, an RMSNormalization and a RotaryEmbedding model cross-compiled for
    qemu-aarch64 and run under qemu-user at two sequence lengths."""
    with rxe.connect("qemu-aarch64") as dev:
        for name in ("attn_3d_past_float_mask", "rms_last_axis", "rope_3d_interleaved_partial"):
            case = BY_NAME[name]
            model = _model(case)
            art = rxe.build(rxe.from_onnx(model), board="qemu-aarch64", backend="c", out_dir=tmp_path / name,
                            name="m", profile=False)
            loaded = dev.load(art)
            for sizes in SIZES[1:]:
                arrays = _arrays(case, sizes)
                _check(case, loaded.run(*arrays), _expected(case, model, arrays))


# ------------------------------------------------------------------------ bad input

def _bad(op_type, inputs, attrs, opset=23, outputs=("Y",)):
    return _model(Case("bad", op_type, inputs, list(outputs), attrs, opset))


Q3, K3, V3 = ("Q", "float32", [1, "s", 24]), ("K", "float32", [1, "s", 12]), ("V", "float32", [1, "s", 12])
X4 = ("X", "float32", [1, 2, "s", 8])
ROPE = [X4, ("cos_cache", "float32", [16, 4]), ("sin_cache", "float32", [16, 4]), ("position_ids", "int64", [1, "s"])]
CONV = [("input", "float32", [1, 4, "s"]), ("weight", "float32", [4, 1, 3])]
LIN = [("query", "float32", [1, "s", 8]), ("key", "float32", [1, "s", 8]), ("value", "float32", [1, "s", 8])]


@pytest.mark.parametrize("model,message", [
    (_bad("Attention", [Q3, K3, V3], {}), r"3-D inputs need the q_num_heads and kv_num_heads"),
    (_bad("Attention", [Q3, K3, V3], {"q_num_heads": 5, "kv_num_heads": 2}),
     r"Q hidden size 24 does not split into 5 heads"),
    (_bad("Attention", [("Q", "float32", [1, 3, "s", 8]), K4, ("V", "float32", [2, 2, "s", 8])], {}),
     r"3 query heads are not a multiple of 2 key/value heads"),
    (_bad("Attention", [Q4, K4, V4], {"q_num_heads": 2}, 25), r"q_num_heads=2 does not match the 4-D input's 4"),
    (_bad("Attention", [Q4, K4, V4], {"softmax_precision": 12}), r"softmax_precision=12 .* is not supported"),
    (_bad("Attention", [Q4, K4, V4], {"qk_matmul_output_mode": 4}), r"qk_matmul_output_mode=4 is not supported"),
    (_bad("Attention", [Q4, K4, V4], {"softcap": -1.0}), r"softcap=-1.0 must be nonnegative"),
    (_bad("Attention", [Q4, K4, V4], {"left_window_size": -2}, 25), r"left_window_size=-2 must be -1 or"),
    (_bad("Attention", [Q4, K4, V4, ("", "", []), ("past_key", "float32", [2, 2, "p", 8])], {}),
     r"past_key and past_value must be given together"),
    (_bad("Attention", [Q4, ("K", "float32", [2, 2, 4, 8]), ("V", "float32", [2, 2, 4, 8]),
                        ("attn_mask", "float32", ["s", 9])], {}),
     r"attn_mask has 9 key positions, more than the 4 keys"),
    (_bad("Attention", [Q3, K3, ("V", "float32", [1, "s", 12, 1])], {}), r"all be 3-D or all 4-D"),
    (_bad("Attention", [("Q", "int64", [2, 4, "s", 8]), ("K", "int64", [2, 2, "s", 8]),
                        ("V", "int64", [2, 2, "s", 8])], {}), r"Q of dtype int64 is not supported"),
    (_bad("RMSNormalization", [("X", "float32", [2, "s"]), ("scale", "float32", ["s"])], {"axis": 2}),
     r"axis=2 is out of range for rank 2"),
    (_bad("RMSNormalization", [("X", "float32", [2, 8]), ("scale", "float32", [8])], {"stash_type": 7}),
     r"stash_type=7 .* is not supported"),
    (_bad("RotaryEmbedding", ROPE, {"rotary_embedding_dim": 3}), r"rotary_embedding_dim=3 must be even"),
    (_bad("RotaryEmbedding", ROPE, {"rotary_embedding_dim": 4}), r"cos_cache has 4 features, rotary_embedding_dim"),
    (_bad("RotaryEmbedding", [("X", "float32", [1, "s", 16])] + ROPE[1:], {}), r"3-D input needs a positive num_heads"),
    (_bad("RotaryEmbedding", [("X", "float32", [1, "s", 16])] + ROPE[1:], {"num_heads": 3}),
     r"hidden size 16 does not split into num_heads=3"),
    (_bad("RotaryEmbedding", [("X", "float32", [1, 2, "s", "d"])] + ROPE[1:], {}), r"the head size \(d\) must be"),
    (_bad("CausalConvWithState", CONV, {"activation": "relu"}, 27, ("output", "present_state")),
     r"activation='relu' is not supported"),
    (_bad("CausalConvWithState", CONV + [("", "", []), ("past_state", "float32", [1, 4, 3])], {}, 27,
          ("output", "present_state")), r"past_state must be \(B, C, 2\)"),
    (_bad("LinearAttention", LIN, {"update_rule": "slow", "q_num_heads": 2, "kv_num_heads": 2}, 27,
          ("output", "present_state")), r"update_rule='slow' is not supported"),
    (_bad("LinearAttention", LIN, {"update_rule": "gated", "q_num_heads": 2, "kv_num_heads": 2}, 27,
          ("output", "present_state")), r"update_rule 'gated' needs the decay input"),
    (_bad("LinearAttention", LIN, {"update_rule": "linear", "q_num_heads": 3, "kv_num_heads": 2}, 27,
          ("output", "present_state")), r"q_num_heads=3 must be a positive multiple of kv_num_heads=2"),
    (_bad("LinearAttention", LIN + [("", "", []), ("", "", []), ("beta", "float32", [1, "s", 2])],
          {"update_rule": "delta", "q_num_heads": 2, "kv_num_heads": 2}, 27, ("output", "present_state")),
     r"update_rule 'delta' over a symbolic sequence length \(s\) is not supported"),
    (_bad("SwiGLU", [("A", "float32", [2, 4]), ("B", "float32", [2, 5])], {}, 28), r"must have one shape and dtype"),
])
def test_bad_input_is_refused(model, message):
    with pytest.raises(OnnxImportError, match=r"node node \(\w+\): .*" + message):
        rxe.from_onnx(model)


def test_mask_of_a_symbolic_length(tmp_path):
    """A float mask of (s, t) beside p cached and s new keys: shorter than p + s it is padded
    with -inf (as onnx.reference; ONNX Runtime refuses it), longer it fails the run-time check."""
    case = BY_NAME["attn_3d_past_float_mask"]
    model = _model(case)
    arrays = _arrays(case, {"s": 2, "p": 3})
    short = arrays[:3] + [arrays[3][:, :4]] + arrays[4:]
    want = ReferenceEvaluator(model).run(None, dict(zip(["Q", "K", "V", "attn_mask", "past_key", "past_value"],
                                                        short)))
    long = arrays[:3] + [np.zeros((2, 6), np.float32)] + arrays[4:]  # 6 key positions for 5 keys
    mod = rxe.from_onnx(model)
    _check(case, rxe.interpret(mod, *short), want)
    with pytest.raises(rxe.RelaxEdgeError, match=r"broadcast"):
        rxe.interpret(mod, *long)
    with compiled(model, "c", tmp_path) as loaded:
        _check(case, loaded.run(*short), want)
        with pytest.raises(RuntimeCheckError):
            loaded.run(*long)


def _decoder_block():
    """RMSNorm, the Q/K/V projections, rotary positions on Q and K, causal GQA attention over
    a past cache and the output projection: one decoder layer's attention half."""
    rng = np.random.default_rng(7)

    def weight(name, *shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, rng.standard_normal(shape).astype(np.float32) * 0.3)
    angles = np.arange(64)[:, None] / 10000 ** (np.arange(4)[None, :] / 4)
    inits = [weight("norm", 32), weight("wq", 32, 32), weight("wk", 32, 16), weight("wv", 32, 16),
             weight("wo", 32, 32),
             helper.make_tensor("cos", TensorProto.FLOAT, (64, 4), np.cos(angles).astype(np.float32)),
             helper.make_tensor("sin", TensorProto.FLOAT, (64, 4), np.sin(angles).astype(np.float32))]
    nodes = [helper.make_node("RMSNormalization", ["x", "norm"], ["h"]),
             helper.make_node("MatMul", ["h", "wq"], ["q"]), helper.make_node("MatMul", ["h", "wk"], ["k"]),
             helper.make_node("MatMul", ["h", "wv"], ["v"]),
             helper.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], num_heads=4),
             helper.make_node("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["kr"], num_heads=2),
             helper.make_node("Attention", ["qr", "kr", "v", "", "past_key", "past_value"],
                              ["y", "present_key", "present_value"], q_num_heads=4, kv_num_heads=2, is_causal=1),
             helper.make_node("MatMul", ["y", "wo"], ["out"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "s", 32]),
              helper.make_tensor_value_info("pos", TensorProto.INT64, [1, "s"]),
              helper.make_tensor_value_info("past_key", TensorProto.FLOAT, [1, 2, "p", 8]),
              helper.make_tensor_value_info("past_value", TensorProto.FLOAT, [1, 2, "p", 8])]
    outputs = [helper.make_empty_tensor_value_info(n) for n in ("out", "present_key", "present_value")]
    model = helper.make_model(helper.make_graph(nodes, "decoder_block", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    return model


def test_decoder_block_compiled(tmp_path):
    """The layers composed over symbolic new and cached lengths, compiled (C) against ONNX Runtime."""
    model = _decoder_block()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    with compiled(model, "c", tmp_path) as loaded:
        for s, p in ((1, 5), (4, 2), (7, 9)):
            feeds = {"x": rng.standard_normal((1, s, 32)).astype(np.float32),
                     "pos": (p + np.arange(s, dtype=np.int64))[None],
                     "past_key": rng.standard_normal((1, 2, p, 8)).astype(np.float32),
                     "past_value": rng.standard_normal((1, 2, p, 8)).astype(np.float32)}
            for ours, want in zip(loaded.run(*feeds.values()), session.run(None, feeds), strict=True):
                np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-5)
