"""The board's workgroup size and matmul tile (`vulkan.workgroup_size`,
`vulkan.matmul_tile`): every kernel of a build (elementwise, the row
reductions, the tiled and GEMV matmul shaders, the KV-cache append and
attention shaders; not the conv shaders, whose workgroups are part of their
tiles) is declared with
`local_size_x_id = 0` and recorded with the board's size, the module's
requirements record carries it, builds of 32 and 128 (and a 4 x 4 tile)
match numpy on lavapipe at sizes that fill no tile, and a device whose
maxComputeWorkGroupSize or maxComputeWorkGroupInvocations is below the
board's size is refused by name before any pipeline exists."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
import yaml

import relax_edge as rxe
from relax_edge import op
from relax_edge.codegen import abi
from relax_edge.codegen.vulkan import matmul
from relax_edge.deploy.host import VulkanOptions, pin_vulkan_driver
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.target import BOARDS_DIR, BoardError, load_board
from tests.vulkan import vkrt

HIDDEN, OUT = 40, 70     # neither divides a workgroup nor a matmul tile


def _board(tmp_path, **vulkan):
    """host-vulkan with its vulkan: section changed (the name kept: the host device loads it)."""
    data = yaml.safe_load((BOARDS_DIR / "host-vulkan.yaml").read_text())
    data["vulkan"].update(vulkan)
    path = tmp_path / "host-vulkan.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _model():
    """tanh(x @ w1 + b1) -> layer norm -> @ w2 -> softmax, over a symbolic row count."""
    rng = np.random.default_rng(11)
    w1 = (rng.standard_normal((HIDDEN, HIDDEN)) / 6).astype("float32")
    b1 = rng.standard_normal(HIDDEN).astype("float32")
    gamma = (1 + 0.1 * rng.standard_normal(HIDDEN)).astype("float32")
    w2 = (rng.standard_normal((HIDDEN, OUT)) / 6).astype("float32")
    n = SizeVar("n", upper=1024)
    x = Var("x", TensorType((n, HIDDEN), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(op.tanh(op.add(op.matmul(x, w1), b1)))
            h = bb.emit(op.layer_norm(h, gamma, np.zeros(HIDDEN, "float32")))
            out = bb.emit_output(op.softmax(op.matmul(h, w2), axis=-1))
        bb.ret(out)

    def reference(xv):
        h = np.tanh(xv.astype(np.float64) @ w1 + b1)
        mean = h.mean(-1, keepdims=True)
        h = (h - mean) / np.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * gamma
        z = h @ w2
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return bb.get(), reference


def _kernel_table(art) -> dict:
    """kernel symbol -> local_size_x, read from the generated C's rxe_vk_kernel_t rows."""
    text = (art.out_dir / f"{art.prefix}.c").read_text()
    table = text.split(f"{art.prefix}_vk_kernels[] = {{", 1)[1].split("};", 1)[0]
    rows = re.findall(r'\{"([^"]+)", \w+, \d+u, \d+u, \d+u, (\d+)u, \d+u, \d+u\}', table)
    return {name: int(local) for name, local in rows}


def _requirements(art) -> list:
    text = (art.out_dir / f"{art.prefix}.c").read_text()
    record = re.search(r"_vk_requirements = \{([^}]*)\}", text).group(1)
    return [int(v.strip().rstrip("u")) for v in record.split(",")]


@pytest.mark.parametrize("workgroup, tile", [(32, None), (128, None), (64, [4, 4])])
def test_the_board_workgroup_and_tile_match_numpy(vulkan_env, tmp_path, workgroup, tile):
    settings = {"workgroup_size": workgroup, **({"matmul_tile": tile} if tile else {})}
    mod, reference = _model()
    art = rxe.build(mod, board=_board(tmp_path, **settings), backend="vulkan", out_dir=tmp_path / "art", profile=False)
    table = _kernel_table(art)
    assert {matmul.TILED, matmul.GEMV} <= set(table) and len(table) >= 5
    assert set(table.values()) == {workgroup}, table
    assert _requirements(art)[2] == workgroup
    text = (art.out_dir / f"{art.prefix}.c").read_text()
    rows, cols = tile or matmul.BLOCKS[matmul.TILED]
    span = cols * workgroup   # the tiled shader's columns per workgroup, in the host's grid arithmetic
    assert f"+ {span - 1}) / {span}) * {workgroup})" in text and f"+ {rows - 1}) / {rows})" in text
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        created = m.pipelines_created()
        for n in (1, 3, 9, 70, 257):   # 1: the GEMV; the others fill no tile of 8 (or 4) rows
            x = np.random.default_rng(n).standard_normal((n, HIDDEN)).astype("float32")
            np.testing.assert_allclose(m.run(x)[0], reference(x), rtol=2e-5, atol=1e-6)
        assert m.pipelines_created() == created
        vkrt.assert_clean(m, vulkan_env)


