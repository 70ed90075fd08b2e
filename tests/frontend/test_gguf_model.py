"""rxe.from_gguf against transformers loading the same GGUF file (AutoModelForCausalLM.from_pretrained(dir,
gguf_file=...), which dequantizes to fp32): tiny seeded llama / qwen2 decoders written with GGUFWriter
(tests/frontend/gguf_models.py) in F32, F16, Q8_0, Q4_0 and Q4_1, interpreted: main's logits, and greedy
tokens through the step function kv_state adds."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.frontend.gguf import GGUFError
from tests.frontend.gguf_models import build_decoder, transformers, write_decoder

CONTEXT = 32
PROMPT = [5, 17, 33, 99, 200, 7]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    cache = {}

    def get(arch, weight_type):
        if (arch, weight_type) not in cache:
            path = tmp_path_factory.mktemp("gguf") / f"tiny-{arch}-{weight_type}.gguf"
            write_decoder(path, build_decoder(arch), weight_type, arch)
            import torch
            ref = transformers().AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
            cache[arch, weight_type] = path, ref
        return cache[arch, weight_type]
    return get


def _empty(ref):
    cfg = ref.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    return [np.zeros((1, cfg.num_key_value_heads, 0, head_dim), np.float32) for _ in range(2 * cfg.num_hidden_layers)]


def _torch_logits(ref, ids):
    import torch
    with torch.no_grad():
        return ref(torch.tensor([ids])).logits.numpy()


@pytest.mark.parametrize("arch,weight_type", [("llama", "F32"), ("llama", "F16"), ("llama", "Q8_0"),
                                              ("llama", "Q4_0"), ("llama", "Q4_1"), ("qwen2", "Q8_0"),
                                              ("qwen2", "F32")])
def test_main_logits_match_transformers(files, arch, weight_type):
    path, ref = files(arch, weight_type)
    mod = rxe.from_gguf(path, max_context=CONTEXT)
    assert "step" in mod.functions
    ids = np.array([PROMPT], np.int64)
    out = rxe.interpret(mod, ids, np.ones_like(ids), np.arange(len(PROMPT))[None], *_empty(ref))
    want = _torch_logits(ref, PROMPT)
    np.testing.assert_allclose(out[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    ops = {b.value.op.name for b in mod.functions["main"].body.blocks[0].bindings if hasattr(b.value, "op")}
    if weight_type.startswith("Q"):
        assert {"matmul_nbits", "gather_nbits"} <= ops
    else:
        assert "matmul_nbits" not in ops and "gather_nbits" not in ops


def test_tied_head_uses_the_embedding_constants(files):
    path, _ = files("qwen2", "Q8_0")   # qwen2's config ties the head; the file has no output.weight
    main = rxe.from_gguf(path, max_context=CONTEXT).functions["main"]
    calls = [b.value for b in main.body.blocks[0].bindings if hasattr(b.value, "op")]
    gather = next(c for c in calls if c.op.name == "gather_nbits")
    head = [c for c in calls if c.op.name == "matmul_nbits"][-1]
    assert head.attrs["N"] == 320 and gather.args[0] is head.args[1] and gather.args[1] is head.args[2]


def _step_greedy(mod, prompt, new_tokens, state_shape, layers):
    states = [np.zeros(state_shape, np.float32) for _ in range(2 * layers)]
    ids, done, out = list(prompt), 0, []
    for _ in range(new_tokens):
        feed = np.array([ids], np.int64)
        mask = np.ones((1, done + len(ids)), np.int64)
        pos = np.arange(done, done + len(ids))[None]
        logits = rxe.interpret(mod, feed, mask, pos, *states, func="step")
        done += len(ids)
        ids = [int(np.argmax(np.asarray(logits)[0, -1]))]
        out.append(ids[0])
    return out


def test_step_greedy_tokens_match_transformers(files):
    import torch
    path, ref = files("llama", "Q4_0")
    mod = rxe.from_gguf(path, max_context=CONTEXT)
    step = mod.functions["step"]
    assert step.attrs["max_context"] == CONTEXT
    ops = {b.value.op.name for b in step.body.blocks[0].bindings if hasattr(b.value, "op")}
    assert {"kv_append", "kv_attention"} <= ops
    cfg = ref.config
    with torch.no_grad():
        ids = torch.tensor([PROMPT])
        want = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, min_new_tokens=8,
                            do_sample=False, pad_token_id=0)[0, len(PROMPT):].tolist()
    got = _step_greedy(mod, PROMPT, 8, (1, cfg.num_key_value_heads, CONTEXT, 16), cfg.num_hidden_layers)
    assert got == want


def test_errors_name_the_field(files, tmp_path):
    import gguf
    path, _ = files("llama", "F32")
    with pytest.raises(GGUFError, match="max_context must be a positive int"):
        rxe.from_gguf(path, max_context=0)
    with pytest.raises(GGUFError, match="dim_bounds: 'width' is not a dim"):
        rxe.from_gguf(path, max_context=8, dim_bounds={"width": 3})
    with pytest.raises(GGUFError, match=r"dim_bounds\['seq'\] = 9 conflicts with max_context=8"):
        rxe.from_gguf(path, max_context=8, dim_bounds={"seq": 9})
    other = tmp_path / "gpt2.gguf"
    w = gguf.GGUFWriter(str(other), "gpt2")
    w.add_tensor("x", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GGUFError, match="general.architecture is 'gpt2'; from_gguf supports llama, qwen2"):
        rxe.from_gguf(other)
    w = gguf.GGUFWriter(str(other), "llama")
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GGUFError, match="metadata 'llama.embedding_length' is missing"):
        rxe.from_gguf(other)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_cli_compiles_a_gguf_for_the_host(files, tmp_path, backend):
    """`relax-edge compile model.gguf` (the CLI imports a .gguf with from_gguf); the artifact's main gives
    transformers' logits and m.generate its greedy tokens."""
    import torch

    from relax_edge.cli import main as cli
    path, ref = files("llama", "Q4_1")
    out = tmp_path / backend
    assert cli(["compile", path, "--board", "host", "--backend", backend, "--max-context", CONTEXT, "-o", out,
                "--name", "tiny_gguf"]) == 0
    art = rxe.Artifact.load(out)
    ids = np.array([PROMPT], np.int64)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        got = loaded.run(ids, np.ones_like(ids), np.arange(len(PROMPT))[None], *_empty(ref))[0]
        res = loaded.generate(PROMPT, max_new_tokens=6)
    want = _torch_logits(ref, PROMPT)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    with torch.no_grad():
        t = torch.tensor([PROMPT])
        greedy = ref.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=6, min_new_tokens=6,
                              do_sample=False, pad_token_id=0)[0, len(PROMPT):].tolist()
    assert list(res.tokens) == greedy
