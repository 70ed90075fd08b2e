"""KV-cache decoders as transformers exports them: past keys and values in, present ones out.

An exported decoder step (optimum and ONNX Runtime GenAI convention) is

    input_ids [batch, seq], attention_mask [batch, total_seq], position_ids [batch, seq],
    past_key_values.N.key|value [batch, kv_heads, past_seq, head_dim]
      -> logits, present.N.key|value [batch, kv_heads, total_seq, head_dim]

`find_pairs` pairs each past input with its present output: by name
(`past_key_values.N.key` -> `present.N.key`, `past_N` -> `present_N`,
`past_key_N` -> `present_key_N`), or as `from_onnx(..., kv_cache={past: present})`
names them (that dict replaces the detection; `{}` turns it off). The sequence
axis of a pair is the one axis where the declared past and present shapes
differ, else the next-to-last one.

`bounds` gives each past's sequence dim lower bound 0 (an empty cache), and
with `max_context=N` bounds the context: total_seq (attention_mask's axis 1)
<= N, seq (input_ids' axis 1) <= N, past_seq <= N - 1; an entry of
`dim_bounds` for one of them that allows more is an error.

`record` checks each pair on the imported types (same rank, every other dim
equal, the present's sequence dim the past's plus new positions) and records
the pairs on `main`: `main.attrs["kv_cache"]` is a tuple of `KVPair`,
`main.attrs["max_context"]` the bound (None without one). `kv_pairs(mod)`
reads them back. Any bad pair is an OnnxImportError naming it.
"""

from __future__ import annotations

import dataclasses
import re

from ...ir.expr import Function, IRModule
from ...ir.shape import as_expr
from ...ir.types import TupleType
from .context import OnnxImportError

# the layer index is what tells a cache apart from other "past" state (e.g. a causal convolution's)
_AUTO = re.compile(r"^past(?:_key_values[._]\d+[._](?:key|value)|[._]\d+|[._](?:key|value)[._]\d+)$")


@dataclasses.dataclass(frozen=True)
class KVPair:
    """One cache tensor: graph input `past` (parameter `param` of main) grown
    along `axis` into graph output `present` (output `output` of main)."""
    past: str
    present: str
    axis: int
    param: int = -1
    output: int = -1


def _present_name(past: str) -> str:
    if past.startswith("past_key_values"):
        return "present" + past[len("past_key_values"):]
    return "present" + past[len("past"):]


def _dims(value_info):
    """The declared dims of a graph input or output (dim_value, dim_param or None each), None without a shape."""
    tt = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type") or not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]


def find_pairs(graph, kv_cache=None, initializers=()) -> list[KVPair]:
    """The past/present pairs of `graph` (see the module docstring)."""
    inputs = {i.name: i for i in graph.input if i.name not in initializers}
    outputs = {o.name: o for o in graph.output}
    if kv_cache is None:
        given = {}
        for name in inputs:
            if _AUTO.match(name):
                present = _present_name(name)
                if present not in outputs:
                    raise OnnxImportError(f"kv_cache: input {name} looks like a KV cache but the model has no "
                                          f"output {present}; name its present with kv_cache={{{name!r}: ...}}")
                given[name] = present
    elif isinstance(kv_cache, dict):
        given = dict(kv_cache)
    else:
        raise OnnxImportError(f"kv_cache must be a dict {{past input: present output}} or None, got {kv_cache!r}")
    pairs, seen = [], {}
    for past, present in given.items():
        if past not in inputs:
            raise OnnxImportError(f"kv_cache: {past!r} is not a graph input of the model "
                                  f"(its inputs: {', '.join(inputs)})")
        if present not in outputs:
            raise OnnxImportError(f"kv_cache: {present!r} (the present of {past}) is not a graph output of the "
                                  f"model (its outputs: {', '.join(outputs)})")
        if present in seen:
            raise OnnxImportError(f"kv_cache: output {present} is the present of both {seen[present]} and {past}")
        seen[present] = past
        pdims, qdims = _dims(inputs[past]), _dims(outputs[present])
        if not pdims or len(pdims) < 2:
            raise OnnxImportError(f"kv_cache: input {past} has shape {pdims}; a cache has a sequence axis "
                                  "(e.g. [batch, kv_heads, past_seq, head_dim])")
        differ = [a for a in range(len(pdims)) if qdims and len(qdims) == len(pdims) and pdims[a] != qdims[a]]
        axis = differ[0] if len(differ) == 1 else len(pdims) - 2
        if isinstance(pdims[axis], int):
            raise OnnxImportError(f"kv_cache: input {past} has a fixed size {pdims[axis]} on its sequence axis "
                                  f"{axis}; a cache's past length must be a dynamic dimension")
        pairs.append(KVPair(past, present, axis))
    return pairs


