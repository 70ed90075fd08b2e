"""gguf_tokenizer against transformers' AutoTokenizer.from_pretrained(dir, gguf_file=...) on the same file:
tiny byte-level BPE files (GPT-2's split as smollm, Qwen2's split) and SmolLM2's (slow)."""

import pytest

from relax_edge.frontend.gguf import GGUFError, gguf_tokenizer
from tests.frontend.gguf_models import build_decoder, transformers, write_decoder

TEXTS = ["Once upon a time", " leading space", "Hello, world! 12345 ünïcödé 漢字 🙂", "tabs\tand\n\nnewlines  x",
         "it's we'll I'M the rain in Spain", "<s>a</s>", ""]


def _check(path, texts):
    ref = transformers().AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    ours = gguf_tokenizer(path)
    for text in texts:
        want = ref(text)["input_ids"]
        got = ours.encode(text).ids
        assert got == want, text
        assert ours.decode(got, skip_special_tokens=False) == ref.decode(want, skip_special_tokens=False)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tiny_vocabularies_encode_as_transformers(tmp_path, arch):
    path = write_decoder(tmp_path / f"{arch}.gguf", build_decoder(arch), "F32", arch)
    _check(path, TEXTS)


def test_other_tokenizers_refused(tmp_path):
    import gguf
    import numpy as np
    path = tmp_path / "spm.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_tensor("x", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GGUFError, match="'tokenizer.ggml.model' is 'llama'; only 'gpt2'"):
        gguf_tokenizer(path)


@pytest.mark.slow
def test_smollm2_encodes_as_transformers():
    from tests.llm_models import smollm2_gguf
    _check(smollm2_gguf(), [*TEXTS, "<|im_start|>user\nhi<|im_end|>\n"])
