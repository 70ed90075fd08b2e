"""Weight-only quantized decoders (int4 / int8 matmul_nbits and gather_nbits) generating on every QEMU board.

1. ONNX Runtime GenAI's tiny Llama (tests/deploy/test_genai_model.py builds and caches it): the int4 build
   with int8 activations (the model as built: MatMulNBits at accuracy_level 4) and the `-p int8` build with
   float32 activations (from_genai's default), compiled with the C backend for qemu-aarch64,
   qemu-aarch64-dotprod (sdot), qemu-armv7 and qemu-riscv64, and with LLVM for qemu-aarch64. m.generate's
   greedy tokens equal the host build's and ONNX Runtime's greedy loop on the same model.onnx (at
   accuracy_level 0 for float32 activations), up to ONNX Runtime's first near-tie.
2. The tiny GGUF llama of tests/frontend/gguf_models.py in Q4_0, Q4_1 and Q8_0 on qemu-aarch64 and qemu-armv7:
   transformers' greedy tokens for the same file.
3. SmolLM2-135M-Instruct from its GGUF (Q4_1, a Q8_0 embedding tied to the head), kept quantized, on
   qemu-aarch64: the reference text for "Once upon a time" (tests/llm_models.SMOLLM2_REFERENCE).

References we did not write: ONNX Runtime, transformers. Each model is built once per board and backend
(module-scoped caches).
"""

import numpy as np
import onnx
import pytest

import relax_edge as rxe
from tests.deploy.test_genai_model import PROMPT, _level_0, genai_llama, ort_greedy, until_tie

pytestmark = [pytest.mark.emu, pytest.mark.slow]   # each build cross-compiles the model for its board

BOARDS = ["qemu-aarch64", "qemu-aarch64-dotprod", "qemu-armv7", "qemu-riscv64"]
GENAI_CONTEXT = 32
GENAI_NEW = 12
# the builder's folder (tests/deploy/test_genai_model.VARIANTS) -> int8 activations (ONNX Runtime: as built)
GENAI = {"llama": True, "llama-int8": False}


def _generate(board: str, art, prompt, new_tokens: int) -> list:
    with rxe.connect(board) as dev:
        return list(dev.load(art).generate(prompt, max_new_tokens=new_tokens).tokens)


@pytest.fixture(scope="module")
def genai(tmp_path_factory):
    """variant -> (module, ONNX Runtime's tokens, the host C build's tokens), each made once."""
    cache = {}

    def get(variant):
        if variant not in cache:
            int8 = GENAI[variant]
            folder = genai_llama(variant)
            model = onnx.load(str(folder / "model.onnx"))
            want = until_tie(*ort_greedy(model if int8 else _level_0(model), GENAI_NEW))
            assert len(set(want)) > 3, f"{variant}: ONNX Runtime's tokens {want} say little"
            mod = rxe.from_genai(folder, max_context=GENAI_CONTEXT, int8_activations=int8)
            host = rxe.build(mod, board="host", backend="c", out_dir=tmp_path_factory.mktemp(variant) / "host",
                             name="genai", quiet=True, profile=False)
            cache[variant] = mod, want, _generate("host", host, PROMPT, len(want))
        return cache[variant]
    return get


@pytest.mark.parametrize("variant, board, backend",
                         [*((v, b, "c") for v in GENAI for b in BOARDS), ("llama", "qemu-aarch64", "llvm")])
def test_genai_generate_on_qemu(genai, variant, board, backend, tmp_path):
    mod, want, host = genai(variant)
    assert host == want, f"host: {host} != ONNX Runtime's {want}"
    art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / "art", name="genai", quiet=True,
                    profile=False)
    assert art.decoder["max_context"] == GENAI_CONTEXT
    assert _generate(board, art, PROMPT, len(want)) == want


GGUF_CONTEXT = 32
GGUF_PROMPT = [294, 88, 230, 51, 102, 308]   # 7-8 distinct greedy tokens in each weight type
GGUF_NEW = 8


