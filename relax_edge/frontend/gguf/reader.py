"""A GGUF reader that treats the file as hostile input.

GGUF (llama.cpp's model file, versions 2 and 3, little-endian) is

    magic "GGUF", version u32, tensor_count u64, kv_count u64,
    kv_count x (key string, value type u32, value),
    tensor_count x (name string, n_dims u32, n_dims x dim u64, ggml type u32, offset u64),
    padding to general.alignment (default 32), then the tensor data,

a string being a u64 length and that many UTF-8 bytes, an array a u32
element type, a u64 count and the elements.

1. Every count, length, dimension and offset is checked against the bytes
   left in the file (and fixed limits: rank <= 4, no nested arrays, a
   power-of-two alignment) before anything is allocated, so a bad file can
   neither allocate more than a small multiple of its size nor loop long.
   Each problem is a `GGUFError` naming the field and its byte offset.
2. The file is memory-mapped; tensor data is read only when asked for
   (`tensor_data`), as a view of the map.
3. The reader knows every ggml type's block size and bytes (so any file's
   layout is checked), but only F32, F16, BF16, Q8_0, Q4_0 and Q4_1 tensors
   can be read; any other type is refused by name when its tensor is used.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct

import numpy as np

from ...errors import RelaxEdgeError

__all__ = ["GGUFError", "GGUFReader", "TensorInfo", "GGML_TYPES", "READABLE_TYPES"]


class GGUFError(RelaxEdgeError):
    """A GGUF file that is malformed or uses what is not supported; the message names the field and offset."""


# ggml type id -> (name, elements per block, bytes per block)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}
READABLE_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")

# metadata value type id -> (name, struct format or None for string / array)
_VALUE_TYPES = {
    0: ("UINT8", "<B"), 1: ("INT8", "<b"), 2: ("UINT16", "<H"), 3: ("INT16", "<h"), 4: ("UINT32", "<I"),
    5: ("INT32", "<i"), 6: ("FLOAT32", "<f"), 7: ("BOOL", "<?"), 8: ("STRING", None), 9: ("ARRAY", None),
    10: ("UINT64", "<Q"), 11: ("INT64", "<q"), 12: ("FLOAT64", "<d"),
}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8",
          12: "<f8"}
MAX_DIMS = 4
MAX_NAME = 1 << 16   # the longest key or tensor name
_MIN_KV = 8 + 4 + 1            # an empty key, its type and a one-byte value
_MIN_TENSOR = 8 + 4 + 8 + 4 + 8   # an empty name, rank 1, one dim, type, offset


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One tensor: `dims` in GGUF's order (dims[0] varies fastest), its ggml type name, and its bytes at
    `offset` from the start of the data section."""
    name: str
    dims: tuple
    type_name: str
    offset: int
    nbytes: int

    @property
    def shape(self) -> tuple:
        """The numpy (row-major) shape: the dims reversed."""
        return tuple(reversed(self.dims))


class _Cursor:
    def __init__(self, buf, size: int):
        self.buf, self.size, self.pos = buf, size, 0

    def left(self) -> int:
        return self.size - self.pos

    def take(self, n: int, field: str) -> memoryview:
        if n < 0 or n > self.left():
            raise GGUFError(f"{field} at byte {self.pos}: needs {n} bytes, the file has {self.left()} left")
        view = memoryview(self.buf)[self.pos:self.pos + n]
        self.pos += n
        return view

    def scalar(self, fmt: str, field: str):
        at = self.pos
        value = struct.unpack(fmt, self.take(struct.calcsize(fmt), field))[0]
        return value, at

    def u32(self, field):
        return self.scalar("<I", field)

    def u64(self, field):
        return self.scalar("<Q", field)

    def string(self, field: str, limit: int | None = None) -> str:
        n, at = self.u64(f"{field} length")
        if n > self.left() or (limit is not None and n > limit):
            raise GGUFError(f"{field} length at byte {at}: {n} bytes, more than the {min(self.left(), limit or n)} "
                            "allowed there")
        raw = self.take(n, field)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as err:
            raise GGUFError(f"{field} at byte {at + 8}: not UTF-8 ({err.reason} at {err.start})") from None


