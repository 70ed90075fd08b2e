"""Run the ONNX backend node test cases shipped inside the `onnx` package
through import + interpreter, and classify each case.

A case is *in scope* when every operator it uses has a converter (SUPPORTED_OPS
is a live view of the converter registry, `context.CONVERTERS`, so an operator
is counted as soon as its converter is registered) and every graph input and
output has a supported dtype. In-scope cases end as `pass`, `fail` (wrong
numbers, or an error other than an unsupported feature) or `unsupported` (the
importer says a feature is not supported). `run_case_ort` runs a case through
ONNX Runtime, for the side-by-side table of `compare_with_ort`.
Used by scripts/onnx_node_tests.py and the test suite.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
import types
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import RelaxEdgeError
from . import convert  # noqa: F401  (registers the converters)
from .context import CONVERTERS, HELD_NARROW, ONNX_DTYPES, held_array
from .static_inputs import static_graph_inputs

# how the importer says that a feature is missing (not a wrong answer)
_UNSUPPORTED = re.compile(r"not supported|unsupported|supported only")

# the ONNX op types with a converter: a live view, never a hand-kept list
SUPPORTED_OPS = types.MappingProxyType(CONVERTERS).keys()

# operators left out by design, and why (README.md lists them too)
_STRING = "string tensors: the C runtime has no string type"
_SEQUENCE = "sequence and optional types: the graph IR holds tensors and tuples only"
_TRAINING = "training operator (ai.onnx.preview.training): relax_edge compiles inference"
LEFT_OUT = types.MappingProxyType({
    **dict.fromkeys(["StringConcat", "StringSplit", "StringNormalizer", "RegexFullMatch"], _STRING),
    **dict.fromkeys(["SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
                     "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence",
                     "Optional", "OptionalGetElement", "OptionalHasElement"], _SEQUENCE),
    **dict.fromkeys(["Adagrad", "Adam", "Momentum", "Gradient"], _TRAINING),
    "ImageDecoder": "decoding JPEG/PNG/TIFF/WebP bytes needs image codecs, outside a dependency-free runtime",
})
# random operators: relax_edge's generator (convert/random.py) is not the one that made the stored outputs, so
# their cases compare shapes and dtypes only; tests/frontend/test_onnx_random.py checks the distributions
RANDOM_OPS = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli",
                        "Multinomial"})
_RANDOM = "random values are not comparable (another generator made the expectation); shapes and dtypes compared"
_ML_DOMAIN = "ai.onnx.ml operator (classical ML), not the default domain"
_TRAINING_MODE = re.compile(r"training")


# int4 / uint4 / int2 / uint2 tensors are fed and compared as their int8 / uint8 holders (context.held_array),
# in the cases of the operators that know these types
_NARROW_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


@dataclasses.dataclass
class CaseResult:
    name: str
    ops: tuple
    status: str          # pass | fail | unsupported | out_of_scope
    detail: str = ""
    left_out: str = ""   # why the case is left out by design (LEFT_OUT), or ""


def case_ops(case) -> set:
    """The op types a case uses (its graph's nodes and its local functions')."""
    return _ops_of(case.model)


def _ops_of(model) -> set:
    ops = {n.op_type for n in model.graph.node}
    for f in model.functions:
        ops |= {n.op_type for n in f.node}
    return ops


def left_out_reason(name: str, model) -> str:
    """Why a case is left out by design (strings, sequences and optionals, training,
    the ai.onnx.ml domain, training-mode outputs), or "" when it is not."""
    nodes = list(model.graph.node) + [n for f in model.functions for n in f.node]
    for n in nodes:
        if n.op_type in LEFT_OUT:
            return f"{n.op_type}: {LEFT_OUT[n.op_type]}"
        if n.op_type in RANDOM_OPS:
            return f"{n.op_type}: {_RANDOM}"
        if n.domain in ("ai.onnx.ml", "ai.onnx.preview.training"):
            return f"{n.op_type}: {_TRAINING if 'training' in n.domain else _ML_DOMAIN}"
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            return f"{vi.name}: {_SEQUENCE}"
        if vi.type.tensor_type.elem_type == onnx.TensorProto.STRING:
            return f"{vi.name}: {_STRING}"
    if _TRAINING_MODE.search(name) and {n.op_type for n in nodes} & {"BatchNormalization", "Dropout"}:
        return "training-mode BatchNormalization/Dropout outputs: relax_edge compiles inference"
    return ""


def scope_problem(model) -> str:
    """Why a case is out of scope (other operators, dtypes), or "" when in scope."""
    ops = _ops_of(model)
    outside = sorted(ops - SUPPORTED_OPS)
    if outside:
        return "operators " + ", ".join(outside)
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            return f"{vi.name} is not a tensor"
        elem = vi.type.tensor_type.elem_type
        if elem not in ONNX_DTYPES and not (elem in HELD_NARROW and ops <= _NARROW_OPS):
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
    result = _run_case(case)
    if not result.left_out:
        result.left_out = left_out_reason(case.name, case.model)
    return result


def _run_case(case) -> CaseResult:
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
        inputs = [held_array(numpy_helper.to_array(x)) if isinstance(x, onnx.TensorProto) else np.asarray(x)
                  for x in inputs]
        outputs = [held_array(numpy_helper.to_array(x)) if isinstance(x, onnx.TensorProto) else x for x in outputs]
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
            status = "unsupported" if _UNSUPPORTED.search(text) else "fail"
            return CaseResult(case.name, ops, status, text.splitlines()[0][:300])
        except Exception as err:  # a crash is a failure of ours, recorded as such
            return CaseResult(case.name, ops, "fail", f"crash: {type(err).__name__}: {err}"[:300])
        wrong = _wrong_outputs(case, ops, outputs, list(result) if isinstance(result, tuple) else [result])
        if wrong:
            return wrong
    return _passed(case, ops)


def _passed(case, ops) -> CaseResult:
    """`pass`, or `shapes_only` for a random operator's case: its values were
    not compared, so it is not counted as a pass (for either runtime)."""
    if set(ops) & RANDOM_OPS:
        return CaseResult(case.name, ops, "shapes_only", "random values not compared; shapes and dtypes match")
    return CaseResult(case.name, ops, "pass")


def _wrong_outputs(case, ops, expected, results) -> CaseResult | None:
    """A failure when `results` differ from the `expected` outputs, else None."""
    if len(results) != len(expected):
        return CaseResult(case.name, ops, "fail", f"{len(results)} outputs, expected {len(expected)}")
    random = bool(set(ops) & RANDOM_OPS)
    for i, (exp, act) in enumerate(zip(expected, results)):
        diff = _compare_value(exp, act, case.rtol, case.atol) if not random else _compare_type(exp, act)
        if diff:
            return CaseResult(case.name, ops, "fail", f"output {i}: {diff}")
    return None


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


def ort_available() -> bool:
    """Whether ONNX Runtime is installed (the side-by-side column)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _as_value(x):
    """A stored input or output as numpy: arrays, sequences (lists) and None stay what they are."""
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, list):
        return [_as_value(v) for v in x]
    return x if x is None else np.asarray(x)


