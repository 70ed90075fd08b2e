"""The Vulkan boards: host-vulkan's `vulkan:` section loads, a bad one is named
with the file and the field, and jetson-orin-vulkan (the Jetson over ssh with
its GPU) cross-builds an aarch64 Vulkan artifact."""

from __future__ import annotations

import shutil

import pytest
import yaml

from relax_edge.target import BOARDS_DIR, BoardError, load_board


def test_host_vulkan_names_lavapipe_and_the_workgroup_size():
    board = load_board("host-vulkan")
    assert board.transport == "local" and board.target.llvm_triple == "native"
    assert board.vulkan == {"icd": "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json", "allow_cpu": True,
                            "workgroup_size": 64, "lp_num_threads": 0}
    assert load_board("host").vulkan == {}


@pytest.mark.parametrize("section, fragment", [
    ({"icd": "x.json", "driver": "lvp"}, "vulkan: unknown field 'driver'"),
    ({"allow_cpu": "yes"}, "field 'allow_cpu' must be true or false"),
    ({"workgroup_size": 48}, "field 'vulkan.workgroup_size' must be a power of two from 1 to 1024, got 48"),
    ({"lp_num_threads": -1}, "field 'vulkan.lp_num_threads' must be 0 (the cores) or more"),
    ("lavapipe", "field 'vulkan' must be a mapping"),
])
def test_a_bad_vulkan_section_is_named(tmp_path, section, fragment):
    data = yaml.safe_load((BOARDS_DIR / "host-vulkan.yaml").read_text())
    data["vulkan"] = section
    path = tmp_path / "bad-vulkan.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(BoardError) as info:
        load_board(str(path))
    assert str(path) in str(info.value) and fragment in str(info.value)


def test_jetson_orin_vulkan_is_the_jetson_over_ssh_with_its_gpu():
    board, cpu_board = load_board("jetson-orin-vulkan"), load_board("jetson-orin")
    assert board.transport == "ssh" and board.ssh == cpu_board.ssh
    assert board.target.llvm_triple == cpu_board.target.llvm_triple == "aarch64-unknown-linux-gnu"
    assert board.target.compiler == cpu_board.target.compiler and board.target.cpu == cpu_board.target.cpu
    assert board.vulkan == {"allow_cpu": False, "workgroup_size": 128}   # the system's driver: no ICD pinned
    assert "-static" not in board.target.ldflags   # dlopen of the system's libvulkan needs the system's libc


def test_jetson_orin_vulkan_cross_builds_an_aarch64_vulkan_artifact(tmp_path):
    """A cross build only (no Jetson here): aarch64 programs linked against
    glibc 2.34 at most (JetPack 6), with the SPIR-V and the board's
    workgroup size of 128 in the kernel table."""
    import re

    import relax_edge as rxe
    from relax_edge import op
    from relax_edge.ir import Builder, SizeVar, TensorType, Var
    from relax_edge.target import toolchain_problems
    board = load_board("jetson-orin-vulkan")
    problems = toolchain_problems(board)
    if problems or not shutil.which("glslc") or not shutil.which("spirv-val"):
        pytest.skip("; ".join(problems) or "glslc / spirv-val are not installed")
    x = Var("x", TensorType((SizeVar("n", upper=4096), 16), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.softmax(op.tanh(x), axis=-1))
        bb.ret(out)
    art = rxe.build(bb.get(), board="jetson-orin-vulkan", backend="vulkan", out_dir=tmp_path, profile=False)
    assert art.backend == "vulkan" and art.board == "jetson-orin-vulkan"
    for path in (art.shared_library, art.runner, art.server):
        data = path.read_bytes()
        assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == 183, path   # EM_AARCH64
        needed = {tuple(map(int, v.split(b"."))) for v in re.findall(rb"GLIBC_(2\.\d+)", data)}
        assert needed and max(needed) <= (2, 34), (path, sorted(needed))
    assert b"/lib/ld-linux-aarch64.so.1" in art.runner.read_bytes()   # dynamically linked
    assert (0x07230203).to_bytes(4, "little") in art.shared_library.read_bytes()   # SPIR-V embedded
    text = (art.out_dir / f"{art.prefix}.c").read_text()
    table = text.split(f"{art.prefix}_vk_kernels[] = {{", 1)[1].split("};", 1)[0]
    assert set(re.findall(r"\d+u, \d+u, \d+u, (\d+)u, \d+u, \d+u\}", table)) == {"128"}
