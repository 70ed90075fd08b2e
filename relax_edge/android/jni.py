"""The JNI glue and the Java class of a built model.

    sources = glue_sources(art, "com.example.model")    # {"rxe_jni_PREFIX.c": C text}
    java = java_sources(art, "com.example.model")       # {"RelaxEdgeModel.java": ..., "RelaxEdgeException.java": ...}
    so = build_host_library(art, "com.example.model", "build/jni")   # librxe_PREFIX.so for a desktop JVM

1. The C glue (templates/jni_glue.c.j2) implements the natives of
   RelaxEdgeModel over the artifact's entry table (PREFIX_module); JNI_OnLoad
   registers them with RegisterNatives, so JNI_OnLoad is its only export.
   It calls malloc and free, nothing else of libc, and compiles against the
   JDK's jni.h (or the NDK's); without libc headers (Android without an NDK)
   runtime_c/android/include stands in for the <stdio.h> jni.h includes
   (and does not use), as it does for the runtime's Vulkan module. For a Vulkan artifact the first load() also opens the
   device (PREFIX_vk_init: its failure, RXE_ERR_NO_VULKAN on a device
   without Vulkan, is load()'s exception) and the last close() releases it.
2. The Java class (templates/RelaxEdgeModel.java.j2) carries the signature
   as constants and documents the API: load() / load(sizes) allocate the
   arena once in native code, run(...) takes float[] (shapes inferred),
   shapes plus float[] or direct ByteBuffers, or Tensors of any dtype, and
   returns Tensors with their shapes; errors are RelaxEdgeException with
   the runtime's status code, name and message.
3. The names: the library is lib`library_name(art)`.so, loaded by the
   class's static initializer; the package name is checked (Java
   identifiers, no keywords) before anything is written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import jinja2

from ..codegen import abi
from ..errors import RelaxEdgeError
from ..resources import runtime_dir
from ..toolchain import BuildError, run_tool
from ..version import __version__

CLASS_NAME = "RelaxEdgeModel"
EXCEPTION_CLASS = "RelaxEdgeException"
JAVA_KEYWORDS = frozenset("""
    abstract assert boolean break byte case catch char class const continue default do double else enum extends
    final finally float for goto if implements import instanceof int interface long native new package private
    protected public return short static strictfp super switch synchronized this throw throws transient try void
    volatile while true false null _ var record yield sealed permits""".split())
ACCESSORS = {"float": "floats", "double": "doubles", "long": "longs", "int": "ints", "short": "shorts",
             "byte": "bytes"}   # Java element type -> the Tensor method returning that array
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("relax_edge.android", "templates"),
                          keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                          undefined=jinja2.StrictUndefined)


def check_java_package(name) -> str:
    """`name` when it is a Java package name (dot-separated identifiers, no
    keywords), else a RelaxEdgeError naming the bad part."""
    if not isinstance(name, str) or not name:
        raise RelaxEdgeError(f"java package {name!r}: expected a name such as com.example.model")
    for part in name.split("."):
        if not _IDENTIFIER.fullmatch(part):
            why = "is empty" if not part else "starts with a digit" if part[0].isdigit() else \
                "is not a Java identifier (letters, digits, _ and $, ASCII only)"
            raise RelaxEdgeError(f"java package {name!r}: the part {part!r} {why}; expected e.g. com.example.model")
        if part in JAVA_KEYWORDS:
            raise RelaxEdgeError(f"java package {name!r}: {part!r} is a Java keyword")
    return name


def library_name(art) -> str:
    """The name System.loadLibrary takes: rxe_PREFIX (the file is librxe_PREFIX.so)."""
    return f"rxe_{art.prefix}"


def shape_dims(shape: str) -> list:
    """"(n, 784)" -> [None, 784]: each dim an int, or None when symbolic."""
    inner = shape.strip()[1:-1]
    parts, depth, start = [], 0, 0
    for k, c in enumerate(inner):
        depth += c in "([" and 1 or (c in ")]" and -1 or 0)
        if c == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    parts = [p.strip() for p in parts if p.strip()]
    return [int(p) if p.isdigit() else None for p in parts]


def _java_string(text: str) -> str:
    return json.dumps(text)   # JSON escapes are Java escapes; \n and \r stay escaped, never \u000a


def _context(art, java_package: str, class_name: str, function: str) -> dict:
    check_java_package(java_package)
    if not _IDENTIFIER.fullmatch(class_name) or class_name in JAVA_KEYWORDS:
        raise RelaxEdgeError(f"class name {class_name!r} is not a Java identifier")
    if function not in art.signature:
        raise RelaxEdgeError(f"the artifact has no function {function!r} (it has {', '.join(art.signature)})")
    backend = getattr(art, "backend", "c")
    sig = art.signature[function]
    inputs = []
    for i in sig["inputs"]:
        dims = shape_dims(i["shape"])
        inputs.append({"name_doc": re.sub(r"[^\w.-]", "?", i["name"]), "dtype": i["dtype"], "shape": i["shape"],
                       "name_java": _java_string(i["name"]), "dtype_java": _java_string(i["dtype"]),
                       "shape_java": _java_string(i["shape"]), "dims": dims,
                       "dims_java": "{" + ", ".join("-1" if d is None else str(d) for d in dims) + "}"})
    outputs = [{"dtype": o["dtype"], "shape": o["shape"], "dtype_java": _java_string(o["dtype"]),
                "shape_java": _java_string(o["shape"]), "ndim": o["ndim"],
                "accessor": ACCESSORS[_java_array(o["dtype"])]} for o in sig["outputs"]]
    fixed = sig.get("fixed_workspace_bytes")
    floats = all(i["dtype"] == "float32" and sum(d is None for d in i["dims"]) <= 1 for i in inputs)
    example = [("new float[" + str(_example_count(i["dims"])) + "]") for i in inputs]
    tensor = ", ".join(f"{class_name}.Tensor.of(new {_java_array(i['dtype'])}[{_example_count(i['dims'])}], "
                       + ", ".join(str(d or 1) for d in i["dims"]) + ")" for i in inputs)
    return {
        "prefix": art.prefix, "version": __version__, "java_package": java_package, "class_name": class_name,
        "exception_class": EXCEPTION_CLASS, "java_class": f"{java_package}.{class_name}",
        "class_path": f"{java_package}.{class_name}".replace(".", "/"),
        "exception_path": f"{java_package}.{EXCEPTION_CLASS}".replace(".", "/"),
        "library": library_name(art), "function": function, "inputs": inputs, "outputs": outputs,
        "num_inputs": len(inputs), "num_outputs": len(outputs), "output_dims": sum(o["ndim"] for o in outputs),
        "sizes": [_java_string(s) for s in sig["sizes"]], "sizes_doc": ", ".join(sig["sizes"]),
        "num_sizes": len(sig["sizes"]), "bounded": fixed is not None, "fixed_bytes": fixed or 0,
        "status_names": [abi.STATUS_NAMES[k] for k in sorted(abi.STATUS_NAMES)],
        "example_float": floats and bool(inputs), "example_args": ", ".join(example), "example_tensor": tensor,
        "vulkan": backend == "vulkan",
    }


def _example_count(dims) -> int:
    n = 1
    for d in dims:
        n *= d or 1
    return n


def _java_array(dtype: str) -> str:
    bits = abi.DTYPES[dtype][1]
    if dtype.startswith("float") and bits in (32, 64):
        return "float" if bits == 32 else "double"
    return {64: "long", 32: "int", 16: "short"}.get(bits, "byte")


def glue_sources(art, java_package: str, class_name: str = CLASS_NAME, function: str = "main") -> dict:
    """{file name: C text} of the JNI glue of `art`'s `function` for the
    class java_package.class_name; compile it with runtime_c/include (and
    jni_include_dirs()) and link it with the model."""
    ctx = _context(art, java_package, class_name, function)
    return {f"rxe_jni_{art.prefix}.c": _ENV.get_template("jni_glue.c.j2").render(**ctx)}


def java_sources(art, java_package: str, class_name: str = CLASS_NAME, function: str = "main") -> dict:
    """{file name: Java text}: the model class and its exception class."""
    ctx = _context(art, java_package, class_name, function)
    ctx["statuses"] = [(k, name.removeprefix("RXE_ERR_").removeprefix("RXE_"))
                       for k, name in sorted(abi.STATUS_NAMES.items())]
    ctx["status_names"] = [_java_string(n) for n in ctx["status_names"]]
    return {f"{class_name}.java": _ENV.get_template("RelaxEdgeModel.java.j2").render(**ctx),
            f"{EXCEPTION_CLASS}.java": _ENV.get_template("RelaxEdgeException.java.j2").render(**ctx)}


def jdk_home() -> Path | None:
    """The JDK whose include/jni.h is found: JAVA_HOME, javac's, or /usr/lib/jvm's."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    javac = shutil.which("javac")
    if javac:
        candidates.append(Path(javac).resolve().parent.parent)
    candidates += sorted(Path("/usr/lib/jvm").glob("*"), reverse=True) if Path("/usr/lib/jvm").is_dir() else []
    return next((c for c in candidates if (c / "include" / "jni.h").is_file()), None)


