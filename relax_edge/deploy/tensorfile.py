"""The tensor file format the device runner reads and writes (.rxt).

"RXT1", uint32 count, then per tensor: uint8 dtype code, uint8 bits,
uint16 ndim, int64 dims[ndim], the data; little-endian, compact row-major.
See runtime_c/tools/runner.c.
"""

from __future__ import annotations

import struct

import numpy as np

from ..codegen import abi
from ..errors import RelaxEdgeError

_BY_CODE = {(code, bits): name for name, (code, bits, _) in abi.DTYPES.items()}


def encode(arrays) -> bytes:
    parts = [b"RXT1", struct.pack("<I", len(arrays))]
    for a in arrays:
        a = np.ascontiguousarray(a).reshape(np.shape(a))  # ascontiguousarray makes 0-d 1-d
        name = "bool" if a.dtype == np.bool_ else a.dtype.name
        if name not in abi.DTYPES:
            raise RelaxEdgeError(f"dtype {name} cannot be sent to a device")
        code, bits, _ = abi.DTYPES[name]
        parts.append(struct.pack("<BBH", code, bits, a.ndim))
        parts.append(struct.pack(f"<{a.ndim}q", *a.shape))
        parts.append(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    return b"".join(parts)


def decode(data: bytes) -> list:
    if data[:4] != b"RXT1":
        raise RelaxEdgeError("not a relax_edge tensor file (bad magic)")
    try:
        return _decode(data)
    except (struct.error, ValueError):
        raise RelaxEdgeError(f"tensor file of {len(data)} bytes is truncated or corrupt") from None


def _decode(data: bytes) -> list:
    (count,), pos, out = struct.unpack_from("<I", data, 4), 8, []
    for _ in range(count):
        code, bits, ndim = struct.unpack_from("<BBH", data, pos)
        pos += 4
        shape = struct.unpack_from(f"<{ndim}q", data, pos)
        pos += 8 * ndim
        name = _BY_CODE.get((code, bits))
        if name is None:
            raise RelaxEdgeError(f"tensor file: unknown dtype code {code} bits {bits}")
        dtype = np.dtype(np.bool_ if name == "bool" else name).newbyteorder("<")
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        out.append(np.frombuffer(data, dtype=dtype, count=n, offset=pos).reshape(shape).astype(dtype.newbyteorder("=")))
        pos += n * dtype.itemsize
    return out
