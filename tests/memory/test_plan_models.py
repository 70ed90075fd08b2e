"""The memory planner on whole models: fixed arenas when bounded, a
workspace function when not, both matching ONNX Runtime; a bounded model
under AddressSanitizer; no allocation on the run path."""

import subprocess

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from relax_edge.deploy import tensorfile
from relax_edge.ir.shape import evaluate
from relax_edge.memory import dump_plan, lower_bound, plan_function, plan_module
from relax_edge.memory.plan import size_vars
from relax_edge.toolchain import RUNTIME_DIR, RUNTIME_SOURCES, build_runner, host_compiler, library_sources
from relax_edge.transform.legalize import legalize
from tests.models import build_cnn, cnn_weights
from tests.onnx_models import get_model


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    path, spec = get_model("bert")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    bounded = rxe.build(rxe.from_onnx(str(path), dim_bounds={"seq": 64}), board="host",
                        out_dir=tmp_path_factory.mktemp("bounded"), name="bert", profile=False)
    symbolic = rxe.build(rxe.from_onnx(str(path)), board="host", out_dir=tmp_path_factory.mktemp("symbolic"),
                         name="bert", profile=False)
    return spec, session, bounded, symbolic


def test_bounded_model_has_a_fixed_arena(bert):
    spec, session, art, _ = bert
    assert isinstance(art.workspace_bytes, int) and art.workspace_bytes > 0
    header = art.header.read_text()
    assert f"#define BERT_WORKSPACE_BYTES {art.workspace_bytes}u" in header
    loaded = rxe.connect("host").load(art)
    for seq in (1, 16, 64):  # the same arena for every length within the bound
        feeds = spec["make_inputs"](seed=seq, seq=seq)
        assert loaded.plan(*feeds.values())[1] == art.workspace_bytes
        for ours, ref in zip(loaded.run(*feeds.values()), session.run(None, feeds)):
            np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
    assert loaded.workspace_bytes(seq=3) == art.workspace_bytes
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_BOUND: size seq: seq = 65 exceeds its upper bound 64"):
        loaded.workspace_bytes(seq=65)


def test_unbounded_model_asks_for_its_workspace(bert):
    spec, session, _, art = bert
    assert art.workspace_bytes is None
    assert "ask bert_main_workspace_size" in art.header.read_text()
    loaded = rxe.connect("host").load(art)
    small, large = loaded.workspace_bytes(seq=8), loaded.workspace_bytes(seq=48)
    assert 0 < small < large
    for seq in (8, 48):
        feeds = spec["make_inputs"](seed=seq, seq=seq)
        assert loaded.plan(*feeds.values())[1] == loaded.workspace_bytes(seq=seq)
        for ours, ref in zip(loaded.run(*feeds.values()), session.run(None, feeds)):
            np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(rxe.RelaxEdgeError, match="takes the sizes seq; missing seq; unknown batch"):
        loaded.workspace_bytes(batch=2)


def test_bounded_model_under_address_sanitizer(bert, tmp_path):
    spec, session, art, _ = bert
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
    runner = build_runner(art, tmp_path / "runner", extra_cflags=flags, extra_ldflags=flags[:1])
    for seq in (2, 64):
        feeds = spec["make_inputs"](seed=seq, seq=seq)
        (tmp_path / "in.rxt").write_bytes(tensorfile.encode(list(feeds.values())))
        proc = subprocess.run([str(runner), str(tmp_path / "in.rxt"), str(tmp_path / "out.rxt")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        for ours, ref in zip(tensorfile.decode((tmp_path / "out.rxt").read_bytes()), session.run(None, feeds)):
            np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
    too_long = [np.zeros((1, 65), np.int64)] * 2
    (tmp_path / "long.rxt").write_bytes(tensorfile.encode(too_long))
    proc = subprocess.run([str(runner), str(tmp_path / "long.rxt"), str(tmp_path / "out.rxt")],
                          capture_output=True, text=True)
    assert proc.returncode == 3 and "RXE_ERR_BOUND" in proc.stderr and "AddressSanitizer" not in proc.stderr


def test_no_allocation_on_the_run_path(tmp_path):
    """The compiled model, the runtime, its library kernels and thread pool
    reference no allocator at all."""
    art = rxe.build(build_cnn(cnn_weights()), board="host", out_dir=tmp_path, name="cnn", profile=False)
    cc = host_compiler()
    objects = []
    for src in [art.out_dir / "cnn.c", *RUNTIME_SOURCES, *library_sources()]:
        obj = tmp_path / (src.stem + ".o")
        subprocess.run([cc, "-std=c99", "-O2", f"-I{RUNTIME_DIR / 'include'}", "-c", str(src), "-o", str(obj)],
                       check=True)
        objects.append(str(obj))
    undefined = subprocess.run(["nm", "-u", *objects], capture_output=True, text=True, check=True).stdout.split()
    allocators = {"malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memalign"}
    assert not allocators & set(undefined), sorted(allocators & set(undefined))
    # the check sees real external references: the library kernels and the thread pool's
    assert "rxe_lib_conv2d_f32" in undefined and "pthread_create" in undefined


def test_views_and_in_place_kernels():
    """Reshapes run no kernel and share storage; elementwise kernels write
    over a dying input of the same shape."""
    path, _ = get_model("gpt2")
    mod = legalize(rxe.from_onnx(str(path), dim_bounds={"seq": 64}))
    plans = plan_module(mod)
    live = plans["main"].liveness
    views = [s for s in live.steps if s.view_of is not None]
    inplace = [s for s in live.steps if s.inplace_over is not None]
    assert views and inplace
    for s in views:
        assert live.storage[s.var] == live.storage[s.view_of]
    for s in inplace:
        assert live.storage[s.var] == live.storage[s.inplace_over]
        assert s.call.program.name in plans.inplace


def test_plan_dump_and_quality_on_a_cnn():
    mod = legalize(build_cnn(cnn_weights()))
    plan = plan_function(mod, mod.functions["main"]).plan
    text = dump_plan(plan)
    assert text.startswith("memory plan: symbolic mode") and "timeline" in text
    for n in (1, 7):
        env = {v: n for v in size_vars(plan.buffers)}
        sizes = [evaluate(b.size, env) for b in plan.buffers]
        assert evaluate(plan.total, env) >= lower_bound(plan.buffers, sizes)
