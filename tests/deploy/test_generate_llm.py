"""m.generate on the compiler's real `step` (relax_edge/transform/kv_state.py)
of tests/llm_models.py's tiny Llama: `relax-edge generate` compiles the ONNX
export with --max-context and streams its tokens; then 32 greedy tokens in
process (ctypes) and through the local RPC server equal PyTorch's
(transformers' generate), and a seeded sampled run is the same in both."""

import pytest

import relax_edge as rxe
from relax_edge.build import Artifact
from relax_edge.cli import main
from relax_edge.deploy.host import server_module
from tests.llm_models import MAX_CONTEXT, get_llm, torch_greedy

PROMPT = [1, 5, 9, 42]


@pytest.mark.slow
def test_llama_generate_equals_pytorch_greedy(tmp_path, capsys):
    path, model = get_llm("llama")
    want = torch_greedy(model, PROMPT, 32)
    assert len(set(want)) > 4, f"PyTorch's greedy tokens {want} say little"
    code = main(["generate", str(path), "--board", "host", "--max-context", str(MAX_CONTEXT), "--build-dir",
                 str(tmp_path / "llama"), "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", "8"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].split() == [str(t) for t in want[:8]]
    art = Artifact.load(tmp_path / "llama")
    with rxe.connect("host") as dev, dev.load(art) as m, server_module(art, "main", None, "host") as s:
        streamed = []
        res = m.generate(PROMPT, max_new_tokens=32, on_token=streamed.append)
        assert res.tokens == want and streamed == want
        assert res.prompt_tokens == len(PROMPT) and res.decode_tok_s > 0 and res.prefill_tok_s > 0
        assert s.generate(PROMPT, max_new_tokens=32).tokens == want
        sampled = m.generate(PROMPT, max_new_tokens=16, temperature=0.8, top_k=40, top_p=0.9, seed=1)
        assert s.generate(PROMPT, max_new_tokens=16, temperature=0.8, top_k=40, top_p=0.9, seed=1).tokens == \
            sampled.tokens
        with pytest.raises(rxe.RuntimeCheckError, match=f"context bound max_context={MAX_CONTEXT}"):
            s.generate(PROMPT, max_new_tokens=MAX_CONTEXT)
