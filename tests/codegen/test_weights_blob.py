"""WeightsBlob: constants placed 64-byte aligned, held without a copy until
the blob is joined, joined once; the bytes against numpy's own tobytes."""

import numpy as np

from relax_edge.codegen.host_program import WeightsBlob
from relax_edge.ir import Constant


def test_layout_padding_and_no_copy():
    a = Constant(np.arange(5, dtype=np.float32))                    # 20 bytes at 0
    b = Constant(np.array([[True, False], [False, True]]))           # stored as uint8, at 64
    c = Constant(np.arange(6, dtype=np.int16).reshape(2, 3).T)       # not contiguous: made so, at 128
    blob = WeightsBlob("w")
    assert [blob.add(x) for x in (a, b, c, a)] == [0, 64, 128, 0]    # a constant is stored once
    assert np.shares_memory(blob.chunks[0][1], a.data)
    raw = blob.tobytes()
    want = (a.data.tobytes() + bytes(44) + b.data.astype(np.uint8).tobytes() + bytes(60)
            + np.ascontiguousarray(c.data).tobytes())
    assert raw == want and blob.nbytes == len(raw) == 140
    assert blob.tobytes() is raw                                     # joined once
    blob.add(Constant(np.float64(2.5)))
    assert blob.tobytes()[192:] == np.float64(2.5).tobytes() and blob.nbytes == 200


def test_empty_blob_is_one_zero_byte():
    blob = WeightsBlob("w")
    assert blob.tobytes() == b"\0" and blob.nbytes == 1
