"""The GGUF reader on hostile bytes: a small valid file (written with gguf.GGUFWriter) truncated at every byte,
each header / metadata / tensor-info field overwritten with extreme values, and sequences of random byte
mutations (hypothesis). Each gives a GGUFError or a file that reads (its tensors then read too, or are refused
with a GGUFError), never another exception, a hang or a huge allocation."""

import struct

import gguf
import numpy as np
import pytest
from gguf.quants import quantize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relax_edge.frontend.gguf import GGUFError, GGUFReader
from relax_edge.frontend.gguf.blocks import float_weight, packed_blocks


def _sample(path) -> bytes:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_string("general.name", "tiny")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    w.add_array("tokenizer.ggml.scores", [0.5, 0.25, 0.0])
    rng = np.random.default_rng(0)
    w.add_tensor("f32", rng.standard_normal((2, 3)).astype(np.float32))
    w.add_tensor("q8", quantize(rng.standard_normal((2, 32)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("q41", quantize(rng.standard_normal((1, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q4_1),
                 raw_dtype=gguf.GGMLQuantizationType.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return _sample(tmp_path_factory.mktemp("fuzz") / "s.gguf")


def _read_all(data: bytes) -> None:
    """Parse and use every tensor; only GGUFError may escape."""
    try:
        r = GGUFReader(data)
        for name, info in r.tensors.items():
            raw = r.tensor_data(name)
            if info.type_name in ("Q8_0", "Q4_0", "Q4_1"):
                packed_blocks(raw, info.type_name, name)
            else:
                float_weight(raw, info.type_name, name)
    except GGUFError:
        pass


def _fields(path) -> list[tuple[int, int]]:
    """(offset, width) of every 4- or 8-byte integer field: header, key/values and tensor infos (as gguf parses)."""
    ref = gguf.GGUFReader(str(path))
    out = []
    for field in [*ref.fields.values(), *(t.field for t in ref.tensors)]:
        pos = field.offset
        for part in field.parts:
            if part.nbytes in (4, 8) and part.dtype.kind in "ui":
                out.append((pos, part.nbytes))
            pos += part.nbytes
    return out


def test_the_sample_reads(sample):
    r = GGUFReader(sample)
    assert set(r.tensors) == {"f32", "q8", "q41"} and r.metadata["tokenizer.ggml.tokens"] == ["a", "b", "c"]
    _read_all(sample)


def test_every_truncation(sample):
    full = GGUFReader(sample)
    end = full.data_offset + max(t.offset + t.nbytes for t in full.tensors.values())   # the writer pads after it
    assert end <= len(sample)
    for n in range(end):
        with pytest.raises(GGUFError):
            r = GGUFReader(sample[:n])
            for name in r.tensors:   # a cut in the data: only the tensors' bounds can catch it
                r.tensor_data(name)


@pytest.mark.parametrize("value", [0, 1, 2 ** 31, 2 ** 32 - 1, 2 ** 63, 2 ** 64 - 1])
def test_every_field_overwritten(sample, tmp_path, value):
    path = tmp_path / "s.gguf"
    path.write_bytes(sample)
    fields = _fields(path)
    assert len(fields) > 20
    for offset, width in fields:
        if value >= 1 << (8 * width):
            continue
        data = bytearray(sample)
        data[offset:offset + width] = value.to_bytes(width, "little")
        _read_all(bytes(data))


def test_tensor_info_fields_overwritten(sample):
    r = GGUFReader(sample)
    start = sample.index(b"f32", 24) - 8   # the first tensor info: name length, name, n_dims, dims, type, offset
    for delta in range(0, 8 + 3 + 4 + 16 + 4 + 8, 4):
        for value in (0, 3, 5, 9, 255, 2 ** 32 - 1):
            data = bytearray(sample)
            data[start + delta:start + delta + 4] = struct.pack("<I", value)
            _read_all(bytes(data))
    assert r.tensors["f32"].dims == (3, 2)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 255)), min_size=1, max_size=8),
       st.integers(0, 10 ** 6))
def test_mutation_sequences(sample, mutations, cut):
    data = bytearray(sample)
    for pos, byte in mutations:
        data[pos % len(data)] = byte
    _read_all(bytes(data[:len(data) - cut % 64]))


def _tiny_llama(path) -> bytes:
    """A one-layer llama GGUF of random weights (no transformers needed): what from_gguf reads."""
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(str(path), "llama")
    for add, value in ((w.add_block_count, 1), (w.add_context_length, 16), (w.add_embedding_length, 32),
                       (w.add_feed_forward_length, 32), (w.add_head_count, 2), (w.add_head_count_kv, 1),
                       (w.add_layer_norm_rms_eps, 1e-5), (w.add_rope_freq_base, 10000.0)):
        add(value)
    q8 = gguf.GGMLQuantizationType.Q8_0
    shapes = {"token_embd.weight": (64, 32), "output_norm.weight": (32,), "blk.0.attn_norm.weight": (32,),
              "blk.0.ffn_norm.weight": (32,), "blk.0.attn_q.weight": (32, 32), "blk.0.attn_k.weight": (16, 32),
              "blk.0.attn_v.weight": (16, 32), "blk.0.attn_output.weight": (32, 32),
              "blk.0.ffn_gate.weight": (32, 32), "blk.0.ffn_up.weight": (32, 32), "blk.0.ffn_down.weight": (32, 32)}
    for name, shape in shapes.items():
        data = rng.standard_normal(shape).astype(np.float32)
        w.add_tensor(name, quantize(data, q8), raw_dtype=q8) if len(shape) == 2 else w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def test_from_gguf_on_overwritten_fields(tmp_path):
    """Every integer field of a model file overwritten: from_gguf builds the model or raises GGUFError."""
    from relax_edge.frontend.gguf import from_gguf
    path = tmp_path / "m.gguf"
    sample = _tiny_llama(path)
    assert "step" in from_gguf(GGUFReader(sample)).functions
    built = 0
    for offset, width in _fields(path):
        for value in (0, 3, 2 ** 31 + 1):
            data = bytearray(sample)
            data[offset:offset + width] = value.to_bytes(width, "little")
            try:
                from_gguf(GGUFReader(bytes(data)), max_context=8)
                built += 1
            except GGUFError:
                pass
    assert built > 0   # some overwrites (an offset-free field, a value equal to the old one) still build
