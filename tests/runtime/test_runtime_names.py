"""Every function the runtime's headers declare is named rxe_<module>_<verb>,
with the two fixed families abi.h states: the portable math functions under
libm's names, and the library kernels as rxe_lib_<op>_<dtype>."""

import re
from pathlib import Path

HEADERS = Path(__file__).resolve().parents[2] / "runtime_c" / "include" / "relax_edge"
MODULES = ("arena", "tensor", "dim", "threads", "mem", "profile", "error", "status", "module", "rpc", "half", "bfloat",
           "decoder", "sampling", "rng", "qint8", "vk")
CONTRACT_NAMES = {"rxe_generate"}  # the generation loop, named by the decoder step contract (generate.h)
LIBM = {"exp", "log", "sqrt", "tanh", "erf", "pow", "floor", "ceil", "round"}
LIBM |= {"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod"}
MATH_HELPERS = re.compile(r"rxe_(f32_(bits|from_bits|floor|ceil|round)|(min|max|floordiv|floormod)_i64)$")


def declared_functions() -> set:
    names = set()
    for header in HEADERS.glob("*.h"):
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        names |= set(re.findall(r"\b(rxe_[a-z0-9_]+)\s*\(", text))
    return names


def follows_convention(name: str) -> bool:
    rest = name[len("rxe_"):]
    if name in CONTRACT_NAMES:
        return True
    if rest.split("_")[0] in MODULES and "_" in rest:
        return True
    if rest in LIBM or (rest.endswith("f") and rest[:-1] in LIBM):
        return True
    return bool(re.fullmatch(r"rxe_lib_[a-z0-9_]+_(f32|i8|s8|i32)", name) or MATH_HELPERS.match(name))


def test_headers_declare_functions():
    names = declared_functions()
    assert {"rxe_tensor_check", "rxe_threads_parallel_for", "rxe_expf", "rxe_lib_matmul_f32"} <= names


def test_every_runtime_function_follows_the_naming_convention():
    assert sorted(n for n in declared_functions() if not follows_convention(n)) == []


def test_the_old_names_are_gone():
    old = {"rxe_check_tensor", "rxe_parallel_for", "rxe_set_num_threads", "rxe_get_num_threads", "rxe_bind_dim",
           "rxe_check_dim", "rxe_check_broadcast", "rxe_copy_bytes", "rxe_profile_clock_ns"}
    assert declared_functions() & old == set()
