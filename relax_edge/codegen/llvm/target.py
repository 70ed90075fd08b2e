"""From a board's Target to an LLVM TargetMachine, and from an LLVM module to
an optimized object file.

1. The machine: the board's four-part `llvm_triple` ("native": this host's
   triple, CPU and features), its CPU, its features as "+neon,..." (GCC
   spellings such as fpv4-sp-d16 renamed to LLVM's), riscv64's ABI lp64d,
   and a hard-float ARM environment (eabihf) when the board says float_abi
   hard. Position-independent code on Linux (it goes into a shared library).
2. `compile_module` sets the module's triple and data layout, checks the IR
   with the LLVM verifier before optimizing, optimizes with the new pass
   manager (loop and SLP vectorization on) and emits an object. Kernels get
   hidden visibility; the host module's entry points and entry table stay
   exported.
3. Floating point stays IEEE, as in the C build: no fast-math flags. So
   float32 loops vectorize on aarch64, x86-64 and riscv64 (with V), but not
   on armv7 NEON, which is not IEEE-exact (it flushes denormals) and which
   LLVM vectorizes only under fast-math.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from ...errors import RelaxEdgeError
from ...target import Target

# (architecture family, GCC feature name) -> LLVM feature name
FEATURE_NAMES = {("arm", "fpv4-sp-d16"): "vfp4d16sp", ("arm", "vfpv3"): "vfp3", ("arm", "vfpv4"): "vfp4",
                 ("aarch64", "fp16"): "fullfp16"}
ABI_NAMES = {"riscv64": "lp64d", "riscv32": "ilp32d"}
SPEED_LEVELS = {"-O0": 0, "-O1": 1, "-O2": 2, "-O3": 3, "-Os": 2, "-Oz": 2}


class LLVMCodegenError(RelaxEdgeError):
    """LLVM rejected the generated module or cannot target the board."""


@functools.cache
def _initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def _family(arch: str) -> str:
    return "arm" if arch.startswith(("arm", "thumb")) else arch


@dataclass(frozen=True)
class MachineSpec:
    triple: str
    cpu: str
    features: str
    abiname: str
    reloc: str


def machine_spec(target: Target) -> MachineSpec:
    """Triple, CPU, features and ABI for LLVM from a board's target."""
    _initialize()
    reloc = "static" if target.freestanding else "pic"
    if target.llvm_triple == "native":
        return MachineSpec(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                           llvm.get_host_cpu_features().flatten(), "", reloc)
    arch, vendor, system, env = target.llvm_triple.split("-")
    family = _family(arch)
    if family == "arm":   # the float ABI lives in the environment part of the triple
        base = env.removesuffix("hf")
        env = base + "hf" if target.float_abi == "hard" else base
    features = [FEATURE_NAMES.get((family, f.lstrip("+")), f.lstrip("+")) for f in target.features]
    if family == "arm" and target.float_abi == "soft":
        features.append("soft-float")
    cpu = "" if target.cpu == "generic" else target.cpu
    return MachineSpec(f"{arch}-{vendor}-{system}-{env}", cpu, ",".join(f"+{f}" for f in features),
                       ABI_NAMES.get(arch, ""), reloc)


@functools.cache
def target_machine(spec: MachineSpec) -> llvm.TargetMachine:
    _initialize()
    try:
        target = llvm.Target.from_triple(spec.triple)
    except RuntimeError as err:
        raise LLVMCodegenError(f"LLVM cannot target {spec.triple}: {err}") from None
    return target.create_target_machine(cpu=spec.cpu, features=spec.features, opt=2, reloc=spec.reloc,
                                        codemodel="default", abiname=spec.abiname)


@dataclass
class CompiledKernels:
    object_code: bytes
    llvm_ir: str            # the optimized module, as text
    spec: MachineSpec


def prepare_module(module: ir.Module, target: Target) -> llvm.ModuleRef:
    """Set the triple and data layout, parse and verify (before optimizing)."""
    spec = machine_spec(target)
    module.triple = spec.triple
    module.data_layout = str(target_machine(spec).target_data)
    try:
        ref = llvm.parse_assembly(str(module))
        ref.verify()
    except RuntimeError as err:
        raise LLVMCodegenError(f"the generated LLVM IR is invalid: {err}") from None
    return ref


def compile_module(module: ir.Module, target: Target, opt_level: str | None = None,
                   hide: bool = True) -> CompiledKernels:
    """An object file for `target` from `module`, verified then optimized.
    With `hide` its functions get hidden visibility (kernels: called from
    the host functions in the same library, not exported)."""
    ref = prepare_module(module, target)
    spec = machine_spec(target)
    tm = target_machine(spec)
    speed = SPEED_LEVELS.get(opt_level or next((f for f in target.cflags if f in SPEED_LEVELS), "-O2"), 2)
    if speed > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=speed)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(ref, pb)
    for fn in ref.functions:
        if hide and not fn.is_declaration:
            fn.visibility = "hidden"
    return CompiledKernels(tm.emit_object(ref), str(ref), spec)
