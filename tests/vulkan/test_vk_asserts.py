"""A failed device-side check (a tensor program's Assert, e.g. take's index
bound) on the host-vulkan board (lavapipe) fails the run with the C
backend's named error, instead of leaving output rows unwritten; the same
loaded model runs correctly afterwards. References: numpy indexing and the
C backend's error text for the same input."""

from __future__ import annotations

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.codegen.vulkan import compile_spirv
from relax_edge.codegen.vulkan.kernel import STATUS_WORDS, emit_glsl
from relax_edge.op.registry import make_call
from relax_edge.transform.legalize import legalize
from tests.vulkan import vkrt
from tests.vulkan.glsl_cases import bounded_module


def _embedding():
    """take(table, ids) along axis 0: a 10-row embedding table of width 3, n ids."""
    return bounded_module([(10, 3), ("n",)], ["float32", "int64"],
                         lambda x, i: make_call("take", [x, i], {"axis": 0}))


def test_record_counts_the_status_binding():
    """A program with an Assert declares its status block after its parameters
    and the record counts it; one without keeps its parameters only."""
    mod = legalize(_embedding())
    programs = list(mod.tensor_programs.values())
    assert programs
    for p in programs:
        glsl, record = emit_glsl(p)
        nb = len(p.params)
        assert record.status == bool(record.asserts)
        assert record.num_buffers == nb + (1 if record.status else 0)
        assert record.push_words == 2 + record.num_buffers + len(p.size_params)
        if record.status:
            assert f"binding = {nb}) buffer B{nb} {{ uint v[]; }}" in glsl
            assert "atomicOr(" in glsl and "atomicCompSwap(" in glsl
    assert any(emit_glsl(p)[1].status for p in programs)
    assert STATUS_WORDS >= 4


def test_the_kernel_sets_its_status_block(open_vk, tmp_path):
    """The take kernel alone: good ids leave the block zero and gather numpy's
    rows; a bad id sets bit 0, the claim, assert 0 and the message's values
    (the id, then the table's rows twice: "index {} out of range [-{}, {})")."""
    (p,) = [q for q in legalize(_embedding()).tensor_programs.values() if emit_glsl(q)[1].status]
    glsl, record = emit_glsl(p)
    words = np.frombuffer(compile_spirv(glsl, tmp_path, p.name), dtype=np.uint32)
    ctx = open_vk()
    ctx.load([vkrt.kernel(p.name, words, record.num_buffers, len(p.size_params), record.local_size_x)])
    table = np.arange(30, dtype=np.float32).reshape(10, 3)
    for ids, bad in ((np.array([3, -1, 0, 9], np.int64), None), (np.array([1, 2, 12, 5], np.int64), 12),
                     (np.array([-30, 4], np.int64), -30)):
        n = len(ids)
        x, i, out = ctx.buffer(table.nbytes), ctx.buffer(ids.nbytes), ctx.buffer(n * 3 * 4)
        status = ctx.buffer(4 * STATUS_WORDS + 8)
        ctx.write(x, table)
        ctx.write(i, ids)
        ctx.write(status, np.full(STATUS_WORDS + 2, 0, np.uint32))
        ctx.write(status, np.array([7], np.uint32), 4 * STATUS_WORDS + 4)   # past the block: stays
        ctx.begin()
        ctx.dispatch(0, [(x, 0, table.nbytes), (i, 0, ids.nbytes), (out, 0, n * 12), (status, 4, 4 * STATUS_WORDS)],
                     [n], n * 3)
        ctx.submit()
        block = ctx.read(status, STATUS_WORDS + 2, np.uint32)
        assert block[0] == 0 and block[-1] == 7
        if bad is None:
            assert not block[1:-1].any()
            np.testing.assert_array_equal(ctx.read(out, n * 3).reshape(n, 3), table[ids])
        else:
            assert list(block[1:4]) == [1, 1, 0]
            assert list(block[4:7].view(np.int32)) == [bad, 10, 10]


def test_out_of_range_id_is_the_c_backends_error_then_good_ids_run(vulkan_env, tmp_path):
    table = np.random.default_rng(0).standard_normal((10, 3)).astype("float32")
    mod = _embedding()
    c_loaded = rxe.connect("host").load(rxe.build(mod, board="host", out_dir=tmp_path / "c", name="emb_c",
                                                  profile=False))
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path / "vk", name="emb_vk", profile=False)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        for bad in (10, -11, 1000):
            ids = np.array([0, 4, bad, 9, 2], np.int64)
            with pytest.raises(rxe.RuntimeCheckError) as c_err:
                c_loaded.run(table, ids)
            text = str(c_err.value)
            assert "RXE_ERR_INDEX" in text and str(bad) in text
            message = text[text.index("RXE_ERR_INDEX"):]
            with pytest.raises(rxe.RuntimeCheckError) as vk_err:
                m.run(table, ids)
            assert message in str(vk_err.value)
            good = np.array([0, 4, 9, -1, 2, 7, 7], np.int64)
            (y,) = m.run(table, good)
            np.testing.assert_array_equal(y, table[good])
        count, first = m.validation_messages()
        if vulkan_env:
            assert count == 0, first
