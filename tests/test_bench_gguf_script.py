"""scripts/bench_gguf_decode.py and the engines it adds kept from rotting, without llama-cpp-python: an engine
in a child process (its answers, its crash reported as EngineCrashed, its Unavailable passed on), the
llama.cpp engine against a stand-in of llama-cpp-python (its own clock, the extra buffer types turned off),
the report's ratios and same-file token checks, and the tiny Llama's two int4 files (Q4_0 GGUF and
MatMulNBits) holding the same weights. Nothing here times anything."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench_gguf_decode  # noqa: E402
import llm_engines  # noqa: E402


class CountingEngine:
    """A stand-in engine for the child process: tokens 0..n-1, or a crash or an error on request."""
    label = "counting"

    def __init__(self, start: int, unavailable: str | None = None):
        if unavailable:
            raise llm_engines.Unavailable(unavailable)
        self.start = start

    def run(self, prompt, new_tokens):
        if new_tokens == 666:
            os.kill(os.getpid(), signal.SIGSEGV)
        if new_tokens == 0:
            raise ValueError("no tokens")
        return llm_engines.Generation(list(range(self.start, self.start + new_tokens)), len(prompt), 0.5, 2.0,
                                      [0.5] * (new_tokens - 1))

    def logits(self, ids):
        return np.arange(len(ids), dtype=np.float32)

    def close(self):
        pass


def test_engine_in_a_child_answers_and_its_crash_is_reported():
    engine = llm_engines.InChild(CountingEngine, 7)
    try:
        gen = engine.run([1, 2, 3], 4)
        assert gen.tokens == [7, 8, 9, 10] and gen.prompt_tokens == 3 and gen.decode_tok_s == pytest.approx(1.5)
        np.testing.assert_array_equal(engine.logits([5, 6]), [0.0, 1.0])
        with pytest.raises(RuntimeError, match=r"counting \(child process\), while in run\(\): ValueError: no tokens"):
            engine.run([1], 0)
        assert engine.run([1], 2).tokens == [7, 8]   # an error in the engine leaves the child serving
        with pytest.raises(llm_engines.EngineCrashed, match="child process killed by SIGSEGV while in run"):
            engine.run([1], 666)
        with pytest.raises(llm_engines.EngineCrashed, match="earlier"):
            engine.run([1], 2)
    finally:
        engine.close()


def test_unavailable_in_the_child_is_passed_on():
    with pytest.raises(llm_engines.Unavailable, match="no such library"):
        llm_engines.InChild(CountingEngine, 0, unavailable="no such library")


class _Params:
    use_extra_bufts = True


def _stand_in(perf):
    """llama-cpp-python's Llama and its ctypes module, as far as the engine uses them."""
    made = {}

    class Llama:
        def __init__(self, **kwargs):
            made.update(kwargs, params=bindings.llama_model_default_params())
            self._ctx = SimpleNamespace(ctx="ctx")
            self.scores = np.arange(12, dtype=np.float32).reshape(4, 3)
            self.evaluated = None

        def reset(self):
            pass

        def generate(self, tokens, **kwargs):
            assert kwargs["temp"] == 0.0 and kwargs["repeat_penalty"] == 1.0
            yield from range(100, 200)

        def eval(self, tokens):
            self.evaluated = tokens

    resets = []
    bindings = SimpleNamespace(llama_model_default_params=_Params, llama_perf_context=lambda ctx: perf,
                               llama_perf_context_reset=resets.append)
    return SimpleNamespace(Llama=Llama, llama_cpp=bindings), made, resets


