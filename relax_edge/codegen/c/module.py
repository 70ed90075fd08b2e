"""A legalized module as C sources: PREFIX.c (kernels, host functions, the
module's entry table), PREFIX.h, and the constants as a binary blob with
an assembler file that embeds it (`.incbin`), so weights never become float
literals and large models compile fast. With `extern_kernels` the kernels
are only declared, for the LLVM backend (codegen/llvm) to define."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import jinja2

from ... import __version__
from ...errors import RelaxEdgeError
from ...ir.expr import IRModule
from ...ir.types import shape_str
from ..abi import WORKSPACE_ALIGNMENT
from .host import CodegenError, HostEmitter, WeightsBlob
from .kernel import declare_kernel, render_kernel

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("relax_edge.codegen.c", "templates"),
                          keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=False,
                          undefined=jinja2.StrictUndefined)


@dataclass
class CSources:
    prefix: str
    files: dict        # file name -> text
    weights: bytes     # written as PREFIX_weights.bin
    signature: dict    # function name -> {"inputs": [...], "outputs": [...], "sizes": [...], ...}
    plans: dict        # function name -> memory.Plan
    extern_kernels: dict = field(default_factory=dict)   # symbol -> tensor program, defined elsewhere


def symbol_prefix(name: str) -> str:
    ident = re.sub(r"\W", "_", name).strip("_") or "model"
    return ident if not ident[0].isdigit() else f"m_{ident}"


def generate_c(mod: IRModule, prefix: str = "model", extern_kernels: bool = False) -> CSources:
    """C sources for a legalized module (every operator a tensor program).
    With `extern_kernels` the kernels are only declared (as PREFIX_k_NAME),
    for another backend to define; they are listed in `extern_kernels`."""
    prefix = symbol_prefix(prefix)
    if mod.externs:
        raise CodegenError(f"extern kernels ({', '.join(mod.externs)}) are not supported by the C backend yet")
    kernel_prefix = f"{prefix}_k_" if extern_kernels else "k_"
    symbols = {name: kernel_prefix + re.sub(r"\W", "_", name) for name in mod.tensor_programs}
    weights = WeightsBlob(f"{prefix}_weights")
    functions, signature, plans, used = [], {}, {}, set()
    for fname, func in mod.functions.items():
        emitter = HostEmitter(mod, func, prefix, symbols, weights)   # plans memory, marks in-place kernels
        used |= {s.call.program.name for s in emitter.live.steps if s.view_of is None}
        body = emitter.emit()
        ins, outs = emitter.arg_info()
        outputs = emitter.live.outputs
        plans[fname] = emitter.plan
        functions.append({
            "name": fname, "symbol": f"{prefix}_{fname}", "body": body, "inputs": ins, "outputs": outs,
            "fixed_workspace": emitter.fixed_workspace(), "size_names": [v.name for v in emitter.size_vars],
            "output_dims": max(sum(len(v.type.shape) for v in outputs), 1),
            "signature": ", ".join(f"{p.name}: {p.type}" for p in func.params) + " -> "
                         + ", ".join(str(v.type) for v in outputs),
        })
        signature[fname] = {
            "inputs": [{"name": p.name, "dtype": p.type.dtype, "shape": shape_str(p.type.shape)} for p in func.params],
            "outputs": [{"dtype": v.type.dtype, "shape": shape_str(v.type.shape), "ndim": len(v.type.shape)}
                        for v in outputs],
            "sizes": [v.name for v in emitter.size_vars],
            "fixed_workspace_bytes": emitter.fixed_workspace(),
        }
    kernels, declared = [], {}
    for name, program in mod.tensor_programs.items():
        if name not in used:
            continue  # only ever a view: no kernel
        try:
            if extern_kernels:
                declared[symbols[name]] = program
                kernels.append(declare_kernel(program, symbols[name]))
            else:
                kernels.append(render_kernel(program, symbols[name]))
        except RelaxEdgeError as err:
            raise CodegenError(f"tensor program {name}: {err}") from None
    if "main" not in mod.functions:
        raise CodegenError("the module has no function named main")
    main = next(f for f in functions if f["name"] == "main")
    context = {"prefix": prefix, "version": __version__, "kernels": kernels, "functions": functions,
               "main": main, "guard": f"{prefix.upper()}_H_", "alignment": WORKSPACE_ALIGNMENT}
    blob = weights.tobytes()
    files = {
        f"{prefix}.c": _ENV.get_template("model.c.j2").render(**context),
        f"{prefix}.h": _ENV.get_template("model.h.j2").render(**context),
        f"{prefix}_weights.S": _ENV.get_template("weights.S.j2").render(
            prefix=prefix, size=len(blob), blob=f"{prefix}_weights.bin"),
    }
    return CSources(prefix, files, blob, signature, plans, declared)
