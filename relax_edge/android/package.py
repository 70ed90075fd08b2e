"""The folder an Android app drops in: one JNI-ready shared library per ABI,
the Java class, the C header, a README and model.json.

    pkg = rxe.package(art, "com.example.model", "out/", abis=("arm64-v8a", "armeabi-v7a"))

writes

    out/jniLibs/<abi>/librxe_PREFIX.so       build_android_library: the model, the runtime and the JNI glue
    out/java/com/example/model/RelaxEdgeModel.java, RelaxEdgeException.java
    out/include/model.h, include/relax_edge/abi.h   the model's C API, for C/C++ code of the app
    out/sample-app/                          a Kotlin activity that runs the model (not built here)
    out/README.md                            the Gradle and CMake lines, the adb commands
    out/model.json                           signature, bounds, arena bytes, ABIs, threads

1. The Java package and the ABIs are checked before anything is built.
2. Everything is written into a temporary folder next to `out_dir`, then
   renamed into place; an existing `out_dir` is replaced only when it is
   empty or an earlier package (it holds model.json), never another folder.
3. Nothing here was run on a phone: model.json says so
   (`verified_on_device: false`), and so does the README.
4. A Vulkan artifact gives Vulkan libraries (arm64-v8a and x86_64, the
   ABIs with a Vulkan board): model.json's `backend` says "vulkan", and each
   library dlopens libvulkan.so when the first model is loaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import jinja2

from ..errors import RelaxEdgeError
from ..resources import runtime_dir
from ..version import __version__
from . import jni
from .library import ABIS, VULKAN_ABIS, AndroidLibrary, build_android_library, ndk_root

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("relax_edge.android", "templates"),
                          keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                          undefined=jinja2.StrictUndefined)


@dataclasses.dataclass
class Package:
    """A folder written by package()."""
    path: Path
    java_package: str
    libraries: dict          # abi -> AndroidLibrary
    model_json: dict


def check_abis(abis, backend: str = "c") -> list:
    """The ABIs asked for ("all" for every one the backend has: a Vulkan
    library is built for VULKAN_ABIS), each known, in ABIS order."""
    if isinstance(abis, str):
        abis = [abis]
    wanted = list(abis or [])
    known = list(VULKAN_ABIS) if backend == "vulkan" else list(ABIS)
    if "all" in wanted:
        return known
    unknown = [a for a in wanted if a not in ABIS]
    if unknown or not wanted:
        raise RelaxEdgeError(f"unknown Android ABI {', '.join(map(repr, unknown)) or '(none given)'}; "
                             f"choose from {', '.join(ABIS)} or all")
    without = [a for a in wanted if a not in known]
    if without:
        raise RelaxEdgeError(f"ABI {', '.join(without)}: no Vulkan library for it (no Android Vulkan board); "
                             f"a Vulkan package is built for {', '.join(known)}")
    return [a for a in ABIS if a in wanted]


def size_bounds(art, module=None) -> dict:
    """{size: [lower, upper]} of the function main's sizes (None where not
    known): from the source's --dim bounds, or the module's SizeVars."""
    sizes = art.signature["main"]["sizes"]
    bounds = {s: None for s in sizes}
    for name, value in ((art.source or {}).get("dim_bounds") or {}).items():
        if name in bounds:
            bounds[name] = list(value)
    if module is not None and "main" in module.functions:
        for param in module.functions["main"].params:
            for dim in getattr(param.type, "shape", ()) or ():
                if getattr(dim, "name", None) in bounds and bounds[dim.name] is None:
                    bounds[dim.name] = [dim.lower, dim.upper]
    return bounds


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise RelaxEdgeError(f"{out_dir}: exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / "model.json").exists():
        raise RelaxEdgeError(f"{out_dir}: a folder that is not a relax-edge package (no model.json); "
                             "choose a new or empty folder")


def _replace_folder(staged: Path, out_dir: Path) -> None:
    """Rename `staged` to `out_dir`, replacing an earlier package."""
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        os.replace(out_dir, old)
    os.replace(staged, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_description(art, java_package: str, libraries: dict, bounds: dict, class_name: str) -> dict:
    sig = art.signature["main"]
    fixed = sig.get("fixed_workspace_bytes")
    return {
        "model": art.prefix, "relax_edge_version": __version__, "function": "main",
        "backend": getattr(art, "backend", "c"),
        "library": f"lib{jni.library_name(art)}.so", "load_library": jni.library_name(art),
        "java_class": f"{java_package}.{class_name}", "java_exception": f"{java_package}.{jni.EXCEPTION_CLASS}",
        "signature": {"inputs": sig["inputs"], "outputs": sig["outputs"], "sizes": sig["sizes"]},
        "bounds": bounds,
        "arena_bytes": fixed,
        "arena": ("fixed: every size is bounded, allocated once by load()" if fixed is not None else
                  "a size is unbounded: load() sizes the arena by the first run, load(sizes) for given sizes"),
        "weights_bytes": art.weights_bytes,
        "abis": {abi: {"path": f"jniLibs/{abi}/{lib.path.name}", "api_level": lib.api_level, "threads": lib.threads,
                       "toolchain": lib.toolchain, "board": lib.board, "needed": lib.needed,
                       "exported": lib.exported,
                       "bytes": lib.path.stat().st_size, "sha256": _sha256(lib.path)}
                 for abi, lib in libraries.items()},
        "threads": min((lib.threads for lib in libraries.values()), default=1),
        "threads_note": next((lib.note for lib in libraries.values()), ""),
        "verified_on_device": False,
    }


def _templates_context(art, java_package: str, libraries: dict, bounds: dict, class_name: str) -> dict:
    ctx = jni._context(art, java_package, class_name, "main")
    ctx.update(abis=list(libraries), libraries=libraries, bounds=bounds,
               toolchains=sorted({lib.toolchain for lib in libraries.values()}),
               threads=min((lib.threads for lib in libraries.values()), default=1),
               sample_package=f"{java_package}.sample", package_path="/".join(java_package.split(".")))
    ctx["kotlin_inputs"] = [_kotlin_tensor(class_name, i) for i in ctx["inputs"]]
    return ctx


def _kotlin_tensor(class_name: str, info: dict) -> str:
    """A Kotlin expression of zeros for one input (symbolic dims at 1)."""
    dims = [d or 1 for d in info["dims"]]
    count = 1
    for d in dims:
        count *= d
    array = {"float": "FloatArray", "double": "DoubleArray", "long": "LongArray", "int": "IntArray",
             "short": "ShortArray", "byte": "ByteArray"}[jni._java_array(info["dtype"])]
    return f"{class_name}.Tensor.of({array}({count}){''.join(f', {d}L' for d in dims)})"


def package(art, java_package: str, out_dir, abis=("arm64-v8a",), *, api_level=None, module=None,
            class_name: str = jni.CLASS_NAME, quiet: bool = True) -> Package:
    """Write the Android package of `art` (its function main) into out_dir:
    jniLibs/<abi>/librxe_PREFIX.so for each of `abis` ("all": every ABI),
    the Java class `java_package`.`class_name`, include/model.h, a sample
    app, README.md and model.json; `module` is the model's IRModule when the
    artifact was built for another board and records no source model."""
    jni.check_java_package(java_package)
    wanted = check_abis(abis, getattr(art, "backend", "c"))
    if "main" not in art.signature:
        raise RelaxEdgeError(f"{art.out_dir}: the model has no function main to package")
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        glue_dir = staged / ".glue"
        (glue,) = jni.write_sources(jni.glue_sources(art, java_package, class_name), glue_dir)
        includes = [] if ndk_root() is not None else jni.jni_include_dirs(freestanding=True)
        libraries: dict = {}
        for abi in wanted:
            target = staged / "jniLibs" / abi / f"lib{jni.library_name(art)}.so"
            libraries[abi] = build_android_library(art, abi, target, extra_sources=[glue], include_dirs=includes,
                                                   exports=["JNI_OnLoad"], api_level=api_level, quiet=quiet,
                                                   module=module)
        shutil.rmtree(glue_dir)
        _write_package_files(staged, art, java_package, libraries, size_bounds(art, module), class_name)
        description = json.loads((staged / "model.json").read_text())
        _replace_folder(staged, out_dir)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    for lib in libraries.values():
        lib.path = out_dir / "jniLibs" / lib.abi / lib.path.name
    return Package(out_dir, java_package, libraries, description)


def _write_package_files(root: Path, art, java_package: str, libraries: dict, bounds: dict, class_name: str) -> None:
    java_dir = root / "java" / Path(*java_package.split("."))
    jni.write_sources(jni.java_sources(art, java_package, class_name), java_dir)
    include = root / "include"
    (include / "relax_edge").mkdir(parents=True)
    shutil.copyfile(art.header, include / "model.h")
    shutil.copyfile(runtime_dir() / "include" / "relax_edge" / "abi.h", include / "relax_edge" / "abi.h")
    ctx = _templates_context(art, java_package, libraries, bounds, class_name)
    sample = root / "sample-app"
    code = sample / "src" / "main" / "java" / Path(*ctx["sample_package"].split("."))
    files = {"README.md.j2": root / "README.md", "sample_build.gradle.kts.j2": sample / "build.gradle.kts",
             "AndroidManifest.xml.j2": sample / "src" / "main" / "AndroidManifest.xml",
             "MainActivity.kt.j2": code / "MainActivity.kt", "ModelDemo.kt.j2": code / "ModelDemo.kt"}
    for template, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_ENV.get_template(template).render(**ctx))
    description = model_description(art, java_package, libraries, bounds, class_name)
    (root / "model.json").write_text(json.dumps(description, indent=1) + "\n")


__all__ = ["Package", "package", "check_abis", "size_bounds", "AndroidLibrary"]
