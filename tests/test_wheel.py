"""relax_edge as users install it: the sdist carries the C runtime, the board
files and the CMake files; the wheel built from that sdist, installed into a
fresh virtual environment with its base dependencies only, compiles an ONNX
model and runs it on the host and under QEMU from a folder outside the
checkout.

No network: the wheel is built with --no-build-isolation (this venv's
setuptools), and the fresh venv gets its base dependencies from this venv
without copying them. The test walks the wheel's Requires-Dist (no extras)
through the installed distributions, links each one's top-level files into a
folder, and a .pth file in the fresh venv puts that folder on sys.path. Only
the base closure is there (no onnxruntime, torch or matplotlib, and not the
editable relax_edge of this checkout). `pip install --no-index` then finds
every requirement already satisfied, or fails naming the missing one.
"""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import relax_edge
from tests.models import save_tiny_onnx

ROOT = Path(__file__).resolve().parent.parent
SDK_FILES = ("runtime_c/include/relax_edge/abi.h", "runtime_c/src/module.c", "runtime_c/tools/runner.c",
             "runtime_c/rpc/protocol.c", "runtime_c/kernels/gemm.c", "boards/host.yaml",
             "boards/qemu-aarch64.yaml", "cmake/toolchains/aarch64-linux-gnu.cmake", "CMakeLists.txt")


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_version_is_written_once():
    """pyproject.toml reads the version from relax_edge/version.py; the
    runtime's CMake project parses it from there (its installed package
    version: tests/runtime/test_cmake_package.py)."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "relax_edge.version.__version__"}
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert relax_edge.__version__ not in cmake and "version.py" in cmake


def test_checkout_resources_are_the_repository_root():
    from relax_edge import resources
    if (Path(relax_edge.__file__).parent / resources.PACKAGED).exists():
        pytest.skip("relax_edge is imported from a built package")
    assert resources.sdk_root() == ROOT
    assert (resources.runtime_dir() / "include" / "relax_edge" / "abi.h").is_file()
    assert (resources.boards_dir() / "host.yaml").is_file()
    assert (resources.toolchains_dir() / "aarch64-linux-gnu.cmake").is_file()


def _copy_checkout(into: Path) -> None:
    """The checkout without its venv, caches and build outputs: setuptools
    writes into the tree it builds, and parallel test workers must not share one."""
    skip = {".git", ".venv", "build", "out", ".pytest_cache", ".hypothesis", "__pycache__"}
    venv = Path(sys.prefix).resolve()

    def ignore(folder, names):
        return [n for n in names if n in skip or n.endswith(".egg-info") or (Path(folder) / n).resolve() == venv]
    shutil.copytree(ROOT, into, ignore=ignore, symlinks=True)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sdist")
    _copy_checkout(tmp / "checkout")
    out = tmp / "dist"
    _run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(out)!r})"],
         cwd=tmp / "checkout")
    (path,) = out.glob("relax_edge-*.tar.gz")
    return path


def test_sdist_carries_the_sdk(sdist):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    missing = [f for f in (*SDK_FILES, "setup.py", "relax_edge/codegen/c/templates/model.c.j2") if f not in names]
    assert not missing, f"{sdist.name} lacks {missing}"
    assert sdist.name == f"relax_edge-{relax_edge.__version__}.tar.gz"


def _base_closure(requires: list) -> list:
    """The installed distributions that the requirements (no extras) need, transitively."""
    seen, todo, dists = set(), list(requires), []
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(req.name)   # PackageNotFoundError: a base dependency is not installed here
        dists.append(dist)
        todo += dist.requires or []
    return dists


def _link_distributions(dists, into: Path) -> None:
    into.mkdir()
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for dist in dists:
        base = Path(dist.locate_file("")).resolve()
        assert base == site, f"{dist.metadata['Name']} is installed in {base}, not in {site}"
        tops = {Path(f).parts[0] for f in dist.files or []} - {"..", "__pycache__"}
        for top in tops:
            if (base / top).exists() and not (into / top).exists():
                (into / top).symlink_to(base / top)


@pytest.fixture(scope="module")
def wheel_venv(sdist, tmp_path_factory) -> Path:
    """A fresh venv with the wheel (built from the sdist) installed; its bin/."""
    tmp = tmp_path_factory.mktemp("wheel")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "src", filter="data")
    (src,) = (tmp / "src").iterdir()
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", tmp / "dist", src])
    (wheel,) = (tmp / "dist").glob("relax_edge-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        meta = email.message_from_bytes(zf.read(f"relax_edge-{relax_edge.__version__}.dist-info/METADATA"))
    requires = meta.get_all("Requires-Dist") or []
    assert any(Requirement(r).name == "onnx" and Requirement(r).marker is None for r in requires), requires

    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    _link_distributions(_base_closure(requires), tmp / "base-deps")
    py = venv / "bin" / "python"
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(purelib) / "base_deps.pth").write_text(f"{tmp / 'base-deps'}\n")
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-index", wheel])
    return venv / "bin"


def _site(bin_dir: Path) -> Path:
    """The venv's site-packages, relative to the venv."""
    (lib,) = (bin_dir.parent / "lib").glob("python3*")
    return lib.relative_to(bin_dir.parent) / "site-packages"


