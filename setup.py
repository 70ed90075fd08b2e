"""Packages the SDK's non-Python files into the wheel.

runtime_c/, boards/, cmake/ and CMakeLists.txt live at the
repository root (and at the root of the sdist, see MANIFEST.in). build_py
copies them into relax_edge/_sdk/ of the built package, where
relax_edge/resources.py finds them at run time. An editable install copies
nothing: resources.py finds them in the checkout.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SDK_FILES = ("runtime_c", "boards", "cmake", "CMakeLists.txt")   # relax_edge/resources.py CONTENTS
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.o", "*.a", "*.so")


class build_py_with_sdk(build_py):
    """build_py, then copy SDK_FILES into <build_lib>/relax_edge/_sdk."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "relax_edge" / "_sdk"
        if target.exists():
            shutil.rmtree(target)   # no stale files from an earlier build
        for name in SDK_FILES:
            src, dst = ROOT / name, target / name
            if not src.exists():
                raise FileNotFoundError(f"{src}: missing from the source tree (see MANIFEST.in)")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, ignore=SKIPPED)
            else:
                shutil.copy2(src, dst)


setup(cmdclass={"build_py": build_py_with_sdk})