def jni_include_dirs(freestanding: bool = False) -> list:
    """The include folders of the JDK's jni.h (and its jni_md.h); with
    `freestanding` first the bionic stand-ins (runtime_c/android/include,
    whose <stdio.h> jni.h includes), for a compile without libc headers."""
    home = jdk_home()
    if home is None:
        raise BuildError("no jni.h found (JAVA_HOME, javac or /usr/lib/jvm): install a JDK, e.g. "
                         "apt-get install openjdk-17-jdk-headless")
    dirs = [home / "include", *[p for p in (home / "include").iterdir() if (p / "jni_md.h").is_file()]]
    return ([runtime_dir() / "android" / "include"] if freestanding else []) + dirs


def write_sources(files: dict, folder) -> list:
    """Write {name: text} into `folder`; the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        (folder / name).write_text(text)
        paths.append(folder / name)
    return paths


def build_host_library(art, java_package: str, out_dir, class_name: str = CLASS_NAME, cc: str | None = None) -> Path:
    """lib`library_name(art)`.so for a JVM on this machine: the glue of a
    host artifact compiled -shared -fPIC and linked with its static library
    (the runtime inside, and for host-vulkan the Vulkan module); for tests
    and desktop use."""
    if art.board not in ("host", "host-vulkan"):
        raise BuildError(f"build_host_library needs an artifact built for the host or host-vulkan board, "
                         f"not {art.board}")
    out_dir = Path(out_dir)
    (glue,) = write_sources(glue_sources(art, java_package, class_name), out_dir / "src")
    cc = cc or os.environ.get("CC") or "cc"
    target = out_dir / f"lib{library_name(art)}.so"
    flags = ["-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]
    includes = [f"-I{d}" for d in [runtime_dir() / "include", *jni_include_dirs()]]
    run_tool([cc, *flags, *includes, "-shared", "-o", target, glue, art.static_library, "-lm", "-lpthread", "-ldl",
              "-Wl,--no-undefined"], "linking the host JNI library")
    return target

