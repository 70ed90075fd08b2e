"""ONNX Runtime's LLM contrib operators (convert/contrib_llm.py), one node at a time against ONNX Runtime.

MatMulNBits (bits 4 and 8, block sizes 16 to 256, zero points none / packed
uint8 / float, bias, a symbolic row count; accuracy_level 4 with and without
int8 activations), GatherBlockQuantized, SimplifiedLayerNormalization,
SkipSimplifiedLayerNormalization, com.microsoft RotaryEmbedding and
GroupQueryAttention (separate and packed QKV, rotary inside, past lengths,
GQA and MQA, a local window, softcap), interpreted; MatMulNBits and
GroupQueryAttention also compiled on the host. What is refused is refused by
name.
"""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import OnnxImportError
from relax_edge.frontend.onnx.genai import import_model
from relax_edge.ir.expr import Call

MS = "com.microsoft"
F, I64, I32, U8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.UINT8


def model(op, inputs, outputs, inits=(), node_inputs=None, domain=MS, **attrs):
    """One `op` node; `inputs` (name, type, shape) graph inputs, `inits` numpy initializers by name."""
    init_protos = [numpy_helper.from_array(a, n) for n, a in dict(inits).items()]
    names = node_inputs if node_inputs is not None else [n for n, _, _ in inputs] + list(dict(inits))
    node = helper.make_node(op, names, list(outputs), name=f"{op}_node", domain=domain, **attrs)
    graph = helper.make_graph([node], "contrib", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_empty_tensor_value_info(o) for o in outputs if o], init_protos)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    m.ir_version = 10
    return m


