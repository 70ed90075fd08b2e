"""Real architectures exported from PyTorch with seeded random weights
(tests/onnx_models.py): each imported once, printed with its symbolic dims,
and interpreted at two sizes from the same module, against ONNX Runtime."""

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from tests.onnx_models import get_model

RTOL, ATOL = 1e-4, 1e-5

# model -> (dim_bounds, text that the printed module must contain)
EXPECTED = {
    "mlp": (None, ['x: Tensor((batch, 32), "float32")', '-> Tensor((batch, 10), "float32")']),
    "bert": ({"seq": 64}, ['Tensor((1, seq, 64), "float32")', 'Tensor((1, 4, seq, seq), "float32") = softmax']),
    "gpt2": ({"seq": 64}, ['Tensor((1, seq, 64), "float32")', 'Tensor((1, 4, seq, seq), "float32") = softmax',
                           '-> Tensor((1, seq, 512), "float32")']),
    "mobilenet_v2": (None, ['input: Tensor((1, 3, 224, 224), "float32")', '-> Tensor((1, 1000), "float32")']),
    "resnet18": (None, ['input: Tensor((1, 3, 224, 224), "float32")', '-> Tensor((1, 1000), "float32")']),
}


@pytest.fixture(scope="module", params=list(EXPECTED))
def imported(request):
    name = request.param
    path, spec = get_model(name)
    bounds, _ = EXPECTED[name]
    return name, path, spec, rxe.from_onnx(str(path), dim_bounds=bounds)


def test_printed_with_symbolic_dims(imported):
    name, _, _, mod = imported
    text = str(mod)
    for fragment in EXPECTED[name][1]:
        assert fragment in text, f"{fragment!r} not in the printed {name}"
    rxe.verify(mod)


def test_interpreted_at_two_sizes_matches_onnxruntime(imported):
    name, path, spec, mod = imported
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sizes_seen = []
    for which in (0, 1):
        sizes = {dim: pair[which] for dim, pair in spec["dynamic"].items()}
        feeds = spec["make_inputs"](seed=which, **sizes)
        expected = session.run(None, feeds)
        out = rxe.interpret(mod, *feeds.values())
        outs = list(out) if isinstance(out, tuple) else [out]
        assert len(outs) == len(expected)
        for ours, ref in zip(outs, expected):
            assert ours.shape == ref.shape
            np.testing.assert_allclose(ours, ref, rtol=RTOL, atol=ATOL)
        sizes_seen.append(tuple(o.shape for o in outs))
    if spec["dynamic"]:
        assert sizes_seen[0] != sizes_seen[1], "the two runs should differ in size"
