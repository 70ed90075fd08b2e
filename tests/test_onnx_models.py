"""The reference ONNX models export, describe themselves correctly, run under
ONNX Runtime at two sizes of each dynamic dim, and match PyTorch."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests import onnx_models
from tests.onnx_models import MODEL_NAMES, concrete_shape, get_model

ROOT = Path(__file__).resolve().parent.parent


def size_sets(spec):
    """Two assignments of the dynamic dims (both empty for a static model)."""
    dims = spec["dynamic"]
    return [{d: sizes[i] for d, sizes in dims.items()} for i in range(2)]


def run(path, inputs):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))


def graph_tensors(values):
    def shape(v):
        return tuple(d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim)

    def dtype(v):
        return onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name

    return {v.name: (dtype(v), shape(v)) for v in values}


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_graph_matches_spec(name):
    path, spec = get_model(name)
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    assert {o.domain: o.version for o in model.opset_import}[""] == onnx_models.OPSET
    for kind, values in (("inputs", model.graph.input), ("outputs", model.graph.output)):
        want = {n: (t["dtype"], t["shape"]) for n, t in spec[kind].items()}
        assert graph_tensors(values) == want


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_runs_at_two_sizes(name):
    path, spec = get_model(name)
    results = []
    for seed, sizes in enumerate(size_sets(spec)):
        outputs = run(path, spec["make_inputs"](seed=seed, **sizes))
        assert list(outputs) == list(spec["outputs"])
        for out_name, out in outputs.items():
            want = spec["outputs"][out_name]
            assert out.dtype == want["dtype"]
            assert out.shape == concrete_shape(want["shape"], sizes)
            assert np.isfinite(out).all() and out.std() > 0
        results.append(outputs)
    first = next(iter(spec["outputs"]))
    assert not np.array_equal(results[0][first], results[1][first])


@pytest.mark.slow
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    path, spec = get_model(name)
    model = onnx_models.BUILDERS[name]()
    for seed, sizes in enumerate(size_sets(spec)):
        inputs = spec["make_inputs"](seed=seed, **sizes)
        with torch.no_grad():
            expected = model(*(torch.from_numpy(a) for a in inputs.values()))
        expected = expected if isinstance(expected, tuple) else (expected,)
        for got, want in zip(run(path, inputs).values(), expected):
            want = want.numpy()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_make_inputs_respects_ranges_and_seed():
    spec = onnx_models.bert_spec()
    a = spec["make_inputs"](seed=3, seq=9)
    b = spec["make_inputs"](seed=3, seq=9)
    assert a.keys() == b.keys() == spec["inputs"].keys()
    for name, t in spec["inputs"].items():
        assert a[name].shape == (1, 9) and a[name].dtype == t["dtype"]
        low, high = t["range"]
        assert a[name].min() >= low and a[name].max() < high
        np.testing.assert_array_equal(a[name], b[name])


def test_cache_is_keyed_and_overridable(tmp_path, monkeypatch):
    monkeypatch.setenv("RXE_MODEL_CACHE", str(tmp_path))
    path, _ = get_model("mlp")
    assert path.parent == tmp_path and onnx_models.cache_key() in path.name
    assert get_model("mlp")[0] == path
    with pytest.raises(KeyError):
        get_model("no_such_model")


@pytest.mark.slow
def test_concurrent_processes_export_once(tmp_path):
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from tests.onnx_models import get_model
        print(get_model("mlp")[0])
    """)
    env = {**os.environ, "RXE_MODEL_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(ROOT)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    paths = {p.communicate(timeout=300)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1
    onnx.checker.check_model(onnx.load(paths.pop()))
    assert sorted(f.suffix for f in tmp_path.iterdir()) == [".lock", ".onnx"]
