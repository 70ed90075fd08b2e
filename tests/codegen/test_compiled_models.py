"""Whole models compiled to C once and run natively on the host at two sizes
from the same artifact, against ONNX Runtime (rtol 1e-4, atol 1e-5).

The CNNs are exported with a fixed batch of 1; they are imported with a
symbolic batch, and the batch-2 run is checked sample by sample against
ONNX Runtime."""

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from tests.onnx_models import get_model

RTOL, ATOL = 1e-4, 1e-5

IMPORT = {
    "mlp": {},
    "bert": {"dim_bounds": {"seq": 64}},
    "gpt2": {"dim_bounds": {"seq": 64}},
    "mobilenet_v2": {"input_shapes": {"input": ("batch", 3, 224, 224)}},
    "resnet18": {"input_shapes": {"input": ("batch", 3, 224, 224)}},
}


def compile_model(name, tmp_path_factory):
    path, spec = get_model(name)
    mod = rxe.from_onnx(str(path), **IMPORT[name])
    art = rxe.build(mod, board="host", backend="c", out_dir=tmp_path_factory.mktemp(name), name=name, profile=False)
    return name, path, spec, rxe.connect("host").load(art)


@pytest.fixture(scope="module", params=list(IMPORT))
def compiled(request, tmp_path_factory):
    return compile_model(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return compile_model("bert", tmp_path_factory)[3]


def reference(session, feeds, batch_by_sample: bool):
    if not batch_by_sample:
        return session.run(None, feeds)
    (name, x), = feeds.items()
    parts = [session.run(None, {name: x[i:i + 1]}) for i in range(x.shape[0])]
    return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]


def test_compiled_model_matches_onnxruntime_at_two_sizes(compiled):
    name, path, spec, loaded = compiled
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    cnn = "input_shapes" in IMPORT[name]
    shapes = []
    for which in (0, 1):
        if cnn:
            x = np.random.default_rng(which).standard_normal((which + 1, 3, 224, 224)).astype(np.float32)
            feeds = {"input": x}
        else:
            sizes = {dim: pair[which] for dim, pair in spec["dynamic"].items()}
            feeds = spec["make_inputs"](seed=which, **sizes)
        expected = reference(session, feeds, cnn)
        outs = loaded.run(*feeds.values())
        assert len(outs) == len(expected)
        for ours, ref in zip(outs, expected):
            assert ours.shape == ref.shape
            np.testing.assert_allclose(ours, ref, rtol=RTOL, atol=ATOL)
        shapes.append([o.shape for o in outs])
    assert shapes[0] != shapes[1], "the two runs should use different sizes"


def test_bad_inputs_get_status_and_message(bert):
    loaded = bert
    ids = np.zeros((1, 8), np.int64)
    with pytest.raises(rxe.RuntimeCheckError, match="takes 2 inputs"):
        loaded.run(ids)
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_DTYPE: input input_ids: dtype int32, expected int64"):
        loaded.run(ids.astype(np.int32), ids)
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_RANK: input attention_mask: rank 1, expected 2"):
        loaded.run(ids, ids[0])
    with pytest.raises(rxe.RuntimeCheckError,
                       match="input attention_mask dimension 1 is 9, but it must equal seq = 8"):
        loaded.run(ids, np.zeros((1, 9), np.int64))
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_BOUND: input input_ids dimension 1: seq = 65 exceeds"):
        loaded.run(np.zeros((1, 65), np.int64), np.zeros((1, 65), np.int64))