@pytest.fixture(scope="module")
def gguf_llama(tmp_path_factory):
    """weight type -> (module, transformers' greedy tokens for the same file), each made once."""
    from tests.frontend.gguf_models import build_decoder, transformers, write_decoder
    model, cache = build_decoder("llama"), {}

    def get(weight_type):
        if weight_type not in cache:
            import torch
            path = write_decoder(tmp_path_factory.mktemp("gguf") / f"tiny-llama-{weight_type}.gguf", model,
                                 weight_type)
            ref = transformers().AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
            with torch.no_grad():
                ids = torch.tensor([GGUF_PROMPT])
                out = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=GGUF_NEW,
                                   min_new_tokens=GGUF_NEW, do_sample=False, pad_token_id=0, output_scores=True,
                                   return_dict_in_generate=True)
            tokens = out.sequences[0, len(GGUF_PROMPT):].tolist()
            margins = [float(np.diff(np.sort(s[0].numpy())[-2:])[0]) for s in out.scores]
            want = until_tie(tokens, margins)   # up to transformers' first near-tie
            assert len(set(want)) > 4, f"{weight_type}: transformers' tokens {want} say little"
            cache[weight_type] = rxe.from_gguf(path, max_context=GGUF_CONTEXT), want
        return cache[weight_type]
    return get


@pytest.mark.parametrize("board", ["qemu-aarch64", "qemu-armv7"])
@pytest.mark.parametrize("weight_type", ["Q4_0", "Q4_1", "Q8_0"])
def test_gguf_generate_on_qemu(gguf_llama, weight_type, board, tmp_path):
    mod, want = gguf_llama(weight_type)
    ops = {b.value.op.name for b in mod.functions["step"].body.blocks[0].bindings if hasattr(b.value, "op")}
    assert {"matmul_nbits", "gather_nbits"} <= ops
    art = rxe.build(mod, board=board, backend="c", out_dir=tmp_path / "art", name="tiny_gguf", quiet=True,
                    profile=False)
    assert _generate(board, art, GGUF_PROMPT, len(want)) == want


SMOLLM2_CONTEXT = 48
SMOLLM2_NEW = 8   # the reference's first 8 tokens: its 26 take ~4x the CPU under QEMU


def test_smollm2_gguf_generates_the_reference_on_qemu_aarch64(tmp_path, capsys):
    from relax_edge.frontend.gguf import gguf_tokenizer
    from tests.llm_models import SMOLLM2_PROMPT, SMOLLM2_REFERENCE, smollm2_gguf
    path = smollm2_gguf()
    tokenizer = gguf_tokenizer(path)
    prompt = tokenizer.encode(SMOLLM2_PROMPT).ids
    reference = tokenizer.encode(SMOLLM2_REFERENCE).ids[:SMOLLM2_NEW]
    assert tokenizer.decode(reference) in SMOLLM2_REFERENCE   # no byte cut in two
    art = rxe.build(rxe.from_gguf(path, max_context=SMOLLM2_CONTEXT), board="qemu-aarch64", backend="c",
                    out_dir=tmp_path / "art", name="smollm2_gguf", quiet=True, profile=False)
    arena = art.signature["step"]["fixed_workspace_bytes"]
    with capsys.disabled():
        print(f"\nSmolLM2 Q4_1/Q8_0 on qemu-aarch64: weights {art.weights_bytes} B, state {art.state_bytes} B, "
              f"step arena {arena} B (context {SMOLLM2_CONTEXT})")
    assert art.state_bytes == 2 * 30 * 3 * SMOLLM2_CONTEXT * 64 * 4 and arena > 0
    tokens = _generate("qemu-aarch64", art, prompt, SMOLLM2_NEW)
    assert tokenizer.decode(tokens) == tokenizer.decode(reference), tokenizer.decode(tokens)
