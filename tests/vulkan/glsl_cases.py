"""The operator matrix of the GLSL emitter: every case of the per-operator
legalize tests (tests/legalize/ and tests/numeric/test_ops_vs_onnxruntime),
as (id, input templates, dtypes, builder), built over size variables with
upper bounds (the emitter proves 32-bit indexing from them) or at concrete
sizes that are not multiples of the workgroup size."""

from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.op.registry import make_call
from relax_edge.transform.legalize import legalize
from tests.legalize import test_legalize_basic as basic
from tests.legalize import test_legalize_nn as nn
from tests.legalize import test_legalize_resize as resize
from tests.numeric.test_ops_vs_onnxruntime import CASES as ORT_CASES

F = "float32"
UPPER = 4096   # the size variables' upper bound
SHAPES = {"symbolic": None, "odd": {"n": 65, "m": 63, "h": 7}}


def _cases() -> list:
    out = [(c[0], c[1], c[2] or [F] * len(c[1]), c[6]) for c in ORT_CASES]
    out += [(f"unary_{name}", [("n", 5)], [F], lambda x, name=name: make_call(name, [x])) for name in basic.UNARY]
    out += [tuple(c) for c in basic.EXTRA + basic.REDUCTIONS + nn.CONV + nn.POOL + nn.NORM]
    out += [(c[0], [c[1]], [c[2]], c[3]) for c in resize.CASES]
    return out


CASES = _cases()


def bounded_module(templates, dtypes, build, sizes=None):
    """A one-operator module: string dims are SizeVars bounded by UPPER, or,
    when `sizes` is given, those concrete sizes."""
    size_vars = {}

    def dim(d):
        if not isinstance(d, str):
            return d
        return sizes[d] if sizes is not None else size_vars.setdefault(d, SizeVar(d, upper=UPPER))

    params = [Var(f"x{i}", TensorType([dim(d) for d in t], dt)) for i, (t, dt) in enumerate(zip(templates, dtypes))]
    bb = Builder()
    with bb.function("main", params):
        bb.ret(bb.emit(build(*params)))
    return bb.get()


def programs(case, shape: str) -> list:
    """The legalized tensor programs of `case` at SHAPES[shape]."""
    _, templates, dtypes, build = case
    return list(legalize(bounded_module(templates, dtypes, build, SHAPES[shape])).tensor_programs.values())
