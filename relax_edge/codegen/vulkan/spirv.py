"""GLSL compute shaders to SPIR-V: glslc, then spirv-val (both from the Vulkan SDK
packages, see TOOLCHAINS.md "Vulkan"), for Vulkan 1.1."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ...errors import RelaxEdgeError

__all__ = ["compile_spirv", "ShaderCompileError", "GLSLC_FLAGS", "TARGET_ENV"]

TARGET_ENV = "vulkan1.1"
GLSLC_FLAGS = ("-fshader-stage=compute", f"--target-env={TARGET_ENV}", "-O")
TIMEOUT_S = 120


class ShaderCompileError(RelaxEdgeError):
    """glslc or spirv-val rejected a shader, or is missing; the message holds their stderr."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ShaderCompileError(f"{name} is not on PATH (Debian: apt-get install glslc spirv-tools)")
    return path


def _run(argv: list, what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ShaderCompileError(f"{what}: {argv[0]} ran past {TIMEOUT_S} s") from exc
    if done.returncode != 0:
        raise ShaderCompileError(f"{what}: {Path(argv[0]).name} failed (exit {done.returncode}):\n"
                                 f"{done.stderr.strip() or done.stdout.strip()}")


def compile_spirv(glsl: str, out_dir, name: str = "kernel") -> bytes:
    """The SPIR-V module (bytes, little-endian words) of compute shader `glsl`,
    compiled by glslc and checked by spirv-val; NAME.comp and NAME.spv are
    left in `out_dir`. Errors carry the tools' stderr."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ShaderCompileError(f"shader name {name!r}: use letters, digits, '_', '.' and '-'")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src, spv = out / f"{name}.comp", out / f"{name}.spv"
    src.write_text(glsl)
    spv.unlink(missing_ok=True)
    _run([_tool("glslc"), *GLSLC_FLAGS, "-o", str(spv), str(src)], f"shader {name}")
    _run([_tool("spirv-val"), "--target-env", TARGET_ENV, str(spv)], f"shader {name}")
    data = spv.read_bytes()
    if len(data) % 4 or data[:4] != b"\x03\x02\x23\x07":
        raise ShaderCompileError(f"shader {name}: {spv} is not a SPIR-V module")
    return data