def test_every_generated_shader_declares_the_specialization_constant():
    from relax_edge.build import optimize_module
    from relax_edge.codegen.vulkan.kernel import emit_glsl
    mod, _ = _model()
    board = load_board("host-vulkan")
    programs = optimize_module(mod, board, backend="vulkan").tensor_programs
    assert programs
    for program in programs.values():
        text, record = emit_glsl(program, 128)
        assert "local_size_x = 128, local_size_x_id = 0) in;" in text and record.local_size_x == 128
    for source, record in matmul.shaders(32, (2, 4)).values():
        assert "layout(local_size_x_id = 0) in;" in source and record.local_size_x == 32
        assert "uint L = gl_WorkGroupSize.x" in source   # the grid arithmetic follows the constant


@pytest.mark.parametrize("field", ["workgroup_size_x", "workgroup_invocations"])
def test_a_device_below_the_board_workgroup_is_refused_by_name(vulkan_env, tmp_path, field):
    mod, _ = _model()
    board = _board(tmp_path, workgroup_size=128)
    art = rxe.build(mod, board=board, backend="vulkan", out_dir=tmp_path / "art", profile=False)
    pin_vulkan_driver(load_board(board))
    lib = ctypes.CDLL(str(art.shared_library))
    init = getattr(lib, f"{art.prefix}_vk_init")
    init.argtypes, init.restype = [ctypes.POINTER(VulkanOptions), ctypes.POINTER(abi.Error)], ctypes.c_int
    context = getattr(lib, f"{art.prefix}_vk_context")
    context.restype = ctypes.c_void_p
    limits = vkrt.Limits(**{field: 64})
    options = VulkanOptions(1, -1, 0, 0, ctypes.addressof(limits), None, 0)
    err = abi.Error()
    status = init(ctypes.byref(options), ctypes.byref(err))
    assert abi.STATUS_NAMES[status] == "RXE_ERR_DEVICE"
    what = "workgroup size x" if field == "workgroup_size_x" else "workgroup invocations"
    message = err.message.decode()
    assert what in message and "128" in message and "64" in message, message
    assert not context()   # nothing is left open


@pytest.mark.parametrize("tile, fragment", [
    ([8], "must be [rows, columns] of C per invocation, two integers from 1 to 16, got [8]"),
    ([0, 8], "two integers from 1 to 16, got [0, 8]"),
    ([8, "8"], "two integers from 1 to 16, got [8, '8']"),
    ([True, 8], "two integers from 1 to 16, got [True, 8]"),
    ([16, 16], "is 16 x 16 = 256 accumulators per invocation, more than the 128"),
    ("8x8", "two integers from 1 to 16, got '8x8'"),
])
def test_a_bad_matmul_tile_is_named(tmp_path, tile, fragment):
    path = _board(tmp_path, matmul_tile=tile)
    with pytest.raises(BoardError) as info:
        load_board(path)
    assert path in str(info.value) and "field 'vulkan.matmul_tile'" in str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize("workgroup", [32, 128])
def test_the_kv_cache_shaders_take_the_board_workgroup(vulkan_env, tmp_path, workgroup):
    from tests.library.test_kv_kernels import SENTINEL, attention_f64
    from tests.vulkan.test_vk_decoder_kernels import CONTEXT, _append
    b = Builder()
    _append(b, "main", 3, 17)   # kv_append, then attention over the appended state: 17 divides no workgroup
    art = rxe.build(b.get(), board=_board(tmp_path, workgroup_size=workgroup), backend="vulkan",
                    out_dir=tmp_path / "art", name="kv", profile=False)
    table = _kernel_table(art)
    assert table["rxe_vk_kv_append_f32"] == table["rxe_vk_kv_attention_f32"] == workgroup
    rng = np.random.default_rng(workgroup)
    state = np.full((1, 3, CONTEXT, 17), SENTINEL, np.float32)
    expected, total = state.copy(), 0
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        for seq in (5, 1, CONTEXT - 6):   # ends at the context bound
            new = rng.standard_normal((1, 3, seq, 17)).astype(np.float32)
            past, total = total, total + seq
            (got,) = m.run(state, new, np.zeros(total, np.int64))
            expected[:, :, past:total] = new
            np.testing.assert_array_equal(state, expected)
            np.testing.assert_allclose(got, attention_f64(new, expected, expected, None, total, 0.5), rtol=1e-4,
                                       atol=1e-5)
        vkrt.assert_clean(m, vulkan_env)