def _dim_param(graph, name: str, axis: int):
    for i in graph.input:
        if i.name == name:
            dims = _dims(i)
            if dims and len(dims) > axis and isinstance(dims[axis], str):
                return dims[axis]
    return None


def bounds(graph, pairs, dim_bounds: dict, max_context=None) -> dict:
    """`dim_bounds` with each past's sequence dim bounded below by 0 and, with `max_context`, the context
    bounded. A past's unnamed sequence dim is named as the importer names it (`<input>_dim<axis>`)."""
    out = dict(dim_bounds)
    past_dims = set()
    for p in pairs:
        past_dims.add(_dim_param(graph, p.past, p.axis) or f"{p.past}_dim{p.axis}")
    implied = {}
    if max_context is not None:
        if isinstance(max_context, bool) or not isinstance(max_context, int) or max_context < 1:
            raise OnnxImportError(f"max_context must be a positive int, got {max_context!r}")
        for d in past_dims:
            implied[d] = (0, max_context - 1)
        for name in ("input_ids", "position_ids", "attention_mask"):  # seq, seq, total_seq
            d = _dim_param(graph, name, 1)
            if d is not None and d not in past_dims:
                implied[d] = (1, max_context)
        if not implied:
            raise OnnxImportError("max_context: the model has no dynamic past, input_ids, position_ids or "
                                  "attention_mask sequence dim to bound; use dim_bounds")
    for d in past_dims | set(implied):
        given = out.get(d)
        lo, hi = implied.get(d, (0 if d in past_dims else 1, None))
        if given is None:
            out[d] = (lo, hi)
            continue
        glo, ghi = given if isinstance(given, tuple) else (lo, given)
        if hi is not None and (ghi is None or ghi > hi or glo < lo):
            raise OnnxImportError(f"dim_bounds[{d!r}] = {given!r} conflicts with max_context={max_context}, "
                                  f"which bounds {d} to {lo}..{hi}")
        out[d] = (glo, ghi)
    return out


def record(mod: IRModule, pairs, param_of: dict, output_index: dict, max_context=None) -> IRModule:
    """`mod` with the pairs checked on main's types and recorded in main's attrs."""
    func = mod.functions["main"]
    rets = func.ret_type.fields if isinstance(func.ret_type, TupleType) else [func.ret_type]
    done = []
    for p in pairs:
        param, output = param_of.get(p.past), output_index[p.present]
        if param is None:
            raise OnnxImportError(f"kv_cache: input {p.past} is a constant here, not a cache")
        past, present = func.params[param].type, rets[output]
        what = f"kv_cache: {p.present} (present of {p.past})"
        if not hasattr(present, "shape") or present.shape is None or len(present.shape) != len(past.shape):
            raise OnnxImportError(f"{what} has type {present}; it must be past's shape {past.shape} with the "
                                  "sequence axis grown")
        if present.dtype != past.dtype:
            raise OnnxImportError(f"{what} is {present.dtype}, the past {past.dtype}")
        for a, (x, y) in enumerate(zip(past.shape, present.shape)):
            if a != p.axis and as_expr(x) != as_expr(y):
                raise OnnxImportError(f"{what} has shape {list(present.shape)}; it must be past's shape "
                                      f"{list(past.shape)} with only axis {p.axis} grown (axis {a} differs)")
        grown = as_expr(present.shape[p.axis]) - as_expr(past.shape[p.axis])
        past_dim = as_expr(past.shape[p.axis]).as_var()
        uses_past = past_dim is not None and any(past_dim is atom or past_dim == atom
                                                 for mono, _ in grown.terms for atom, _ in mono)
        if (grown.is_const and grown.value <= 0) or uses_past:
            raise OnnxImportError(f"{what} has {present.shape[p.axis]} positions on axis {p.axis}, the past "
                                  f"{past.shape[p.axis]}; the present must be the past grown by the new positions")
        done.append(dataclasses.replace(p, param=param, output=output))
    attrs = {**func.attrs, "kv_cache": tuple(done), "max_context": max_context}
    return mod.with_function(Function(func.params, func.body, func.ret_type, func.name, attrs))


def kv_pairs(mod: IRModule) -> tuple:
    """The KVPairs recorded on `mod`'s main at import (empty when none)."""
    main = mod.functions.get("main")
    return tuple(main.attrs.get("kv_cache", ())) if main is not None else ()
