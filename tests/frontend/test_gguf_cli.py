"""`relax-edge generate` on a GGUF model: the file's own tokenizer for --prompt (against transformers'
AutoTokenizer loading the same file), its end-of-sequence token as the default stop, and the greedy text
transformers generates from the same file; the same from a directory compiled from it."""

import numpy as np
import pytest

from relax_edge.cli import main as cli
from tests.frontend.gguf_models import build_decoder, transformers, write_decoder

PROMPT = "the cat sat on the mat"
NEW = 6


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch
    path = tmp_path_factory.mktemp("gguf_cli") / "tiny-llama-Q8_0.gguf"
    write_decoder(path, build_decoder("llama", seed=3), "Q8_0", "llama")
    tf = transformers()
    tok = tf.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    ref = tf.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                  attn_implementation="eager").eval()
    ids = tok(PROMPT)["input_ids"]
    with torch.no_grad():
        t = torch.tensor([ids])
        out = ref.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=NEW, do_sample=False,
                           pad_token_id=0, eos_token_id=ref.config.eos_token_id)[0, len(ids):].tolist()
    return path, tok, ids, out


def _printed_tokens(out: str) -> tuple:
    text, stats = out.rsplit("\n  ", 1)
    return text.strip("\n"), stats


def test_generate_a_gguf_with_its_own_tokenizer(tiny, tmp_path, capsys):
    path, tok, ids, want = tiny
    assert cli(["generate", str(path), "--board", "host", "--prompt", PROMPT, "--max-new-tokens", str(NEW),
                "--max-context", "64", "--build-dir", str(tmp_path / "b")]) == 0
    text, stats = _printed_tokens(capsys.readouterr().out)
    assert text == tok.decode(want)
    assert f"prompt {len(ids)}" in stats
    # a directory compiled from the file finds the file's tokenizer too
    assert cli(["generate", str(tmp_path / "b"), "--board", "host", "--prompt", PROMPT, "--max-new-tokens",
                str(NEW)]) == 0
    assert _printed_tokens(capsys.readouterr().out)[0] == tok.decode(want)


def test_the_gguf_tokenizer_as_tokenizer_argument_and_ids(tiny, tmp_path, capsys):
    """--tokenizer FILE.gguf with --prompt-ids: the ids are those transformers' tokenizer gives."""
    path, tok, ids, want = tiny
    assert cli(["generate", str(path), "--board", "host", "--prompt-ids", ",".join(map(str, ids)),
                "--tokenizer", str(path), "--max-new-tokens", str(NEW), "--max-context", "64",
                "--build-dir", str(tmp_path / "b")]) == 0
    assert _printed_tokens(capsys.readouterr().out)[0] == tok.decode(want)
    assert np.array_equal(tok(PROMPT)["input_ids"], ids)