class GGUFReader:
    """The header, metadata and tensor table of a GGUF file (a path, or bytes for tests); tensors on demand.

    `metadata`: {key: value}, a value being an int, float, bool, str, a list of str, or a numpy array of
    numbers. `tensors`: {name: TensorInfo} in file order. `version`, `alignment`, `data_offset`.
    """

    def __init__(self, source):
        self.path = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.buf = bytes(source)
        else:
            self.path = os.fspath(source)
            try:
                with open(self.path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size < 24:
                        raise GGUFError(f"{self.path}: {size} bytes, shorter than a GGUF header (24 bytes)")
                    self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except OSError as err:
                raise GGUFError(f"{self.path}: cannot be read ({err.strerror or err})") from None
        self.size = len(self.buf)
        self.metadata: dict = {}
        self.tensors: dict[str, TensorInfo] = {}
        self._parse(_Cursor(self.buf, self.size))

    def __repr__(self):
        return f"GGUFReader({self.path or f'<{self.size} bytes>'}, v{self.version}, {len(self.tensors)} tensors)"

    # ---- parsing -----------------------------------------------------------------
    def _parse(self, c: _Cursor) -> None:
        magic = bytes(c.take(4, "magic"))
        if magic != b"GGUF":
            raise GGUFError(f"magic at byte 0: {magic!r}, not b'GGUF' (not a GGUF file)")
        self.version, at = c.u32("version")
        if self.version not in (2, 3):
            swapped = struct.unpack(">I", struct.pack("<I", self.version))[0]
            hint = " (a big-endian file, not supported)" if swapped in (2, 3) else ""
            raise GGUFError(f"version at byte {at}: {self.version}; versions 2 and 3 are supported{hint}")
        n_tensors, at_t = c.u64("tensor_count")
        n_kv, at_kv = c.u64("kv_count")
        if n_kv * _MIN_KV > c.left():
            raise GGUFError(f"kv_count at byte {at_kv}: {n_kv} key/values cannot fit in the {c.left()} bytes left")
        for _ in range(n_kv):
            self._read_kv(c)
        if n_tensors * _MIN_TENSOR > c.left():
            raise GGUFError(f"tensor_count at byte {at_t}: {n_tensors} tensors cannot fit in the {c.left()} "
                            "bytes left")
        self._names = set()
        infos = [self._read_tensor_info(c) for _ in range(n_tensors)]
        self.alignment = self._alignment()
        self.data_offset = -(-c.pos // self.alignment) * self.alignment
        data_size = self.size - self.data_offset
        for info, at in infos:
            if info.offset % self.alignment:
                raise GGUFError(f"tensor {info.name}: offset {info.offset} at byte {at} is not a multiple of the "
                                f"alignment {self.alignment}")
            if info.offset > data_size or info.nbytes > data_size - info.offset:
                raise GGUFError(f"tensor {info.name}: offset {info.offset} at byte {at} with {info.nbytes} bytes "
                                f"runs past the end of the data ({data_size} bytes from byte {self.data_offset})")
            self.tensors[info.name] = info

    def _read_kv(self, c: _Cursor) -> None:
        at = c.pos
        key = c.string("metadata key", MAX_NAME)
        if key in self.metadata:
            raise GGUFError(f"metadata key {key!r} at byte {at}: appears twice")
        vtype, vat = c.u32(f"metadata {key!r} value type")
        self.metadata[key] = self._read_value(c, vtype, vat, f"metadata {key!r}")

    def _read_value(self, c: _Cursor, vtype: int, at: int, field: str):
        if vtype not in _VALUE_TYPES:
            raise GGUFError(f"{field}: value type {vtype} at byte {at} is not a GGUF value type")
        name, fmt = _VALUE_TYPES[vtype]
        if fmt is not None:
            return c.scalar(fmt, field)[0]
        if name == "STRING":
            return c.string(field)
        etype, eat = c.u32(f"{field} array element type")
        count, cat = c.u64(f"{field} array count")
        if etype == 9:
            raise GGUFError(f"{field}: array element type at byte {eat} is ARRAY; nested arrays are not supported")
        if etype not in _VALUE_TYPES:
            raise GGUFError(f"{field}: array element type {etype} at byte {eat} is not a GGUF value type")
        if etype == 8:
            if count * 8 > c.left():
                raise GGUFError(f"{field}: array count {count} at byte {cat}: that many strings cannot fit in the "
                                f"{c.left()} bytes left")
            return [c.string(f"{field}[{i}]") for i in range(count)]
        width = struct.calcsize(_VALUE_TYPES[etype][1])
        if count * width > c.left():
            raise GGUFError(f"{field}: array count {count} at byte {cat}: {count * width} bytes, more than the "
                            f"{c.left()} left")
        arr = np.frombuffer(c.take(count * width, field), dtype=_NUMPY[etype]).copy()
        return arr.astype(bool) if etype == 7 else arr

    def _read_tensor_info(self, c: _Cursor):
        at = c.pos
        name = c.string("tensor name", MAX_NAME)
        field = f"tensor {name}"
        if name in self._names:
            raise GGUFError(f"{field} at byte {at}: the name appears twice")
        self._names.add(name)
        n_dims, dat = c.u32(f"{field} n_dims")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(f"{field}: n_dims {n_dims} at byte {dat}; a tensor has 1 to {MAX_DIMS} dims")
        dims = []
        for axis in range(n_dims):
            d, dim_at = c.u64(f"{field} dim {axis}")
            if d < 1 or d > self.size * 8:
                raise GGUFError(f"{field}: dim {axis} is {d} at byte {dim_at}; it must be 1 to {self.size * 8} "
                                "(no tensor larger than the file)")
            dims.append(d)
        tid, tat = c.u32(f"{field} type")
        if tid not in GGML_TYPES:
            raise GGUFError(f"{field}: type {tid} at byte {tat} is not a ggml type")
        type_name, block, block_bytes = GGML_TYPES[tid]
        if dims[0] % block:
            raise GGUFError(f"{field}: dim 0 is {dims[0]}, not a multiple of {type_name}'s block of {block}")
        count = 1
        for d in dims:
            count *= d
        nbytes = count // block * block_bytes
        offset, oat = c.u64(f"{field} offset")
        return TensorInfo(name, tuple(dims), type_name, offset, nbytes), oat

    def _alignment(self) -> int:
        value = self.metadata.get("general.alignment", 32)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1) \
                or value > 1 << 16:
            raise GGUFError(f"metadata 'general.alignment' is {value!r}; it must be a power of two up to 65536")
        return value

    # ---- tensors -----------------------------------------------------------------
    def tensor(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise GGUFError(f"the file has no tensor {name!r}")
        return self.tensors[name]

    def tensor_data(self, name: str) -> np.ndarray:
        """A tensor's data, a read-only view of the file: F32 / F16 / BF16 as float32 / float16 / uint16 in the
        numpy shape; block types as uint8 (rows, blocks per row, bytes per block)."""
        info = self.tensor(name)
        if info.type_name not in READABLE_TYPES:
            raise GGUFError(f"tensor {name}: type {info.type_name} is not supported (supported: "
                            f"{', '.join(READABLE_TYPES)})")
        start = self.data_offset + info.offset
        raw = np.frombuffer(self.buf, dtype=np.uint8, count=info.nbytes, offset=start)
        if info.type_name in ("F32", "F16", "BF16"):
            dtype = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}[info.type_name]
            return raw.view(dtype).reshape(info.shape)
        _, block, block_bytes = next(t for t in GGML_TYPES.values() if t[0] == info.type_name)
        rows = int(np.prod(info.shape[:-1], dtype=np.int64)) if len(info.dims) > 1 else 1
        return raw.reshape(rows, info.dims[0] // block, block_bytes)
