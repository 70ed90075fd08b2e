"""The KV-cache kernels (runtime_c/kernels/attention.c) through compiled
graphs: kv_append and kv_attention (relax_edge/op/kv_cache.py) in small
functions with symbolic seq and kv_len, all in ONE module built once per
backend (host, C and LLVM; every function is an entry), each function run at
several sizes against numpy written here from the definition:

    attention(q, K, V, mask)[h, i] = softmax_j(q[h, i] . K[h // g, j] * scale + mask[h, i, j]) @ V[h // g, :]
    over j < kv_len, g = heads / kv_heads (grouped-query attention), the mask broadcast over heads and rows,

computed in float64. Heads / KV heads 1/1, 4/2, 9/3; head_dim 16, 64 and 17;
kv_len 1, a few and max_context; seq 1 and several; masks per row, per
head, one row for all, with -3.4e38 entries, and none. kv_append writes
positions [total - seq, total) of the caller's state in place and nothing
else; past the bound it is an RXE_ERR_BOUND.
"""

import ctypes
import zlib

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.op import make_call

MAX_CONTEXT = 32
MASKED = np.float32(-3.4e38)
SENTINEL = np.float32(1234.5)
HEADS = [(1, 1), (4, 2), (9, 3)]
DIMS = [16, 64, 17]
KV_LENS = [1, 5, MAX_CONTEXT]
SEQS = [1, 3, 7]
# the mask's (heads, rows) axes: "rows" (1, seq) as transformers' causal masks, "heads" (heads, seq),
# "one" (1, 1), "heads_one" (heads, 1), or no mask
MASKS = ["rows", "heads", "one", "heads_one", None]


