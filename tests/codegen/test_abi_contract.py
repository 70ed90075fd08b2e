"""The C headers are the contract and the Python modules mirror them: this
reads runtime_c/include/relax_edge/abi.h, rpc.h, kernels.h and threads.h (and
the few limits kept in runtime_c/src/status.c and rpc/protocol.c) as text and
checks every mirrored name and value: status codes, limits, the thread pool's
limit, dtype codes, the RPC message types and limits, the GEMM tiling and
activation codes, the library kernels' parameters, and the field names, in
order, of each ABI struct."""

import re

from relax_edge.codegen import abi
from relax_edge.deploy import rpc
from relax_edge.library import depthwise, kernels
from relax_edge.resources import runtime_dir

RUNTIME = runtime_dir()
INCLUDE = RUNTIME / "include" / "relax_edge"

STRUCTS = {abi.DType: "rxe_dtype_t", abi.Tensor: "rxe_tensor_t", abi.Error: "rxe_error_t",
           abi.ArgInfo: "rxe_arg_info_t", abi.ProfileEntry: "rxe_profile_entry_t",
           abi.Function: "rxe_function_t", abi.Module: "rxe_module_t"}
RPC_TYPES = {"HELLO": rpc.HELLO, "LIST": rpc.LIST, "SELECT": rpc.SELECT, "SET_INPUT": rpc.SET_INPUT,
             "RUN": rpc.RUN, "GET_OUTPUT": rpc.GET_OUTPUT, "TIME": rpc.TIME, "PROFILE": rpc.PROFILE,
             "WORKSPACE": rpc.WORKSPACE, "SHUTDOWN": rpc.SHUTDOWN, "GENERATE": rpc.GENERATE, "OK": rpc.OK,
             "TOKEN": rpc.TOKEN, "ERROR": rpc.ERROR}
DTYPE_KINDS = {"INT": ("int8", "int16", "int32", "int64"), "UINT": ("uint8", "uint16", "uint32", "uint64"),
               "FLOAT": ("float16", "float32", "float64"), "BFLOAT": ("bfloat16",), "BOOL": ("bool",)}


def _source(path) -> str:
    """The file without its comments."""
    text = path.read_text()
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))


def _c_int(literal: str) -> int:
    """A C integer constant expression of literals, *, + and parentheses."""
    python = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", literal)
    if not re.fullmatch(r"[0-9a-fA-FxX*+()\s]+", python):
        raise ValueError(f"not a constant: {literal!r}")
    return int(eval(python, {"__builtins__": {}}))   # digits, operators and parentheses only


def _defines(text: str) -> dict:
    """#define NAME <constant> lines (the last one wins; function-like macros left out)."""
    found = {}
    for name, value in re.findall(r"^\s*#define\s+(\w+)[ \t]+([^\n]+)$", text, flags=re.M):
        try:
            found[name] = _c_int(value.strip())
        except ValueError:
            pass
    return found


def _enums(text: str) -> list:
    """(typedef name or None, {enumerator: value}) of each enum, values counted as C does."""
    found = []
    for body, typedef in re.findall(r"enum\s*\{(.*?)\}\s*(\w*)\s*;", text, flags=re.S):
        values, next_value = {}, 0
        for item in filter(None, (part.strip() for part in body.split(","))):
            name, _, value = (s.strip() for s in item.partition("="))
            next_value = _c_int(value) if value else next_value
            values[name] = next_value
            next_value += 1
        found.append((typedef or None, values))
    return found