def _compare_type(expected, actual) -> str:
    """Shape and dtype only (random values)."""
    expected, actual = np.asarray(expected), np.asarray(actual)
    return "" if (expected.shape, expected.dtype) == (actual.shape, actual.dtype) else \
        f"{actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}"


def _compare_value(expected, actual, rtol, atol) -> str:
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"a sequence of {len(expected)} expected"
        return next((d for e, a in zip(expected, actual) if (d := _compare_value(e, a, rtol, atol))), "")
    if expected is None or actual is None:
        return "" if expected is None and actual is None else "an optional value differs"
    return _compare(expected, actual, rtol, atol)


def run_case_ort(case) -> CaseResult:
    """The case through ONNX Runtime (CPU): `pass`, or `fail` with why
    (ONNX Runtime refused the model, raised while running, or answered
    differently from the stored outputs)."""
    import onnxruntime
    model = case.model
    ops = tuple(sorted(_ops_of(model)))
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        for inputs, outputs in case.data_sets:
            feed = {n: v for n, v in zip([i.name for i in model.graph.input], map(_as_value, inputs))
                    if n in names and v is not None}
            wrong = _wrong_outputs(case, ops, [_as_value(x) for x in outputs], session.run(None, feed))
            if wrong:
                return wrong
    except Exception as err:  # ONNX Runtime's refusals come as several exception types
        text = str(err).strip().splitlines()
        return CaseResult(case.name, ops, "fail", f"{type(err).__name__}: {text[0] if text else ''}"[:300])
    return _passed(case, ops)


def compare_with_ort(results, ort_results) -> dict:
    """Side by side over the same cases: per operator the cases, relax_edge's
    passes and ONNX Runtime's; the totals, and the share of the cases ONNX
    Runtime passes that relax_edge passes too."""
    per_op = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    for ours, theirs in zip(results, ort_results, strict=True):
        ours_pass, ort_pass = ours.status == "pass", theirs.status == "pass"
        kept = not ours.left_out
        row = collections.Counter(cases=1, ours=int(ours_pass), ort=int(ort_pass), both=int(ours_pass and ort_pass),
                                  in_scope=int(ours.status != "out_of_scope"), left_out=int(not kept),
                                  ort_kept=int(ort_pass and kept), both_kept=int(ours_pass and ort_pass and kept))
        totals += row
        for op in ours.ops:
            per_op[op] += row
    totals["cases"] = len(results)  # Counter addition drops zero counts; keep the keys that matter
    for key in ("ours", "ort", "both", "in_scope", "left_out", "ort_kept", "both_kept"):
        totals[key] += 0
    return {"per_op": per_op, "totals": totals,
            "of_ort_passes": totals["both"] / totals["ort"] if totals["ort"] else 0.0,
            "of_ort_passes_kept": totals["both_kept"] / totals["ort_kept"] if totals["ort_kept"] else 0.0}