def ort_run(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def interpreted(m, feeds, **kw):
    mod = import_model(m, **kw)
    out = rxe.interpret(mod, *feeds.values())
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def assert_close(got, want, tol=2e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


# ------------------------------------------------------------------ MatMulNBits

def nbits_weights(rng, k, n, bits, block, zp):
    blocks = -(-k // block)
    qweight = rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    scales = (rng.random((n * blocks,), dtype=np.float32) * 0.1 + 0.01).astype(np.float32)
    inits = {"B": qweight, "scales": scales}
    if zp == "uint8":
        inits["zp"] = rng.integers(0, 256, (n * (-(-blocks * bits // 8)),), dtype=np.uint8)
    elif zp == "float":
        inits["zp"] = (rng.random((n * blocks,), dtype=np.float32) * 2 ** bits).astype(np.float32)
    return inits


def matmul_nbits_model(k, n, bits, block, zp="none", bias=False, level=0, rank=2, seed=0):
    rng = np.random.default_rng(seed)
    inits = nbits_weights(rng, k, n, bits, block, zp)
    names = ["A", "B", "scales", "zp" if zp != "none" else ""]
    if bias:
        inits["bias"] = rng.standard_normal(n).astype(np.float32)
        names += ["", "bias"]
    shape = ["m", k] if rank == 2 else [2, "m", k]
    return model("MatMulNBits", [("A", F, shape)], ["Y"], inits, node_inputs=names, K=k, N=n, bits=bits,
                 block_size=block, accuracy_level=level)


MATMUL_CASES = [  # K, N, bits, block, zero points, bias
    (64, 24, 4, 32, "none", False), (48, 16, 4, 16, "uint8", True), (100, 8, 4, 64, "uint8", False),
    (256, 12, 4, 128, "float", False), (300, 5, 4, 256, "none", True), (64, 16, 8, 32, "none", False),
    (80, 9, 8, 16, "uint8", True), (128, 8, 8, 64, "uint8", False),
]


@pytest.mark.parametrize("k, n, bits, block, zp, bias", MATMUL_CASES)
def test_matmul_nbits_equals_onnxruntime(k, n, bits, block, zp, bias):
    m = matmul_nbits_model(k, n, bits, block, zp, bias, rank=3 if bits == 8 else 2)
    rng = np.random.default_rng(1)
    for rows in (1, 5):
        a = rng.standard_normal((2, rows, k) if bits == 8 else (rows, k), dtype=np.float32)
        assert_close(interpreted(m, {"A": a}), ort_run(m, {"A": a}))


@pytest.mark.parametrize("zp", ["none", "uint8"])
def test_matmul_nbits_accuracy_level_4(zp):
    """Level 4 computes with float32 activations by default (as level 0 does); with int8_activations with
    ONNX Runtime's int8 activations per block."""
    level4, level0 = (matmul_nbits_model(96, 16, 4, 32, zp, level=lv) for lv in (4, 0))
    a = np.random.default_rng(2).standard_normal((3, 96), dtype=np.float32)
    assert_close(interpreted(level4, {"A": a}), ort_run(level0, {"A": a}))
    assert_close(interpreted(level4, {"A": a}, int8_activations=True), ort_run(level4, {"A": a}))
    assert not np.allclose(ort_run(level4, {"A": a})[0], ort_run(level0, {"A": a})[0], rtol=0, atol=1e-6)


def test_matmul_nbits_imports_as_one_call_with_default_zero():
    m = matmul_nbits_model(64, 8, 4, 32, "none")
    calls = [b.value for blk in import_model(m)["main"].body.blocks for b in blk.bindings
             if isinstance(b.value, Call)]
    assert [c.op.name for c in calls] == ["matmul_nbits"]
    assert calls[0].attrs["zero"] == "default" and calls[0].attrs["act"] == "f32"


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_matmul_nbits_compiled(backend, tmp_path):
    m = matmul_nbits_model(80, 9, 4, 16, "uint8", bias=True)
    art = rxe.build(import_model(m), board="host", backend=backend, out_dir=tmp_path, name="m", quiet=True,
                    profile=False)
    rng = np.random.default_rng(3)
    with rxe.connect("host") as dev, dev.load(art) as loaded:
        for rows in (1, 7):
            a = rng.standard_normal((rows, 80), dtype=np.float32)
            out = loaded.run(a)
            assert_close([np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])],
                         ort_run(m, {"A": a}))


def test_matmul_nbits_refusals():
    rng = np.random.default_rng(0)
    bad_gidx = matmul_nbits_model(64, 8, 4, 32)
    bad_gidx.graph.initializer.append(numpy_helper.from_array(rng.permutation(64).astype(np.int32) // 32, "g"))
    bad_gidx.graph.node[0].input[:] = ["A", "B", "scales", "", "g"]
    with pytest.raises(OnnxImportError, match=r"MatMulNBits.*g_idx.*trivial"):
        import_model(bad_gidx)
    two_bits = matmul_nbits_model(64, 8, 4, 32)
    next(a for a in two_bits.graph.node[0].attribute if a.name == "bits").i = 2
    with pytest.raises(OnnxImportError, match=r"bits=2 is not supported"):
        import_model(two_bits)
    runtime_weight = model("MatMulNBits", [("A", F, [2, 64]), ("B", U8, [8, 2, 16]), ("s", F, [16])], ["Y"],
                           K=64, N=8, bits=4, block_size=32)
    with pytest.raises(OnnxImportError, match=r"input 1 \(B.*must be known at compile time"):
        import_model(runtime_weight)


# ------------------------------------------------------------------ GatherBlockQuantized

@pytest.mark.parametrize("bits, block, zp, k", [(4, 32, False, 64), (4, 16, True, 48), (8, 64, False, 128),
                                                (8, 16, True, 32), (4, 128, False, 256)])
def test_gather_block_quantized_equals_onnxruntime(bits, block, zp, k):
    rng = np.random.default_rng(bits + block)
    rows, blocks = 11, k // block
    inits = {"data": rng.integers(0, 256, (rows, k * bits // 8), dtype=np.uint8),
             "scales": (rng.random((rows, blocks), dtype=np.float32) + 0.1).astype(np.float32)}
    names = ["data", "ids", "scales"]
    if zp:
        inits["zp"] = rng.integers(0, 256, (rows, -(-blocks * bits // 8)), dtype=np.uint8)
        names.append("zp")
    m = model("GatherBlockQuantized", [("ids", I64, ["a", 3])], ["y"], inits, node_inputs=names, bits=bits,
              block_size=block, gather_axis=0, quantize_axis=1)
    for n in (1, 4):
        ids = rng.integers(-rows, rows, (n, 3)).astype(np.int64)
        ids[ids < 0] += rows   # ONNX Runtime's kernel takes nonnegative indices
        assert_close(interpreted(m, {"ids": ids}), ort_run(m, {"ids": ids}), tol=0)


def test_gather_block_quantized_refusals():
    data = np.zeros((4, 8, 16), np.uint8)
    m = model("GatherBlockQuantized", [("ids", I64, [2])], ["y"],
              {"data": data, "scales": np.ones((4, 8, 1), np.float32)}, node_inputs=["data", "ids", "scales"],
              block_size=16, gather_axis=0, quantize_axis=2)
    with pytest.raises(OnnxImportError, match=r"GatherBlockQuantized.*only 2-D uint8 data"):
        import_model(m)


# ------------------------------------------------------------------ RMSNorm forms

def test_simplified_layer_norm_equals_onnxruntime():
    rng = np.random.default_rng(0)
    m = model("SimplifiedLayerNormalization", [("x", F, [2, "s", 24])], ["y"],
              {"g": rng.standard_normal(24).astype(np.float32)}, domain="", epsilon=1e-6)
    for s in (1, 6):
        x = rng.standard_normal((2, s, 24), dtype=np.float32) * 3
        assert_close(interpreted(m, {"x": x}), ort_run(m, {"x": x}), tol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_skip_simplified_layer_norm_equals_onnxruntime(bias):
    rng = np.random.default_rng(1)
    inits = {"g": rng.standard_normal(32).astype(np.float32)}
    names = ["x", "skip", "g"]
    if bias:
        inits["b"] = rng.standard_normal(32).astype(np.float32)
        names.append("b")
    m = model("SkipSimplifiedLayerNormalization", [("x", F, [1, "s", 32]), ("skip", F, [1, "s", 32])],
              ["y", "", "", "sum"], inits, node_inputs=names, epsilon=1e-5)
    for s in (1, 5):
        feeds = {"x": rng.standard_normal((1, s, 32), dtype=np.float32),
                 "skip": rng.standard_normal((1, s, 32), dtype=np.float32)}
        assert_close(interpreted(m, feeds), ort_run(m, feeds), tol=1e-5)


# ------------------------------------------------------------------ RotaryEmbedding

def rope_caches(max_pos, half, seed=0):
    inv = 1.0 / 10000.0 ** (np.arange(half) / half)
    angles = np.arange(max_pos)[:, None] * inv[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@pytest.mark.parametrize("layout, interleaved, positions, rot", [
    ("3d", 0, "ids", 0), ("3d", 1, "ids", 0), ("4d", 0, "ids", 0), ("4d", 1, "offset", 0), ("3d", 0, "ids", 8),
    ("3d", 1, "offset", 8)])
def test_ms_rotary_embedding_equals_onnxruntime(layout, interleaved, positions, rot):
    heads, head = 2, 16
    cos, sin = rope_caches(32, (rot or head) // 2)
    shape = [1, "s", heads * head] if layout == "3d" else [1, heads, "s", head]
    pos_shape = [1, "s"] if positions == "ids" else [1]
    attrs = {"interleaved": interleaved}
    if rot or layout == "3d":
        attrs["num_heads"] = heads
    if rot:
        attrs["rotary_embedding_dim"] = rot
    m = model("RotaryEmbedding", [("x", F, shape), ("pos", I64, pos_shape)], ["y"], {"cos": cos, "sin": sin},
              **attrs)
    rng = np.random.default_rng(4)
    for s in (1, 5):
        x = rng.standard_normal([d if d != "s" else s for d in shape], dtype=np.float32)
        pos = np.arange(3, 3 + s, dtype=np.int64)[None] if positions == "ids" else np.array([7], np.int64)
        feeds = {"x": x, "pos": pos}
        assert_close(interpreted(m, feeds), ort_run(m, feeds), tol=1e-5)


# ------------------------------------------------------------------ GroupQueryAttention

def gqa_model(heads, kv_heads, head, packed=False, rotary=False, interleaved=0, window=-1, softcap=0.0):
    inputs = [("q", F, ["b", "s", (heads + 2 * kv_heads) * head if packed else heads * head])]
    if not packed:
        inputs += [("k", F, ["b", "s", kv_heads * head]), ("v", F, ["b", "s", kv_heads * head])]
    inputs += [("past_k", F, ["b", kv_heads, "p", head]), ("past_v", F, ["b", kv_heads, "p", head]),
               ("seqlens_k", I32, ["b"]), ("total", I32, [1])]
    names = ["q", "", ""] if packed else ["q", "k", "v"]
    names += ["past_k", "past_v", "seqlens_k", "total"]
    inits = {}
    if rotary:
        inits = dict(zip(("cos", "sin"), rope_caches(64, head // 2)))
        names += ["cos", "sin"]
    attrs = dict(num_heads=heads, kv_num_heads=kv_heads, do_rotary=int(rotary), rotary_interleaved=interleaved,
                 local_window_size=window, softcap=softcap)
    return model("GroupQueryAttention", inputs, ["y", "present_k", "present_v"], inits, node_inputs=names, **attrs)


def gqa_feeds(m, batch, past, seq, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in m.graph.input:
        dims = [{"b": batch, "s": seq, "p": past}.get(d.dim_param, d.dim_value) for d in i.type.tensor_type.shape.dim]
        if i.name == "seqlens_k":
            feeds[i.name] = np.full(dims, past + seq - 1, np.int32)
        elif i.name == "total":
            feeds[i.name] = np.array([past + seq], np.int32)
        else:
            feeds[i.name] = rng.standard_normal(dims, dtype=np.float32)
    return feeds


PAST_FROM_0 = {"p": (0, 64)}   # an empty cache allowed
GQA_CASES = {  # heads, kv_heads, head size, packed, rotary, interleaved, window, softcap
    "gqa": (4, 2, 16, False, False, 0, -1, 0.0), "packed-rotary": (4, 2, 16, True, True, 0, -1, 0.0),
    "mqa-rotary-interleaved": (4, 1, 16, False, True, 1, -1, 0.0), "mha-window": (2, 2, 16, True, False, 0, 3, 0.0),
    "softcap": (4, 2, 16, False, True, 0, -1, 5.0),
}


@pytest.mark.parametrize("case", list(GQA_CASES))
def test_group_query_attention_equals_onnxruntime(case):
    m = gqa_model(*GQA_CASES[case])
    for batch, past, seq in ((1, 0, 5), (1, 6, 1), (2, 0, 4), (2, 3, 1), (1, 9, 3)):   # ORT: batch 1 or seq 1
        feeds = gqa_feeds(m, batch, past, seq, seed=past)
        assert_close(interpreted(m, feeds, dim_bounds=PAST_FROM_0), ort_run(m, feeds), tol=1e-5)


def test_group_query_attention_rotary_with_position_ids_equals_onnxruntime():
    """position_ids (input 9) place the rotary, not seqlens_k (shifted by 2 here)."""
    m = gqa_model(4, 2, 16, rotary=True)
    m.graph.node[0].input.append("pos")
    m.graph.input.append(helper.make_tensor_value_info("pos", I64, ["b", "s"]))
    for past, seq in ((0, 5), (6, 1), (9, 3)):
        feeds = {**gqa_feeds(m, 1, past, seq), "pos": np.arange(past + 2, past + seq + 2, dtype=np.int64)[None]}
        assert_close(interpreted(m, feeds, dim_bounds=PAST_FROM_0), ort_run(m, feeds), tol=1e-5)


def test_group_query_attention_compiled(tmp_path):
    m = gqa_model(*GQA_CASES["packed-rotary"])
    art = rxe.build(import_model(m, dim_bounds=PAST_FROM_0), board="host", backend="c", out_dir=tmp_path,
                    name="m", quiet=True, profile=False)
    with rxe.connect("host") as dev, dev.load(art) as loaded:
        for batch, past, seq in ((1, 0, 4), (1, 7, 1)):
            feeds = gqa_feeds(m, batch, past, seq, seed=seq)
            assert_close([np.asarray(o) for o in loaded.run(*feeds.values())], ort_run(m, feeds), tol=1e-5)


def test_group_query_attention_refusals():
    m = gqa_model(4, 2, 16)
    m.graph.node[0].attribute.append(helper.make_attribute("smooth_softmax", 1))
    with pytest.raises(OnnxImportError, match=r"GroupQueryAttention.*smooth_softmax=1 is not supported"):
        import_model(m)
    m = gqa_model(4, 2, 16, rotary=True)
    del m.graph.node[0].input[7:]
    with pytest.raises(OnnxImportError, match=r"do_rotary=1 needs cos_cache and sin_cache"):
        import_model(m)
