"""A legalized module as C sources: PREFIX.c (kernels, host functions, the
module's entry table), PREFIX.h, and the constants as a binary blob with
an assembler file that embeds it (`.incbin`), so weights never become float
literals and large models compile fast. With `extern_kernels` the kernels
are only declared, for another backend to define. The header and the
weights' assembler file (`support_files`) are also the LLVM backend's.

`emit_c` renders a host module (codegen/host_program.py's `lower_host`);
`generate_c` runs the code generation stages from a legalized module."""

from __future__ import annotations

from dataclasses import dataclass, field

import jinja2

from ...errors import RelaxEdgeError
from ...ir.expr import IRModule
from ...memory import plan_module
from ...version import __version__
from ..abi import WORKSPACE_ALIGNMENT
from ..host_program import CodegenError, HostModule, decoder_info, lower_host, symbol_prefix
from .host import c_arg_info, render_host_function
from .kernel import declare_kernel, render_kernel

__all__ = ["CSources", "emit_c", "generate_c", "support_files", "symbol_prefix"]

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("relax_edge.codegen.c", "templates"),
                          keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=False,
                          undefined=jinja2.StrictUndefined)


@dataclass
class CSources:
    prefix: str
    files: dict        # file name -> text
    weights: bytes     # written as PREFIX_weights.bin
    signature: dict    # function name -> {"inputs": [...], "outputs": [...], "sizes": [...], ...}
    extern_kernels: dict = field(default_factory=dict)   # symbol -> tensor program, defined elsewhere


def _context(host: HostModule) -> dict:
    """The templates' view of the module (without kernels and bodies)."""
    functions = [{
        "name": f.name, "symbol": f.symbol, "inputs": [c_arg_info(i) for i in f.inputs],
        "outputs": [c_arg_info(o) for o in f.outputs], "fixed_workspace": f.fixed_workspace,
        "size_names": [v.name for v in f.size_vars], "output_dims": f.output_dims, "signature": f.summary,
    } for f in host.functions]
    main = next(f for f in functions if f["name"] == "main")
    return {"prefix": host.prefix, "version": __version__, "functions": functions, "main": main,
            "decoder": decoder_info(host),
            "guard": f"{host.prefix.upper()}_H_", "alignment": WORKSPACE_ALIGNMENT}


def support_files(host: HostModule) -> dict:
    """PREFIX.h (the C interface) and PREFIX_weights.S (the constants)."""
    prefix = host.prefix
    return {
        f"{prefix}.h": _ENV.get_template("model.h.j2").render(**_context(host)),
        f"{prefix}_weights.S": _ENV.get_template("weights.S.j2").render(
            prefix=prefix, size=host.weights.nbytes, blob=f"{prefix}_weights.bin"),
    }


def generate_c(mod: IRModule, prefix: str = "model", extern_kernels: bool = False) -> CSources:
    """C sources for a legalized module (every operator a tensor program).
    With `extern_kernels` the kernels are only declared (as PREFIX_k_NAME),
    for another backend to define; they are listed in `extern_kernels`."""
    prefix = symbol_prefix(prefix)
    host = lower_host(mod, plan_module(mod), prefix, f"{prefix}_k_" if extern_kernels else "k_")
    return emit_c(host, extern_kernels)


def emit_c(host: HostModule, extern_kernels: bool = False) -> CSources:
    """PREFIX.c, PREFIX.h and PREFIX_weights.S of a host module; with
    `extern_kernels` the kernels are only declared."""
    kernels, declared = [], {}
    for symbol, program in host.kernels.items():
        inplace = symbol in host.inplace
        try:
            if extern_kernels:
                declared[symbol] = program
                kernels.append(declare_kernel(program, symbol, inplace=inplace))
            else:
                kernels.append(render_kernel(program, symbol, inplace=inplace))
        except RelaxEdgeError as err:
            raise CodegenError(f"tensor program {program.name}: {err}") from None
    context = _context(host)
    for entry, fn in zip(context["functions"], host.functions):
        entry["body"] = render_host_function(fn, host.weights.symbol)
    prefix = host.prefix
    files = {f"{prefix}.c": _ENV.get_template("model.c.j2").render(kernels=kernels, **context),
             **support_files(host)}
    return CSources(prefix, files, host.weights.tobytes(), host.signature, declared)