def attention_f64(q, k, v, mask, kv_len, scale):
    """The definition above, in float64, from the full state arrays."""
    heads, kv_heads = q.shape[1], k.shape[1]
    group = heads // kv_heads
    out = np.zeros(q.shape, np.float64)
    for h in range(heads):
        kh = k[0, h // group, :kv_len].astype(np.float64)
        vh = v[0, h // group, :kv_len].astype(np.float64)
        for i in range(q.shape[2]):
            s = kh @ q[0, h, i].astype(np.float64) * scale
            if mask is not None:
                s = s + mask[0, h % mask.shape[1], i % mask.shape[2]].astype(np.float64)
            p = np.exp(s - s.max())
            out[0, h, i] = (p / p.sum()) @ vh
    return out


# the functions --------------------------------------------------------------------------------
def _attention_function(b, name, heads, kv_heads, dim, mask, max_context=MAX_CONTEXT):
    seq, kv_len = SizeVar("seq"), SizeVar("kv_len")
    q = Var("q", TensorType((1, heads, seq, dim), "float32"))
    k = Var("k", TensorType((1, kv_heads, max_context, dim), "float32"))
    v = Var("v", TensorType((1, kv_heads, max_context, dim), "float32"))
    if mask is None:   # kv_len bound from an int64 input of kv_len elements
        extra = Var("lens", TensorType((kv_len,), "int64"))
    else:
        mh = heads if mask.startswith("heads") else 1
        extra = Var("mask", TensorType((1, mh, 1 if mask.endswith("one") else seq, kv_len), "float32"))
    scale = 1.0 / np.sqrt(dim)
    with b.function(name, [q, k, v, extra], {"entry": True}):
        args = [q, k, v] + ([extra] if mask is not None else [])
        b.ret(b.emit(make_call("kv_attention", args, {"kv_len": kv_len, "scale": scale})))


def _append_function(b, name, kv_heads, dim, then_attend):
    """kv_append(state, new, offset = total - seq); returned, or read by kv_attention (one query head
    per KV head, no mask) as a decoder's step does."""
    seq, total = SizeVar("seq"), SizeVar("total", upper=None, lower=None)
    state = Var("state", TensorType((1, kv_heads, MAX_CONTEXT, dim), "float32"))
    new = Var("new", TensorType((1, kv_heads, seq, dim), "float32"))
    positions = Var("positions", TensorType((total,), "int64"))
    with b.function(name, [state, new, positions], {"entry": True}):
        appended = b.emit(make_call("kv_append", [state, new], {"offset": total - seq}))
        if then_attend:
            appended = b.emit(make_call("kv_attention", [new, appended, appended], {"kv_len": total, "scale": 0.5}))
        b.ret(appended)


ATTENTION = {f"attention_{h}_{kv}_{d}_{m}": (h, kv, d, m)
             for (h, kv) in HEADS for d in DIMS for m in (["rows"] if (h, d) != (4, 17) else MASKS)}
ATTENTION.update({f"attention_9_3_16_{m}": (9, 3, 16, m) for m in MASKS})
LONG_CONTEXT = 600   # past the split of the context at decode (RXE_KV_SPLIT_MIN positions a share)
LONG = {"long_9_3_64_rows": (9, 3, 64, "rows"), "long_4_1_17_None": (4, 1, 17, None)}
APPEND = {"append_2_16": (2, 16, False), "append_3_17": (3, 17, False), "append_attend_2_17": (2, 17, True)}


def _module():
    b = Builder()
    for name, spec in ATTENTION.items():
        _attention_function(b, name, *spec)
    for name, spec in LONG.items():
        _attention_function(b, name, *spec, max_context=LONG_CONTEXT)
    for name, spec in APPEND.items():
        _append_function(b, name, *spec)
    # main: the first attention function again (a module has a main)
    _attention_function(b, "main", 1, 1, 16, "rows")
    return b.get()


@pytest.fixture(scope="module", params=["c", "llvm"])
def kv_module(request, tmp_path_factory):
    art = rxe.build(_module(), board="host", backend=request.param, out_dir=tmp_path_factory.mktemp("kv"),
                    name="kv", quiet=True, profile=False)
    dev = rxe.connect("host")
    yield request.param, art, dev
    dev.close()


# inputs ---------------------------------------------------------------------------------------
def _mask(rng, heads, seq, kv_len, kind):
    """Random additive values with -3.4e38 entries, never a whole row masked."""
    mh = heads if kind.startswith("heads") else 1
    rows = 1 if kind.endswith("one") else seq
    m = rng.standard_normal((1, mh, rows, kv_len)).astype(np.float32)
    m[rng.random(m.shape) < 0.4] = MASKED
    m[..., rng.integers(0, kv_len)] = rng.standard_normal()   # a column open in every row
    return m


def _states(rng, kv_heads, dim):
    return [rng.standard_normal((1, kv_heads, MAX_CONTEXT, dim)).astype(np.float32) for _ in range(2)]


def test_the_module_has_every_function(kv_module):
    _, art, _ = kv_module
    assert set(art.signature) == {"main", *ATTENTION, *LONG, *APPEND}
    # the sizes are symbolic: seq and kv_len are the function's size variables
    assert art.signature["attention_9_3_17_rows"]["sizes"] == ["seq", "kv_len"]


@pytest.mark.parametrize("name", list(ATTENTION))
def test_kv_attention(kv_module, name):
    backend, art, dev = kv_module
    heads, kv_heads, dim, mask_kind = ATTENTION[name]
    m = dev.load(art, function=name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    k, v = _states(rng, kv_heads, dim)
    for kv_len in KV_LENS:
        for seq in SEQS:
            q = rng.standard_normal((1, heads, seq, dim)).astype(np.float32)
            mask = None if mask_kind is None else _mask(rng, heads, seq, kv_len, mask_kind)
            extra = np.zeros(kv_len, np.int64) if mask is None else mask
            k_before, v_before = k.copy(), v.copy()
            (got,) = m.run(q, k, v, extra)
            want = attention_f64(q, k, v, mask, kv_len, 1.0 / np.sqrt(dim))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{name} ({backend}) at kv_len {kv_len}, seq {seq}")
            assert np.array_equal(k, k_before) and np.array_equal(v, v_before), "attention wrote the state"


@pytest.mark.parametrize("name", ["attention_9_3_17_rows", "attention_4_2_17_heads", "attention_9_3_16_None"])
def test_kv_attention_on_threads(kv_module, name):
    """The runtime's pool of 3 threads (rows or KV heads split unevenly): the same numbers."""
    backend, art, dev = kv_module
    heads, kv_heads, dim, mask_kind = ATTENTION[name]
    m = dev.load(art, function=name, threads=3)
    rng = np.random.default_rng(8)
    k, v = _states(rng, kv_heads, dim)
    try:
        for kv_len, seq in ((MAX_CONTEXT, 7), (5, 1), (MAX_CONTEXT, 1)):
            q = rng.standard_normal((1, heads, seq, dim)).astype(np.float32)
            mask = None if mask_kind is None else _mask(rng, heads, seq, kv_len, mask_kind)
            (got,) = m.run(q, k, v, np.zeros(kv_len, np.int64) if mask is None else mask)
            np.testing.assert_allclose(got, attention_f64(q, k, v, mask, kv_len, 1.0 / np.sqrt(dim)), rtol=1e-4,
                                       atol=1e-5, err_msg=f"{name} ({backend}) on 3 threads, kv_len {kv_len}")
    finally:
        m.lib.rxe_threads_set_count(ctypes.c_int(1))   # the pool is the process's: back to one


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("name", list(LONG))
def test_kv_attention_split_over_the_context(kv_module, name, threads):
    """Decode rows over a long context: on several threads the context is split and the shares merged
    (flash-decoding); the numbers are those of the definition, masked shares and NaN included."""
    backend, art, dev = kv_module
    heads, kv_heads, dim, mask_kind = LONG[name]
    m = dev.load(art, function=name, threads=threads)
    rng = np.random.default_rng(threads)
    k, v = (rng.standard_normal((1, kv_heads, LONG_CONTEXT, dim)).astype(np.float32) for _ in range(2))
    try:
        for kv_len in (63, 64, 129, 450, LONG_CONTEXT):
            q = rng.standard_normal((1, heads, 1, dim)).astype(np.float32)
            mask = None if mask_kind is None else _mask(rng, heads, 1, kv_len, mask_kind)
            if mask is not None and kv_len > 200:
                mask[..., : kv_len // 2] = MASKED   # whole shares masked out
            extra = np.zeros(kv_len, np.int64) if mask is None else mask
            (got,) = m.run(q, k, v, extra)
            np.testing.assert_allclose(got, attention_f64(q, k, v, mask, kv_len, 1.0 / np.sqrt(dim)), rtol=1e-4,
                                       atol=1e-5, err_msg=f"{name} ({backend}) on {threads} threads, kv_len {kv_len}")
        if mask is not None:   # a NaN in the last share makes the rows NaN (the mask is every head's)
            mask[0, 0, 0, kv_len - 1] = np.nan
            (got,) = m.run(q, k, v, mask)
            assert np.isnan(got).all()
    finally:
        m.lib.rxe_threads_set_count(ctypes.c_int(1))   # the pool is the process's: back to one


def test_kv_attention_reads_only_kv_len_positions(kv_module):
    """Positions from kv_len on hold a sentinel (and NaN): the result is the same as without them."""
    backend, art, dev = kv_module
    m = dev.load(art, function="attention_4_2_64_rows")
    rng = np.random.default_rng(5)
    k, v = _states(rng, 2, 64)
    for kv_len in (1, 5, MAX_CONTEXT - 1):
        q = rng.standard_normal((1, 4, 3, 64)).astype(np.float32)
        mask = _mask(rng, 4, 3, kv_len, "rows")
        want = attention_f64(q, k, v, mask, kv_len, 1 / 8)
        for fill in (SENTINEL, np.nan):
            k2, v2 = k.copy(), v.copy()
            k2[:, :, kv_len:] = fill
            v2[:, :, kv_len:] = fill
            (got,) = m.run(q, k2, v2, mask)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"kv_len {kv_len}, fill {fill}")


@pytest.mark.parametrize(("name", "seq"), [("attention_9_3_17_rows", 7), ("attention_4_2_64_rows", 5),
                                         ("attention_9_3_16_rows", 1)])
def test_kv_attention_does_not_read_masked_positions(kv_module, name, seq):
    """Positions inside kv_len that the mask hides for every row hold NaN in the keys and values: the result
    is the reference's with those positions' weights zero (prefill, where many rows share each block of keys,
    and decode)."""
    backend, art, dev = kv_module
    heads, kv_heads, dim, _ = ATTENTION[name]
    m = dev.load(art, function=name)
    rng = np.random.default_rng(17)
    k, v = _states(rng, kv_heads, dim)
    kv_len = MAX_CONTEXT
    hidden = np.zeros(kv_len, bool)
    hidden[[2, 3, 9, kv_len - 1]] = True            # inside blocks that other positions keep open
    hidden[16:24] = True                             # one whole block of eight
    q = rng.standard_normal((1, heads, seq, dim)).astype(np.float32)
    mask = _mask(rng, heads, seq, kv_len, "rows")
    mask[..., hidden] = MASKED
    mask[..., 0] = 0.5                               # every row keeps a position
    want = attention_f64(q, k, v, mask, kv_len, 1.0 / np.sqrt(dim))
    k[:, :, :kv_len][:, :, hidden] = np.nan
    v[:, :, :kv_len][:, :, hidden] = np.nan
    (got,) = m.run(q, k, v, mask)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{name} ({backend}), seq {seq}")


def test_kv_attention_with_large_scores(kv_module):
    """Scores far beyond exp's range (keys times 30): the running maximum keeps the softmax finite."""
    _, art, dev = kv_module
    m = dev.load(art, function="attention_9_3_16_None")
    rng = np.random.default_rng(9)
    k, v = _states(rng, 3, 16)
    k *= 30
    q = (rng.standard_normal((1, 9, 7, 16)) * 30).astype(np.float32)
    (got,) = m.run(q, k, v, np.zeros(MAX_CONTEXT, np.int64))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, attention_f64(q, k, v, None, MAX_CONTEXT, 0.25), rtol=1e-4, atol=1e-4)


def test_kv_attention_propagates_nan(kv_module):
    _, art, dev = kv_module
    m = dev.load(art, function="attention_1_1_16_rows")
    rng = np.random.default_rng(2)
    k, v = _states(rng, 1, 16)
    k[0, 0, 2, 3] = np.nan
    q = rng.standard_normal((1, 1, 1, 16)).astype(np.float32)
    (got,) = m.run(q, k, v, np.zeros((1, 1, 1, 5), np.float32))
    assert np.isnan(attention_f64(q, k, v, None, 5, 0.25)).all()
    assert np.isnan(got).all(), got


@pytest.mark.parametrize("name", list(APPEND))
def test_kv_append_writes_the_new_positions_in_place(kv_module, name):
    backend, art, dev = kv_module
    kv_heads, dim, then_attend = APPEND[name]
    m = dev.load(art, function=name)
    rng = np.random.default_rng(11)
    state = np.full((1, kv_heads, MAX_CONTEXT, dim), SENTINEL, np.float32)
    expected = state.copy()
    total = 0
    for seq in (7, 1, 1, 3, MAX_CONTEXT - 12):   # ends exactly at the bound
        new = rng.standard_normal((1, kv_heads, seq, dim)).astype(np.float32)
        past, total = total, total + seq
        (got,) = m.run(state, new, np.zeros(total, np.int64))
        expected[:, :, past:total] = new
        what = f"{name} ({backend}) at [{past}, {total})"
        np.testing.assert_array_equal(state, expected, err_msg=f"{what}: the caller's state")
        if then_attend:
            np.testing.assert_allclose(got, attention_f64(new, expected, expected, None, total, 0.5), rtol=1e-4,
                                       atol=1e-5, err_msg=what)
    assert total == MAX_CONTEXT


def test_kv_append_result_as_the_output(kv_module):
    _, art, dev = kv_module
    m = dev.load(art, function="append_2_16")
    state = np.full((1, 2, MAX_CONTEXT, 16), SENTINEL, np.float32)
    new = np.random.default_rng(1).standard_normal((1, 2, 3, 16)).astype(np.float32)
    (got,) = m.run(state, new, np.zeros(3, np.int64))
    assert np.array_equal(state[:, :, :3], new)
    np.testing.assert_array_equal(got, state)


@pytest.mark.parametrize(("seq", "total", "begin", "end"), [(1, MAX_CONTEXT + 1, MAX_CONTEXT, MAX_CONTEXT + 1),
                                                            (5, MAX_CONTEXT + 2, MAX_CONTEXT - 3, MAX_CONTEXT + 2),
                                                            (4, 2, -2, 2)])
def test_kv_append_bound_error(kv_module, seq, total, begin, end):
    """offset + seq > max_context (or offset < 0): RXE_ERR_BOUND naming the positions and the bound, and
    the state untouched."""
    _, art, dev = kv_module
    m = dev.load(art, function="append_2_16")
    state = np.full((1, 2, MAX_CONTEXT, 16), SENTINEL, np.float32)
    new = np.ones((1, 2, seq, 16), np.float32)
    with pytest.raises(rxe.RuntimeCheckError, match=rf"RXE_ERR_BOUND: kv_append: positions \[{begin}, {end}\) are "
                                                    rf"outside the cache's context bound max_context={MAX_CONTEXT}"):
        m.run(state, new, np.zeros(total, np.int64))
    assert (state == SENTINEL).all()


def test_kv_attention_bound_error(kv_module):
    """kv_len above the state's positions: RXE_ERR_BOUND naming the bound."""
    _, art, dev = kv_module
    m = dev.load(art, function="attention_4_2_16_rows")
    k, v = _states(np.random.default_rng(0), 2, 16)
    q = np.ones((1, 4, 1, 16), np.float32)
    with pytest.raises(rxe.RuntimeCheckError, match=rf"RXE_ERR_BOUND: .*{MAX_CONTEXT + 1}.*max_context={MAX_CONTEXT}"):
        m.run(q, k, v, np.zeros((1, 1, 1, MAX_CONTEXT + 1), np.float32))
