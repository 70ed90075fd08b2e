"""The Android library runs: the very object files linked into the
arm64-v8a and armeabi-v7a .so (the model, its weights and the runtime,
compiled for the Android triples) are linked again with the runner
(runtime_c/tools/runner.c, built by the glibc cross gcc) into a static
executable, and that launcher runs under qemu-aarch64 and qemu-arm against
ONNX Runtime: BERT at two sequence lengths and MobileNetV2.

On armeabi-v7a the objects use Android's softfp convention and the launcher
glibc's hard-float one: no float crosses between them (the runner passes
only pointers and integers to the model and the runtime), so ld.bfd links
the two with --no-warn-mismatch."""

import dataclasses
import shutil
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from relax_edge.android.library import build_android_library
from relax_edge.toolchain import RUNNER_SOURCE, RUNTIME_DIR
from tests.onnx_models import get_model

pytestmark = pytest.mark.skipif(not (shutil.which("clang") and shutil.which("ld.lld")),
                                reason="needs Debian's clang and lld (scripts/setup.sh)")

# ABI -> (the QEMU board whose emulator runs the launcher, the glibc cross gcc, its link flags)
LAUNCHERS = {"arm64-v8a": ("qemu-aarch64", "aarch64-linux-gnu-gcc", []),
             "armeabi-v7a": ("qemu-armv7", "arm-linux-gnueabihf-gcc", ["-Wl,--no-warn-mismatch"])}
MODELS = {"bert": {"dim_bounds": {"seq": 16}}, "mobilenet_v2": {}}


def link_launcher(lib, prefix: str, abi: str, out) -> None:
    """The runner around exactly the library's objects, static against glibc."""
    _, gcc, ldflags = LAUNCHERS[abi]
    runner_obj = out.with_suffix(".o")
    cflags = ["-std=c99", "-O2", f"-I{RUNTIME_DIR / 'include'}", f"-DRXE_MODULE={prefix}_module"]
    if abi == "armeabi-v7a":
        cflags += ["-march=armv7-a", "-mfpu=neon", "-mfloat-abi=hard"]
    objects = [runner_obj]
    commands = [[gcc, *cflags, "-c", RUNNER_SOURCE, "-o", runner_obj]]
    if abi == "arm64-v8a":
        # The 64-bit objects read their stack canary from bionic's TLS slot 5 (thread pointer + 0x28). In this
        # static glibc program that address is the start of the first object's TLS block, so the launcher owns it.
        slots = out.with_name(out.name + "_tls_slots.c")
        slots.write_text("__thread unsigned long rxe_test_bionic_tls_slots[8] = {0, 0, 0, 0x5f2e3c9a17d4b86eUL};\n")
        objects.insert(0, slots.with_suffix(".o"))
        commands.append([gcc, "-O2", "-c", slots, "-o", objects[0]])
    commands.append([gcc, "-static", *ldflags, "-o", out, *objects, *lib.objects, "-lm"])
    for cmd in commands:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_android_objects_run_under_qemu(model, tmp_path):
    path, spec = get_model(model)
    mod = rxe.from_onnx(str(path), **MODELS[model])
    art = rxe.build(mod, board="host", out_dir=tmp_path / "host", name=model, profile=False)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sizes = [{d: pair[k] for d, pair in spec["dynamic"].items()} for k in (0, 1)] if spec["dynamic"] else [{}]
    feeds = [spec["make_inputs"](seed=k, **s) for k, s in enumerate(sizes)]
    references = [session.run(None, f) for f in feeds]
    for abi, (board, _, _) in LAUNCHERS.items():
        lib = build_android_library(art, abi, tmp_path / abi / f"lib{model}.so", module=mod)
        assert lib.abi == abi and lib.objects
        launcher = tmp_path / abi / f"{model}_launcher"
        link_launcher(lib, art.prefix, abi, launcher)
        on_board = dataclasses.replace(art, board=board, runner=launcher, server=None, shared_library=None)
        with rxe.connect(board) as dev:
            loaded = dev.load(on_board)
            results = [loaded.run(*f.values()) for f in feeds]
        for got, want, size in zip(results, references, sizes):
            assert [o.shape for o in got] == [r.shape for r in want], (abi, size)
            for name, ours, ref in zip(spec["outputs"], got, want):
                np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5, err_msg=f"{abi} {size} {name}")
