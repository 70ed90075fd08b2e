"""scripts/bench_llm.py kept from rotting: a minimal run on the tiny Llama (ONNX Runtime's loop, the
flat-cost check and the peak-RSS child), and the relax_edge column against a stand-in for m.generate.
Nothing here times anything: the numbers are only checked to be there and positive."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench_llm  # noqa: E402
import llm_bench_models  # noqa: E402
import llm_engines  # noqa: E402


def test_minimal_run_writes_the_table_and_json(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(SCRIPTS / "bench_llm.py"), "--quick", "--models", "llama",
                           "--engines", "ort", "llamacpp", "--rounds", "2", "--prompt-tokens", "16",
                           "--new-tokens", "6", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(out.read_text())["results"][0]
    ort = res["engines"]["ort"]
    assert res["model"] == "llama" and res["new_tokens"] == 6 and res["weight_bytes"] > 0
    assert len(ort["runs"]) == 2 and len(ort["tokens"]) == 6 and ort["same_tokens"] == "yes"
    assert ort["decode_tok_s"]["min"] > 0 and ort["prefill_tok_s"]["median"] > 0 and ort["gb_s"] > 0
    assert ort["flat"]["short_ms"] > 0 and ort["flat"]["long_context"] == 100
    assert ort["memory"]["peak_bytes"] >= ort["memory"]["loaded_bytes"] > 0
    table = done.stdout
    assert "ORT loop" in table and "same tokens" in table and "decode tok/s" in table
    llamacpp = res["engines"]["llamacpp"]
    if "unavailable" in llamacpp:
        assert "llama.cpp: not installed (pip install llama-cpp-python)" in table
    else:
        assert llamacpp["same_tokens"].startswith(("yes", "no"))


def test_relax_edge_column_through_generate():
    """The column reads what m.generate returns (.tokens, .ttft_ms, .decode_tok_s, per-token times)."""
    calls = []

    def generate(prompt, max_new_tokens, temperature):
        calls.append((prompt, max_new_tokens, temperature))
        return SimpleNamespace(tokens=[5, 6, 7, 8], ttft_ms=2.0, prefill_tok_s=1500.0, decode_tok_s=300.0,
                               token_ms=[2.0, 4.0, 3.0, 3.5])

    engine = llm_engines.RelaxEdge(None, 1, loaded=SimpleNamespace(generate=generate))
    gen = engine.run([1, 2, 3], 4)
    assert calls == [([1, 2, 3], 4, 0.0)]
    assert gen.tokens == [5, 6, 7, 8] and gen.prefill_tok_s == pytest.approx(1500.0)
    assert gen.decode_tok_s == pytest.approx(300.0) and gen.decode_ms_per_token == pytest.approx(3.5)


def test_relax_edge_without_generate_is_reported():
    with pytest.raises(llm_engines.Unavailable, match=r"generate not available \(SimpleNamespace has no generate"):
        llm_engines.RelaxEdge(None, 1, loaded=SimpleNamespace())


def test_table_prints_the_reason_of_an_unavailable_engine():
    rate = {"median": 10.0, "min": 9.0, "max": 11.0}
    row = {"decode_tok_s": rate, "prefill_tok_s": rate, "gb_s": 1.0, "same_tokens": "yes", "rxe_ratio_decode": 2.0}
    results = [{"model": "llama", "prompt_tokens": 128, "new_tokens": 256, "engines": {
        "relax_edge": {"unavailable": "generate not available (x)"}, "ort": row}}]
    text = bench_llm.table(results)
    assert "relax_edge: generate not available (x)" in text
    assert "10.0 (9.0-11.0)" in text and "2.00x" in text


@pytest.mark.parametrize("got, want, says", [([1, 2, 3], [1, 2, 3], "yes"), ([1, 9, 3], [1, 2, 3], "no (1/3"),
                                             ([1, 2], [1, 2, 3], "no (2/3")])
def test_same_tokens(got, want, says):
    assert bench_llm.same_tokens(got, want).startswith(says)


@pytest.mark.slow
def test_relax_edge_columns_on_the_tiny_llama(tmp_path):
    """m.generate and the artifact's main in the Python loop give ORT's greedy tokens; the RAM bill is the
    state of 4 cache tensors (1, 2, 64, 16) at max_context=64, a nonzero arena and the weights."""
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(SCRIPTS / "bench_llm.py"), "--quick", "--models", "llama",
                           "--engines", "relax_edge", "rxe_loop", "ort", "--rounds", "1", "--prompt-tokens", "16",
                           "--new-tokens", "8", "--max-context", "64", "--no-memory", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["results"][0]["engines"]
    assert "unavailable" not in rows["relax_edge"], rows["relax_edge"]["unavailable"]
    assert rows["relax_edge"]["same_tokens"] == "yes" and rows["rxe_loop"]["same_tokens"] == "yes"
    mem = rows["relax_edge"]["memory"]
    assert mem["state_bytes"] == 4 * 2 * 64 * 16 * 4 and mem["arena_bytes"] > 0 and mem["weights_bytes"] > 0
    assert rows["ort"]["rxe_ratio_decode"] > 0 and rows["relax_edge"]["flat"]["long_context"] == 64 - 17
    assert "relax_edge main loop" in done.stdout


def test_llama_cpp_column_through_llama_cpp_python(monkeypatch):
    """The llama.cpp engine against a stand-in of llama-cpp-python's Llama: the cache reset before each run,
    greedy sampling asked for, new_tokens tokens taken from its generator."""
    made = {}

    class Llama:
        def __init__(self, **kwargs):
            made.update(kwargs)
            self.resets = 0

        def reset(self):
            self.resets += 1

        def generate(self, tokens, **kwargs):
            assert kwargs["temp"] == 0.0 and kwargs["repeat_penalty"] == 1.0
            yield from range(100, 200)

    monkeypatch.setitem(sys.modules, "llama_cpp", SimpleNamespace(Llama=Llama))
    engine = llm_engines.LlamaCpp("model.gguf", 1, 1024)
    gen = engine.run([1, 2, 3], 5)
    assert made["n_threads"] == 1 and made["n_ctx"] == 1024 and engine.llm.resets == 1
    assert gen.tokens == [100, 101, 102, 103, 104] and len(gen.token_s) == 4 and gen.prompt_tokens == 3


def test_dequantized_gguf_keeps_metadata_and_values(tmp_path):
    """A GGUF with a Q8_0 and an F32 tensor written again all in F32: the same names, shapes, metadata and the
    dequantized values."""
    import gguf
    rng = np.random.default_rng(0)
    weight, norm = rng.standard_normal((4, 64), dtype=np.float32), rng.standard_normal(64, dtype=np.float32)
    src = tmp_path / "q8.gguf"
    writer = gguf.GGUFWriter(str(src), "llama")
    writer.add_block_count(1)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_tensor("w", gguf.quants.quantize(weight, gguf.GGMLQuantizationType.Q8_0),
                      raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("norm", norm)
    for step in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file, writer.close):
        step()
    llm_bench_models.dequantize_gguf(src, tmp_path / "f32.gguf")
    a, b = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(tmp_path / "f32.gguf"))
    assert [t.name for t in b.tensors] == ["w", "norm"]
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in b.tensors)
    q8 = a.tensors[0]
    np.testing.assert_array_equal(b.tensors[0].data, gguf.quants.dequantize(q8.data, q8.tensor_type))
    np.testing.assert_allclose(b.tensors[0].data, weight, atol=0.05)
    np.testing.assert_array_equal(b.tensors[1].data, norm)
    assert b.fields["llama.block_count"].contents() == 1
    assert b.fields["general.file_type"].contents() == gguf.LlamaFileType.ALL_F32