def _struct_fields(text: str) -> dict:
    """typedef struct [tag] { ... } name; -> the field names in order."""
    found = {}
    for body, name in re.findall(r"typedef\s+struct\s*\w*\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        fields = []
        for declaration in filter(None, (d.strip() for d in body.split(";"))):
            pointer_fn = re.search(r"\(\s*\*\s*(\w+)\s*\)", declaration)
            field = pointer_fn.group(1) if pointer_fn else re.search(r"(\w+)\s*(\[[^\]]*\])?$", declaration).group(1)
            fields.append(field)
        found[name] = fields
    return found


def _prototypes(text: str) -> dict:
    """rxe_status_t rxe_lib_*(...) declarations -> [(type, name)] of their parameters."""
    found = {}
    for name, params in re.findall(r"rxe_status_t\s+(rxe_lib_\w+)\s*\((.*?)\)\s*;", text, flags=re.S):
        found[name] = [(m.group(1).strip(), m.group(2)) for m in
                       (re.fullmatch(r"(.*?[\s*])(\w+)", p.strip()) for p in params.split(","))]
    return found


def test_headers_match_python_mirrors():
    abi_h, rpc_h, kernels_h = (_source(INCLUDE / name) for name in ("abi.h", "rpc.h", "kernels.h"))
    problems = []

    def check(what, header_value, python_value):
        if header_value != python_value:
            problems.append(f"{what}: header {header_value!r}, Python {python_value!r}")

    # abi.h: version, limits, statuses, dtype codes, structs
    defines = _defines(abi_h)
    for name, value in (("RXE_ABI_VERSION", abi.ABI_VERSION), ("RXE_MAX_NDIM", abi.MAX_NDIM),
                        ("RXE_ERROR_MESSAGE_BYTES", abi.ERROR_MESSAGE_BYTES),
                        ("RXE_WORKSPACE_ALIGNMENT", abi.WORKSPACE_ALIGNMENT)):
        check(f"abi.h {name}", defines.get(name), value)
    enums = _enums(abi_h)
    statuses = dict(enums)["rxe_status_t"]
    check("abi.h rxe_status_t", {v: k for k, v in statuses.items()}, abi.STATUS_NAMES)
    status_c = (RUNTIME / "src" / "status.c").read_text()
    named = dict(re.findall(r"case\s+(RXE_\w+):\s*return\s+\"(RXE_\w+)\"", status_c))
    check("status.c rxe_status_name", named, {name: name for name in statuses})
    dtype_codes = next(values for _, values in enums if "RXE_DTYPE_FLOAT" in values)
    check("abi.h RXE_DTYPE_*", set(dtype_codes), {f"RXE_DTYPE_{kind}" for kind in DTYPE_KINDS})
    for kind, names in DTYPE_KINDS.items():
        for dtype in names:
            check(f"abi.DTYPES[{dtype!r}] code", dtype_codes.get(f"RXE_DTYPE_{kind}"), abi.DTYPES[dtype][0])
    structs = _struct_fields(abi_h)
    for cls, c_name in STRUCTS.items():
        check(f"abi.h {c_name} fields", structs.get(c_name), [name for name, *_ in cls._fields_])
    check("abi.Error message bytes", defines["RXE_ERROR_MESSAGE_BYTES"], abi.Error.message.size)

    # threads.h: the pool's thread limit, within the chunk count's bits
    threads = _defines(_source(INCLUDE / "threads.h"))
    check("threads.h RXE_MAX_THREADS", threads.get("RXE_MAX_THREADS"), abi.MAX_THREADS)
    check("threads.h RXE_MAX_THREADS <= 2**RXE_THREADS_CHUNK_BITS - 1",
          abi.MAX_THREADS <= 2 ** threads.get("RXE_THREADS_CHUNK_BITS", 0) - 1, True)

    # rpc.h and rpc/protocol.c: version, message types, limits
    defines = _defines(rpc_h)
    check("rpc.h RXE_RPC_VERSION", defines.get("RXE_RPC_VERSION"), rpc.PROTOCOL_VERSION)
    check("rpc.h RXE_RPC_MAX_PAYLOAD", defines.get("RXE_RPC_MAX_PAYLOAD"), rpc.MAX_FRAME)
    types = next(values for _, values in _enums(rpc_h) if "RXE_RPC_HELLO" in values)
    check("rpc.h message types", types, {f"RXE_RPC_{name}": value for name, value in RPC_TYPES.items()})
    protocol = _defines(_source(RUNTIME / "rpc" / "protocol.c"))
    check("protocol.c RXE_RPC_MAX_REPEAT", protocol.get("RXE_RPC_MAX_REPEAT"), rpc.MAX_REPEAT)
    check("protocol.c RXE_RPC_MAX_REPEAT_MS", protocol.get("RXE_RPC_MAX_REPEAT_MS"), rpc.MAX_REPEAT_MS)

    # kernels.h: tiling, activation codes, each library kernel's parameters
    defines = _defines(kernels_h)
    for name, value in (("RXE_GEMM_MR", kernels.MR), ("RXE_GEMM_NR", kernels.NR), ("RXE_GEMM_KC", kernels.KC),
                        ("RXE_GEMM_NC", kernels.NC), ("RXE_ACT_NONE", kernels.ACT_NONE),
                        ("RXE_ACT_RELU", kernels.ACT_RELU), ("RXE_ACT_RELU6", kernels.ACT_RELU6)):
        check(f"kernels.h {name}", defines.get(name), value)
    prototypes = _prototypes(kernels_h)
    library = {**kernels.KERNELS, depthwise.SYMBOL: depthwise.DEPTHWISE_CONV2D}
    check("kernels.h kernels", sorted(prototypes), sorted(library))
    for symbol, kernel in library.items():
        params = prototypes.get(symbol, [])
        check(f"kernels.h {symbol} last parameter", params[-1:], [("rxe_error_t*", "err")])
        pointers = tuple(name for ctype, name in params[:-1] if ctype.endswith("*"))
        sizes = tuple(name for ctype, name in params[:-1] if ctype == "int64_t")
        check(f"kernels.h {symbol} pointers", pointers, kernel.pointers)
        check(f"kernels.h {symbol} sizes", sizes, kernel.sizes)
        check(f"kernels.h {symbol} parameter order", [name for _, name in params[:-1]],
              list(kernel.pointers + kernel.sizes))

    assert not problems, "the headers and their Python mirrors differ:\n  " + "\n  ".join(problems)