def test_llama_cpp_times_are_its_own_clock_and_extra_bufts_can_be_turned_off(monkeypatch):
    perf = SimpleNamespace(n_p_eval=3, n_eval=4, t_p_eval_ms=30.0, t_eval_ms=8.0)
    module, made, resets = _stand_in(perf)
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    engine = llm_engines.LlamaCpp("model.gguf", 1, 512, extra_bufts=False, logits_all=True)
    assert made["params"].use_extra_bufts is False and made["logits_all"] is True and made["n_ctx"] == 512
    gen = engine.run([1, 2, 3], 5)
    assert resets == ["ctx"] and gen.tokens == [100, 101, 102, 103, 104]
    assert gen.prefill_s == pytest.approx(0.03) and gen.decode_tok_s == pytest.approx(500.0) and gen.wall_s > 0
    np.testing.assert_array_equal(engine.logits([9, 8]), [[0, 1, 2], [3, 4, 5]])
    assert engine.llm.evaluated == [9, 8]
    perf.n_eval = 3   # counters that do not match the run: this process's clock instead
    gen = engine.run([1, 2, 3], 5)
    assert len(gen.token_s) == 4 and gen.prefill_s == pytest.approx(0.03)
    perf.n_p_eval = 2
    assert engine.run([1, 2, 3], 5).prefill_s != pytest.approx(0.03)


def test_report_gives_ratios_and_checks_tokens_within_a_file():
    runs = {"relax_edge": {"decode": [30.0, 40.0, 35.0], "prefill": [100.0, 120.0, 110.0], "tokens": [1, 2, 3]},
            "llama.cpp": {"decode": [20.0, 25.0, 10.0], "prefill": [100.0, 90.0, 110.0], "tokens": [1, 2, 4]},
            "ORT MatMulNBits": {"decode": [7.0], "prefill": [55.0], "tokens": [5, 6, 7]},
            "relax_edge on the MatMulNBits": {"decode": [14.0], "prefill": [110.0], "tokens": [5, 6, 7]}}
    text = "\n".join(bench_gguf_decode.report("title", runs, {"ORT GenAI int4": "not installed"}))
    assert "relax_edge / llama.cpp: decode 1.75x, prefill 1.10x" in text
    assert "relax_edge on the MatMulNBits / ORT MatMulNBits: decode 2.00x, prefill 2.00x" in text
    assert "35.0 (30.0..40.0)" in text and "ORT GenAI int4" in text and "not installed" in text
    assert "relax_edge and llama.cpp (the same file) agree on the first 2 of 3" in text
    assert "ORT MatMulNBits and relax_edge on the MatMulNBits (the same file) agree on the first 3 of 3" in text
    assert "relax_edge and ORT MatMulNBits" not in text   # different files: no token check


@pytest.mark.parametrize("argv, says", [(["--faithful", "--model", "llama"], "--faithful compares SmolLM2"),
                                        (["--new-tokens", "500"], "exceed --max-context 512"),
                                        (["--rounds", "0"], "must be positive")])