def _clean_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "RXE_"))}
    env["RXE_CACHE_DIR"] = str(tmp / "cache")   # compile the packaged runtime, not cached objects
    return env


def test_wheel_imports_its_own_files(wheel_venv, tmp_path):
    probe = ("import sys, relax_edge, relax_edge.resources as r; from importlib import metadata; "
             "print(relax_edge.__file__); print(r.sdk_root()); print(metadata.version('relax-edge')); "
             "print(sorted(m for m in ('onnxruntime', 'torch', 'matplotlib') if m in sys.modules))")
    out = _run([wheel_venv / "python", "-c", probe], cwd=tmp_path, env=_clean_env(tmp_path)).stdout.split("\n")
    assert Path(out[0]) == wheel_venv.parent / _site(wheel_venv) / "relax_edge" / "__init__.py", out
    assert Path(out[1]) == Path(out[0]).parent / "_sdk", out
    assert out[2] == relax_edge.__version__ and out[3] == "[]", out
    for extra in ("onnxruntime", "torch", "matplotlib"):   # only the base dependencies are visible
        proc = subprocess.run([wheel_venv / "python", "-c", f"import {extra}"], cwd=tmp_path,
                              env=_clean_env(tmp_path), capture_output=True)
        assert proc.returncode != 0, f"{extra} is importable in the wheel's venv"


@pytest.mark.parametrize("board", ["host", "qemu-aarch64"])
def test_wheel_compiles_and_runs(wheel_venv, tmp_path, board):
    model = tmp_path / "tiny.onnx"
    save_tiny_onnx(model)
    env = _clean_env(tmp_path)
    cli = wheel_venv / "relax-edge"
    _run([cli, "compile", model, "--board", board, "--dim", "n=1..16", "-o", "out"], cwd=tmp_path, env=env)
    board_file = Path(json.loads((tmp_path / "out" / "artifact.json").read_text())["board_file"])
    assert board_file == wheel_venv.parent / _site(wheel_venv) / "relax_edge" / "_sdk" / "boards" / f"{board}.yaml"
    assert any((tmp_path / "cache" / "runtime").iterdir()), "no runtime objects compiled from the wheel's runtime_c"
    proc = _run([cli, "run", "out", "--check", "--dim", "n=5"], cwd=tmp_path, env=env)
    assert "check against the numpy reference: PASS" in proc.stdout, proc.stdout


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_wheel_runtime_configures_with_cmake(wheel_venv, tmp_path):
    """The packaged CMakeLists.txt finds the packaged runtime sources."""
    sdk = wheel_venv.parent / _site(wheel_venv) / "relax_edge" / "_sdk"
    proc = _run(["cmake", "-S", sdk, "-B", tmp_path / "build", "-DRXE_BUILD_TESTS=ON"], cwd=tmp_path)
    assert "Generating done" in proc.stdout, proc.stdout
