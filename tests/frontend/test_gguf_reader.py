"""frontend/gguf's reader and block conversion against the `gguf` package (GGUFReader,
gguf.quants.dequantize): files written with GGUFWriter (every metadata value
type, every readable tensor type, odd shapes), and SmolLM2's file (slow)."""

import gguf
import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

from relax_edge.errors import RelaxEdgeError
from relax_edge.frontend.gguf import GGUFError, GGUFReader
from relax_edge.frontend.gguf.blocks import float_weight, packed_blocks
from relax_edge.frontend.gguf.reader import GGML_TYPES
from relax_edge.op.quant_weight import dequantize_blocks

Q = gguf.GGMLQuantizationType
TENSORS = {   # name: (numpy shape, type)
    "f32.odd": ((3, 5, 7), "F32"),
    "f32.vec": ((1,), "F32"),
    "f16.odd": ((11, 3), "F16"),
    "bf16.odd": ((2, 3, 5), "BF16"),
    "q8.rows": ((3, 64), "Q8_0"),
    "q8.one": ((32,), "Q8_0"),
    "q4_0.rows": ((5, 96), "Q4_0"),
    "q4_0.3d": ((2, 3, 32), "Q4_0"),
    "q4_1.rows": ((7, 160), "Q4_1"),
}
METADATA = {
    "t.u8": (200, gguf.GGUFValueType.UINT8), "t.i8": (-100, gguf.GGUFValueType.INT8),
    "t.u16": (60000, gguf.GGUFValueType.UINT16), "t.i16": (-30000, gguf.GGUFValueType.INT16),
    "t.u32": (4000000000, gguf.GGUFValueType.UINT32), "t.i32": (-2000000000, gguf.GGUFValueType.INT32),
    "t.u64": (2 ** 63 + 5, gguf.GGUFValueType.UINT64), "t.i64": (-2 ** 62, gguf.GGUFValueType.INT64),
    "t.f32": (1.5, gguf.GGUFValueType.FLOAT32), "t.f64": (-2.25e100, gguf.GGUFValueType.FLOAT64),
    "t.bool": (True, gguf.GGUFValueType.BOOL), "t.str": ("héllo ✓", gguf.GGUFValueType.STRING),
}


def _tensor(rng, shape, type_name):
    data = (rng.standard_normal(shape) * 3).astype(np.float32)
    data.reshape(-1)[::17] = 0.0   # some zero blocks' elements
    if type_name == "F32":
        return data, None
    if type_name == "F16":
        return data.astype(np.float16), None
    return quantize(data, getattr(Q, type_name)), getattr(Q, type_name)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "all_types.gguf"
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(str(path), "llama")
    for key, (value, vtype) in METADATA.items():
        w.add_key_value(key, value, vtype)
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, 1.25])
    w.add_array("t.strs", ["a", "", "ü"])
    for name, (shape, type_name) in TENSORS.items():
        data, raw = _tensor(rng, shape, type_name)
        w.add_tensor(name, data, raw_dtype=raw) if raw is not None else w.add_tensor(name, data)
    w.add_tensor("q6k.rows", rng.integers(0, 256, (2, 210), dtype=np.uint8), raw_dtype=Q.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_type_table_matches_gguf():
    table = {t.value: (t.name, *GGML_QUANT_SIZES[t]) for t in GGML_QUANT_SIZES}
    for tid, entry in GGML_TYPES.items():
        assert table[tid] == entry


def test_metadata_as_gguf_reads_it(written):
    ours, ref = GGUFReader(written), gguf.GGUFReader(str(written))
    assert ours.version == 3 and ours.alignment == 32
    for key, field in ref.fields.items():
        if key.startswith("GGUF."):
            continue
        got, want = ours.metadata[key], field.contents()
        if isinstance(got, np.ndarray):
            np.testing.assert_array_equal(got, want)
        elif isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-7)
        else:
            assert got == want, key
    assert ours.metadata["t.u64"] == 2 ** 63 + 5 and ours.metadata["t.strs"] == ["a", "", "ü"]
    assert set(ours.metadata) == {k for k in ref.fields if not k.startswith("GGUF.")}


