"""Run the ONNX backend node test cases shipped inside the `onnx` package
through import + interpreter, and classify each case.

A case is *in scope* when every operator it uses is in SUPPORTED_OPS and
every graph input and output has a supported dtype. In-scope cases end as
`pass`, `fail` (wrong numbers, or an error other than an unsupported
feature) or `unsupported` (the importer says a feature is not supported).
Used by scripts/onnx_node_tests.py and the test suite.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import RelaxEdgeError
from .context import ONNX_DTYPES
from .static_inputs import static_graph_inputs

SUPPORTED_OPS = frozenset("""
Conv ConvTranspose BatchNormalization Relu LeakyRelu Clip HardSigmoid HardSwish Sigmoid Tanh Erf
Gelu Softmax LogSoftmax LayerNormalization Add Sub Mul Div Pow Sqrt Reciprocal Neg Abs Exp Log Min
Max Equal Less Greater Not And Where Cast Gemm MatMul Reshape Flatten Transpose Squeeze Unsqueeze
Concat Split Slice Gather Expand Tile Pad Shape Size ConstantOfShape Range Trilu ReduceMean
ReduceSum ReduceMax ReduceMin ArgMax GlobalAveragePool AveragePool MaxPool Resize Identity Dropout
Constant
""".split())


@dataclasses.dataclass
class CaseResult:
    name: str
    ops: tuple
    status: str          # pass | fail | unsupported | out_of_scope
    detail: str = ""


def _ops_of(model) -> set:
    ops = {n.op_type for n in model.graph.node}
    for f in model.functions:
        ops |= {n.op_type for n in f.node}
    return ops


def scope_problem(model) -> str:
    """Why a case is out of scope (other operators, dtypes), or "" when in scope."""
    ops = _ops_of(model)
    outside = sorted(ops - SUPPORTED_OPS)
    if outside:
        return "operators " + ", ".join(outside)
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            return f"{vi.name} is not a tensor"
        if vi.type.tensor_type.elem_type not in ONNX_DTYPES:
            return f"dtype of {vi.name}"
    return ""


def _compare(expected, actual, rtol, atol) -> str:
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype.kind in "fc":
        if not np.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True):
            err = np.max(np.abs(actual.astype(np.float64) - expected))
            return f"values differ (max abs error {err:.3g})"
    elif not np.array_equal(actual, expected):
        return "values differ"
    return ""


def run_case(case) -> CaseResult:
    from ... import interpret
    from .importer import from_onnx
    model = case.model
    ops = tuple(sorted(_ops_of(model)))
    why = scope_problem(model)
    if why:
        return CaseResult(case.name, ops, "out_of_scope", why)
    input_names = [i.name for i in model.graph.input]
    frozen = static_graph_inputs(model)
    for inputs, outputs in case.data_sets:
        inputs = [numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else np.asarray(x)
                  for x in inputs]
        outputs = [numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x for x in outputs]
        by_name = dict(zip(input_names, inputs))
        # dynamic dims are >= 1 by default: pin the shapes of inputs with an empty dim
        pinned = {n: x.shape for n, x in by_name.items() if 0 in x.shape and n not in frozen}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = from_onnx(model, input_shapes=pinned,
                                constant_inputs={n: by_name[n] for n in frozen if n in by_name})
                args = [by_name[n] for n in input_names if n not in frozen]
                result = interpret(mod, *args)
        except RelaxEdgeError as err:
            text = str(err)
            status = "unsupported" if "not supported" in text or "unsupported" in text else "fail"
            return CaseResult(case.name, ops, status, text.splitlines()[0][:300])
        except Exception as err:  # a crash is a failure of ours, recorded as such
            return CaseResult(case.name, ops, "fail", f"crash: {type(err).__name__}: {err}"[:300])
        results = list(result) if isinstance(result, tuple) else [result]
        if len(results) != len(outputs):
            return CaseResult(case.name, ops, "fail", f"{len(results)} outputs, expected {len(outputs)}")
        for i, (exp, act) in enumerate(zip(outputs, results)):
            diff = _compare(exp, act, case.rtol, case.atol)
            if diff:
                return CaseResult(case.name, ops, "fail", f"output {i}: {diff}")
    return CaseResult(case.name, ops, "pass")


@functools.lru_cache(maxsize=1)
def collect_cases():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(collect_testcases(None))


def summarize(results) -> dict:
    """Per-operator counts and the totals over in-scope cases."""
    per_op = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    for r in results:
        totals[r.status] += 1
        if r.status != "out_of_scope":
            for op in r.ops:
                per_op[op][r.status] += 1
    in_scope = totals["pass"] + totals["fail"] + totals["unsupported"]
    return {"per_op": per_op, "totals": totals, "in_scope": in_scope,
            "pass_rate": totals["pass"] / in_scope if in_scope else 0.0}