def test_bad_arguments_are_named(argv, says, capsys):
    with pytest.raises(SystemExit):
        bench_gguf_decode.parse_args(argv)
    assert says in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_llama_int4_files_hold_the_same_weights():
    """The Q4_0 GGUF and the MatMulNBits export of the tiny Llama, each dequantized by its own reader (gguf's
    numpy dequantize; the MatMulNBits layout from ONNX Runtime's contrib-op spec): both within a step of the
    float weights, and within the float16 rounding of the GGUF's scales of each other."""
    import gguf
    import llm_bench_models
    import onnx
    from onnx import numpy_helper
    model = llm_bench_models.get_model("llama")
    reader = gguf.GGUFReader(str(llm_bench_models.q4_0_gguf(model)))
    onnx_model = onnx.load(str(llm_bench_models.nbits_onnx(model)))
    inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
    state = model.torch_model.state_dict()
    assert reader.tensors[0].name == "token_embd.weight" and reader.tensors[0].tensor_type.name == "F32"
    for torch_name, gguf_name in [("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down"),
                                  ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output")]:
        for layer in range(2):
            want = state[f"model.layers.{layer}.{torch_name}.weight"].numpy()
            t = next(t for t in reader.tensors if t.name == f"blk.{layer}.{gguf_name}.weight")
            assert t.tensor_type.name == "Q4_0"
            from_gguf = gguf.quants.dequantize(t.data, t.tensor_type)
            node = next(n for n in onnx_model.graph.node
                        if n.op_type == "MatMulNBits" and f"layers.{layer}/{torch_name.replace('.', '/')}/" in n.name)
            packed, scales = inits[node.input[1]], inits[node.input[2]]
            n, k = want.shape
            q = np.stack([packed & 15, packed >> 4], -1).reshape(n, -1, 32).astype(np.float32) - 8
            from_nbits = (q * scales.reshape(n, -1, 1)).reshape(n, k)
            step = np.abs(want).reshape(n, -1, 32).max(-1, keepdims=True) / 8
            for got in (from_gguf, from_nbits):   # one step at most: +max clips at 7 steps where -max is -8
                assert np.all(np.abs(got - want).reshape(n, -1, 32) <= step * 1.001)
            # the GGUF's scales are float16 (relative rounding 2^-11), the nibbles go up to 8
            np.testing.assert_allclose(from_nbits, from_gguf, rtol=0, atol=8 * float(step.max()) * 2.0 ** -10)


@pytest.mark.slow
def test_tiny_llama_run_prints_the_int4_table(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(SCRIPTS / "bench_gguf_decode.py"), "--model", "llama", "--ort",
                           "--llamacpp", "--llamacpp-no-extra-bufts", "--rounds", "1", "--prompt-tokens", "8",
                           "--new-tokens", "4",
                           "--build", str(tmp_path / "gguf"), "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(out.read_text())
    for name in ("relax_edge", "ORT MatMulNBits", "relax_edge on the MatMulNBits"):
        assert len(res["runs"][name]["tokens"]) == 4 and min(res["runs"][name]["decode"]) > 0
    assert "relax_edge / ORT MatMulNBits: decode" in done.stdout
    if "llama.cpp" in res["unavailable"]:
        assert "not installed (pip install llama-cpp-python)" in done.stdout
    else:
        assert "relax_edge and llama.cpp (the same file) agree" in done.stdout


class SteadyEngine(CountingEngine):
    def run(self, prompt, new_tokens):
        return llm_engines.Generation(list(range(new_tokens)), len(prompt), 0.25, 1.0)


def test_an_engine_that_crashes_in_the_rounds_leaves_them_with_its_reason():
    engines = {"relax_edge": SteadyEngine(0), "llama.cpp": llm_engines.InChild(CountingEngine, 0)}
    unavailable = {}
    runs = bench_gguf_decode.timed_rounds(engines, unavailable, [1, 2, 3, 4], 666, 3)   # 666: the child crashes
    assert list(runs) == ["relax_edge"] and list(engines) == ["relax_edge"]
    assert len(runs["relax_edge"]["decode"]) == 3 and runs["relax_edge"]["prefill"] == [16.0] * 3
    assert "killed by SIGSEGV" in unavailable["llama.cpp"]


@pytest.mark.slow
def test_an_older_build_in_the_build_dir_is_rebuilt_and_also_dirs_load_as_built(tmp_path):
    import llm_bench_models
    gguf = llm_bench_models.q4_0_gguf(llm_bench_models.get_model("llama"))
    build = tmp_path / "gguf"
    bench_gguf_decode.relax_edge_engine(build, gguf, 32).close()
    stamp = build / ".build-key"
    current = stamp.read_text()
    stamp.write_text("older-sources")     # what a build from older compiler or runtime sources leaves
    bench_gguf_decode.relax_edge_engine(build, gguf, 32, as_built=True).close()
    assert stamp.read_text() == "older-sources"
    engine = bench_gguf_decode.relax_edge_engine(build, gguf, 32)
    assert stamp.read_text() == current and not engine.art.cached
    assert len(engine.run([1, 2, 3], 2).tokens) == 2
    engine.close()