def test_tensors_as_gguf_dequantizes_them(written):
    ours, ref = GGUFReader(written), gguf.GGUFReader(str(written))
    by_name = {t.name: t for t in ref.tensors}
    assert list(ours.tensors) == [t.name for t in ref.tensors]
    for name, (shape, type_name) in TENSORS.items():
        info, r = ours.tensors[name], by_name[name]
        assert info.type_name == r.tensor_type.name == type_name
        assert info.shape == shape and info.offset + ours.data_offset == r.data_offset
        want = dequantize(r.data, r.tensor_type).astype(np.float32).reshape(shape)
        data = ours.tensor_data(name)
        if type_name in ("F32", "F16", "BF16"):
            got = float_weight(data, type_name)
        else:
            q, s, z, attrs = packed_blocks(data, type_name)
            assert q.dtype == np.uint8 and s.dtype == np.float32 and q.shape[:2] == s.shape
            assert q.shape[2] == 32 * attrs["bits"] // 8
            got = dequantize_blocks(q, s, z, K=shape[-1], mode=attrs["zero"], bits=attrs["bits"],
                                    block_size=32).reshape(shape)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=name)   # bit-exact


def test_unsupported_type_refused_by_name_when_used(written):
    r = GGUFReader(written)
    assert r.tensors["q6k.rows"].type_name == "Q6_K"   # reading the file is fine
    with pytest.raises(GGUFError, match="q6k.rows: type Q6_K is not supported"):
        r.tensor_data("q6k.rows")
    with pytest.raises(GGUFError, match="no tensor 'nope'"):
        r.tensor_data("nope")


def test_errors_are_relax_edge_errors(tmp_path):
    assert issubclass(GGUFError, RelaxEdgeError)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + (1).to_bytes(4, "little") + bytes(16))
    with pytest.raises(GGUFError, match="version at byte 4: 1"):
        GGUFReader(bad)
    bad.write_bytes(b"GGUF" + (3).to_bytes(4, "big") + bytes(16))
    with pytest.raises(GGUFError, match="big-endian"):
        GGUFReader(bad)
    with pytest.raises(GGUFError, match="cannot be read"):
        GGUFReader(tmp_path / "missing.gguf")
    bad.write_bytes(b"GGUF")
    with pytest.raises(GGUFError, match="shorter than a GGUF header"):
        GGUFReader(bad)


def test_nested_array_refused():
    body = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
    key = b"k"
    body += len(key).to_bytes(8, "little") + key + (9).to_bytes(4, "little") + (9).to_bytes(4, "little")
    body += (1).to_bytes(8, "little") + bytes(16)
    with pytest.raises(GGUFError, match="nested arrays are not supported"):
        GGUFReader(body)


@pytest.mark.slow
def test_smollm2_file_as_gguf_reads_it():
    from tests.llm_models import smollm2_gguf
    path = smollm2_gguf()
    ours, ref = GGUFReader(path), gguf.GGUFReader(str(path))
    assert ours.metadata["general.architecture"] == "llama"
    assert ours.metadata["tokenizer.ggml.tokens"] == ref.fields["tokenizer.ggml.tokens"].contents()
    by_name = {t.name: t for t in ref.tensors}
    assert len(ours.tensors) == len(by_name) == 272
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "blk.3.attn_norm.weight"):
        info, r = ours.tensors[name], by_name[name]
        assert info.offset + ours.data_offset == r.data_offset
        want = dequantize(r.data, r.tensor_type).astype(np.float32)
        data = ours.tensor_data(name)
        if info.type_name == "F32":
            got = float_weight(data, "F32")
        else:
            q, s, z, attrs = packed_blocks(data, info.type_name)
            got = dequantize_blocks(q, s, z, K=info.dims[0], mode=attrs["zero"], bits=attrs["bits"], block_size=32)
        np.testing.assert_array_equal(got.view(np.uint32), want.reshape(got.shape).view(np.uint32), err_msg=name)
