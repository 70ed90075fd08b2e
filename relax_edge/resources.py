"""Where the SDK's non-Python files are: the C runtime (runtime_c/), the board
files (boards/), the CMake files (cmake/: toolchain files, rxe_add_model, the package config)
and the CMakeLists.txt that builds and installs the runtime.

1. In a checkout (and an editable install) they are at the repository root,
   next to the relax_edge package.
2. An installed wheel or sdist carries a copy of them inside the package, in
   relax_edge/_sdk/ (setup.py copies them there at build time), with the same
   layout as the repository root, so that `cmake -S <sdk_root()>` builds the
   runtime from an installed SDK.

The packaged copy wins when present. Paths are real directories: the
compilers read them, so a zip-imported package is refused.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .errors import RelaxEdgeError

PACKAGED = "_sdk"   # relax_edge/_sdk in a wheel
CONTENTS = ("runtime_c", "boards", "cmake", "CMakeLists.txt")   # what setup.py packages
_CHECKOUT = Path(__file__).resolve().parent.parent


def sdk_root() -> Path:
    """The folder holding runtime_c/, boards/, cmake/ and CMakeLists.txt."""
    packaged = resources.files(__package__) / PACKAGED
    if packaged.is_dir():
        if not isinstance(packaged, Path):
            raise RelaxEdgeError(f"relax_edge is installed as {packaged}, not as files on disk; "
                                 "the C compiler needs runtime_c/ as a folder: pip install it unzipped")
        return packaged.resolve()
    if (_CHECKOUT / "runtime_c").is_dir():
        return _CHECKOUT
    raise RelaxEdgeError(f"relax_edge has no C runtime: neither {Path(str(packaged))} nor "
                         f"{_CHECKOUT / 'runtime_c'} exists; reinstall relax-edge from a wheel or sdist")


def runtime_dir() -> Path:
    """runtime_c/: headers (include/), sources (src/, kernels/, rpc/) and the runner (tools/)."""
    return sdk_root() / "runtime_c"


def boards_dir() -> Path:
    """boards/: one YAML file per board."""
    return sdk_root() / "boards"


def toolchains_dir() -> Path:
    """cmake/toolchains/: one CMake toolchain file per board family."""
    return sdk_root() / "cmake" / "toolchains"
