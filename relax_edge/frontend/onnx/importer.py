"""ONNX importer: an ONNX model to an IRModule with symbolic dimensions.

1. Every graph input becomes a parameter. A named dynamic dimension
   (`dim_param`) becomes one SizeVar shared by every input that names it; an
   unnamed one gets a fresh SizeVar. `dim_bounds` bounds them,
   `input_shapes` pins dimensions to numbers, `constant_inputs` turns graph
   inputs into constants.
2. Initializers and Constant nodes are known arrays; shape subgraphs are
   evaluated at import time on symbolic integers (see values.py), and calls
   whose arguments are all known are folded.
3. Each node is converted by the converter registered for its op type
   (convert_*.py); its name becomes the span of the calls it emits.
4. Before converting anything, every unsupported operator of the model is
   listed at once with its count, those inside If, Loop and Scan bodies
   included.
5. Bad input fails safe: validate.py checks the model's structure, node
   schemas, every tensor's dims and data, and external data locations
   before anything is converted; constants computed at import time are
   capped by `max_constant_bytes` before they are made; and any error
   escaping a converter still becomes an OnnxImportError naming the node.

6. Subgraphs (If branches, Loop and Scan bodies) are converted by
   `run_graph` in a scope over the enclosing one (ONNX lexical scoping),
   their nodes' spans prefixed by the holding node's. convert/control.py
   folds an If whose condition is known and emits the IR's `If` otherwise;
   it unrolls a Loop or Scan of a few iterations known at compile time and
   emits the IR's `Loop` otherwise. Neither an `If` nor a `Loop` can stand
   in a dataflow block, so a model that needs one is imported again without
   dataflow blocks (the runs between them become dataflow blocks after).

Not handled: sequence and optional values, sparse initializers, external
data outside the model's folder, operators of another domain without a converter
(com.microsoft's are in convert/contrib_llm.py).
"""

from __future__ import annotations

import collections
import contextlib
import os
import re

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import RelaxEdgeError
from ...ir.builder import Builder
from ...ir.expr import BindingBlock, DataflowBlock, Function, If, IRModule, Loop, SeqExpr, Tuple, Var
from ...ir.shape import SizeVar
from ...ir.types import TensorType
from ...ir.verify import verify
from ...transform.kv_state import add_step
from . import context, kv_cache, validate
from .context import CONVERTERS, MAX_RANK, ConvertContext, OnnxImportError, converter_key, held_array, onnx_dtype

MIN_OPSET = 7
MAX_OPSET = 28
MIN_IR_VERSION = 3


def _load(model) -> tuple[onnx.ModelProto, str | None]:
    """The ModelProto, and the folder its external data may live in (None
    when the model was not given by path)."""
    if isinstance(model, onnx.ModelProto):
        return model, None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.isfile(os.path.join(path, "genai_config.json")):
            raise OnnxImportError(f"{path}: an ONNX Runtime GenAI model folder; import it with rxe.from_genai")
        if not os.path.isfile(path):
            raise OnnxImportError(f"{path}: no such file")
        try:
            # external data is read by validate.load_external_data, inside the model's folder only
            proto = onnx.load(path, load_external_data=False)
        except Exception as err:
            raise OnnxImportError(f"{path}: not a readable ONNX model ({type(err).__name__}: {err})") from None
        return proto, os.path.dirname(os.path.abspath(path))
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model)), None
        except Exception as err:
            raise OnnxImportError(f"not a readable ONNX model ({type(err).__name__}: {err})") from None
    raise OnnxImportError(f"cannot import {type(model).__name__}: give a path, bytes or an onnx.ModelProto")


def _default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise OnnxImportError("the model imports no version of the default ONNX operator set")


def _identifier(name: str, fallback: str) -> str:
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit():
        ident = f"{fallback}_{ident}" if ident else fallback
    return ident


class NeedsBindingBlocks(Exception):
    """Raised by a converter that must emit an `If` or a `Loop` while the importer builds
    a dataflow block: the importer starts again without dataflow blocks."""


class ImportContext(ConvertContext):
    """A ConvertContext that can also convert the node's subgraphs."""

    def __init__(self, importer: "OnnxImporter", *args):
        super().__init__(*args)
        self.importer = importer

    def graph_attr(self, name: str) -> onnx.GraphProto:
        if not self.has_attr(name):
            raise self.error(f"attribute {name} (a graph) is required")
        return self._attrs[name].g

    def run_graph(self, graph, inputs: list, label: str) -> list:
        """Convert subgraph `graph` with its inputs bound to `inputs`; its outputs' values."""
        return self.importer.run_graph(graph, inputs, f"{self.span}/{label}", self)

    def emit_if(self, cond, then_body, else_body, join):
        if self.importer.dataflow:
            raise NeedsBindingBlocks
        return self.builder.emit_if(cond, then_body, else_body, name=_identifier(self.span, "if"), join=join)

    def emit_loop(self, trip_count, cond, init, body):
        if self.importer.dataflow:
            raise NeedsBindingBlocks
        return self.builder.emit_loop(trip_count, cond, init, body, name=_identifier(self.span, "loop"))


class OnnxImporter:
    def __init__(self, model, dim_bounds=None, input_shapes=None, constant_inputs=None,
                 max_constant_bytes=None, kv_cache=None, max_context=None):
        self.model, self.base_dir = _load(model)
        self.graph = self.model.graph
        if max_constant_bytes is None:
            max_constant_bytes = context.DEFAULT_MAX_CONSTANT_BYTES
        if not isinstance(max_constant_bytes, int) or max_constant_bytes < 0:
            raise OnnxImportError(f"max_constant_bytes must be a non-negative int, got {max_constant_bytes!r}")
        self.max_constant_bytes = max_constant_bytes
        self.where = "the model"  # what is being imported, for unexpected errors
        self.dim_bounds = dict(dim_bounds or {})
        self.input_shapes = dict(input_shapes or {})
        self.constant_inputs = dict(constant_inputs or {})
        self.size_vars: dict[str, SizeVar] = {}
        self.values = collections.ChainMap()
        self.builder = Builder()
        self.dataflow = True  # build the main function as one dataflow block (see NeedsBindingBlocks)
        self.kv_cache, self.max_context = kv_cache, max_context  # see kv_cache.py

    # checks -------------------------------------------------------------
    def check_model(self) -> None:
        """Everything about the model that can be checked before converting
        a node: versions, operator support, graph structure, node schemas,
        and every initializer's and tensor attribute's shape and data."""
        if self.model.ir_version < MIN_IR_VERSION:
            raise OnnxImportError(f"the model has ir_version {self.model.ir_version}; ONNX models need at "
                                  f"least {MIN_IR_VERSION} (the first with operator set imports)")
        self.opset = _default_opset(self.model)
        if not 1 <= self.opset <= MAX_OPSET:
            raise OnnxImportError(f"the model uses ONNX opset {self.opset}; relax_edge imports "
                                  f"opsets {MIN_OPSET} to {MAX_OPSET}")
        validate.check_names(self.graph)
        if self.opset < MIN_OPSET:
            self.check_old_opset()
        self.check_operators()
        validate.check_graph(self.graph)
        if self.graph.sparse_initializer:
            raise OnnxImportError(f"initializer {self.graph.sparse_initializer[0].values.name}: "
                                  "sparse initializers are not supported")
        validate.check_schemas(self.graph, self.opset)
        validate.load_external_data(self.model, self.base_dir)
        for tensor, what in validate.model_tensors(self.graph):
            validate.check_tensor(tensor, what)
        unknown = set(self.dim_bounds) - self._dim_params()
        if unknown:
            raise OnnxImportError(f"dim_bounds names {', '.join(sorted(unknown))}, which no input "
                                  f"dimension uses (the model's named dims: "
                                  f"{', '.join(sorted(self._dim_params())) or 'none'})")
        inits = {i.name for i in self.graph.initializer} | set(self.constant_inputs)
        self.kv_pairs = kv_cache.find_pairs(self.graph, self.kv_cache, inits)
        self.dim_bounds = kv_cache.bounds(self.graph, self.kv_pairs, self.dim_bounds, self.max_context)

    def check_operators(self) -> None:
        """List every operator without a converter at once, subgraphs included."""
        missing = collections.Counter()
        inside = collections.defaultdict(collections.Counter)
        for node, _, where in validate.walk_nodes(self.graph):
            op = converter_key(node.domain, node.op_type)
            if not node.op_type or op in CONVERTERS:
                continue
            missing[op] += 1
            if where:
                inside[op][where.split(": ")[0]] += 1
        if missing:
            def entry(op, n):
                where = ""
                if inside[op]:
                    k = sum(inside[op].values())
                    where = f", {'' if k == n else f'{k} of them '}inside {'; '.join(sorted(inside[op]))}"
                return f"{op} ({n} node{'s' * (n > 1)}{where})"
            listed = ", ".join(entry(op, n) for op, n in sorted(missing.items()))
            raise OnnxImportError(f"unsupported ONNX operators: {listed}")

    def check_old_opset(self) -> None:
        """Below opset 7 (legacy broadcasting, consumed_inputs), accept a model
        only if each of its operators is defined as it is at opset 7."""
        changed = set()
        for node, _, _ in validate.walk_nodes(self.graph):
            try:
                old = onnx.defs.get_schema(node.op_type, self.opset, "").since_version
                new = onnx.defs.get_schema(node.op_type, MIN_OPSET, "").since_version
            except onnx.defs.SchemaError:
                continue  # unknown operators are reported as unsupported
            if old != new:
                changed.add(node.op_type)
        if changed:
            raise OnnxImportError(
                f"the model uses ONNX opset {self.opset}; relax_edge imports opsets {MIN_OPSET} to "
                f"{MAX_OPSET}, and older ones only for operators unchanged since; "
                f"these changed: {', '.join(sorted(changed))}")

    def _dim_params(self) -> set:
        return {d.dim_param for i in self.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}

    # inputs -------------------------------------------------------------
    def size_var(self, name: str) -> SizeVar:
        if name not in self.size_vars:
            bound = self.dim_bounds.get(name)
            lower, upper = 1, None
            if isinstance(bound, tuple):
                lower, upper = bound
            elif bound is not None:
                upper = bound
            try:
                self.size_vars[name] = SizeVar(_identifier(name, "dim"), upper=upper, lower=lower)
            except RelaxEdgeError as err:
                raise OnnxImportError(f"dim_bounds[{name!r}]: {err}") from None
        return self.size_vars[name]

    def input_type(self, inp) -> TensorType:
        what = f"input {inp.name}"
        if not inp.type.HasField("tensor_type"):
            raise OnnxImportError(f"{what}: only tensor inputs are supported")
        tt = inp.type.tensor_type
        dtype = onnx_dtype(tt.elem_type, what)
        pinned = self.input_shapes.get(inp.name)
        if not tt.HasField("shape"):
            if pinned is None:
                raise OnnxImportError(f"{what}: the model gives no shape; pass input_shapes={{'{inp.name}': ...}}")
            dims_proto = [None] * len(pinned)
        else:
            dims_proto = list(tt.shape.dim)
        if len(dims_proto) > MAX_RANK:
            raise OnnxImportError(f"{what}: rank {len(dims_proto)} is more than {MAX_RANK}")
        if pinned is not None and len(pinned) != len(dims_proto):
            raise OnnxImportError(f"{what}: input_shapes gives rank {len(pinned)}, "
                                  f"the model has rank {len(dims_proto)}")
        dims = []
        for i, d in enumerate(dims_proto):
            p = pinned[i] if pinned is not None else None
            if isinstance(p, int):
                if d is not None and d.HasField("dim_value") and d.dim_value != p:
                    raise OnnxImportError(f"{what} dimension {i}: input_shapes pins {p}, the model says {d.dim_value}")
                dims.append(p)
            elif isinstance(p, str):
                dims.append(self.size_var(p))
            elif d is not None and d.HasField("dim_value") and d.dim_value < 0:
                raise OnnxImportError(f"{what} dimension {i} is {d.dim_value}; dimensions must be non-negative")
            elif d is not None and d.HasField("dim_value") and d.dim_value > 0:
                dims.append(d.dim_value)
            elif d is not None and d.dim_param:
                dims.append(self.size_var(d.dim_param))
            else:
                dims.append(self.size_var(f"{inp.name}_dim{i}"))
        static = [d for d in dims if isinstance(d, int)]
        if int(np.prod(static, dtype=object)) * np.dtype(dtype).itemsize > validate.INT64_MAX:
            raise OnnxImportError(f"{what}: dims {static} are too large (their size in bytes overflows int64)")
        return TensorType(dims, dtype)

    # conversion ---------------------------------------------------------
    def run(self) -> IRModule:
        try:
            return self.convert()
        except RelaxEdgeError:
            raise
        except RecursionError as err:
            raise OnnxImportError(f"{self.where}: nested too deeply to import") from err
        except MemoryError as err:
            raise OnnxImportError(f"{self.where}: ran out of memory while importing") from err
        except Exception as err:  # a converter missed a case: still name what was being imported
            raise OnnxImportError(f"{self.where}: cannot be imported "
                                  f"({type(err).__name__}: {err})") from err

    def convert(self) -> IRModule:
        self.check_model()
        try:
            return self.convert_main()
        except NeedsBindingBlocks:
            self.dataflow = False
            self.values, self.builder = collections.ChainMap(), Builder()
            return self.convert_main()

    def convert_main(self) -> IRModule:
        for init in self.graph.initializer:
            self.where = f"initializer {init.name}"
            try:
                self.values[init.name] = held_array(numpy_helper.to_array(init))
            except Exception as err:
                raise OnnxImportError(f"initializer {init.name}: cannot be read ({err})") from None
        params = []
        for inp in self.graph.input:
            self.where = f"graph input {inp.name}"
            if inp.name in self.values:
                continue  # an initializer listed as an input (old exporters)
            if inp.name in self.constant_inputs:
                self.values[inp.name] = np.asarray(self.constant_inputs[inp.name])
                continue
            var = Var(_identifier(inp.name, "input"), self.input_type(inp))
            self.values[inp.name] = var
            params.append(var)
        self.values[""] = None  # an omitted optional input
        with self.builder.function("main", params):
            with self.builder.dataflow() if self.dataflow else contextlib.nullcontext():
                for index, node in enumerate(self.graph.node):
                    self.where = validate.node_label(node, index)
                    self.convert_node(index, node)
                outputs = []
                for o in self.graph.output:
                    self.where = f"graph output {o.name}"
                    outputs.append(self.output_value(o))
            result = outputs[0] if len(outputs) == 1 else self.builder.emit(Tuple(outputs))
            self.builder.ret(result)
        mod = self.builder.get(verify=self.dataflow)
        mod = mod if self.dataflow else _dataflow_runs(mod)
        if not self.kv_pairs and self.max_context is None:
            return mod
        self.where = "kv_cache"
        names = [i.name for i in self.graph.input if isinstance(self.values.get(i.name), Var)]  # params' names
        mod = kv_cache.record(mod, self.kv_pairs, {n: i for i, n in enumerate(names)},
                              {o.name: i for i, o in enumerate(self.graph.output)}, self.max_context)
        return add_step(mod) if self.dataflow else mod

    def run_graph(self, graph, inputs: list, prefix: str, holder: ConvertContext) -> list:
        """Convert subgraph `graph` in a new scope over the current one, its
        inputs bound to `inputs`, its nodes' spans prefixed by `prefix`; the
        values of its outputs."""
        if len(inputs) != len(graph.input):
            raise holder.error(f"the subgraph {graph.name or prefix} takes {len(graph.input)} inputs, "
                               f"{len(inputs)} are given")
        saved, saved_where = self.values, self.where
        self.values = self.values.new_child()
        try:
            for init in graph.initializer:
                try:
                    self.values[init.name] = held_array(numpy_helper.to_array(init))
                except Exception as err:
                    raise holder.error(f"initializer {init.name} of {prefix}: cannot be read ({err})") from None
            for inp, value in zip(graph.input, inputs):
                self.check_bound_input(inp, value, prefix, holder)
                self.values[inp.name] = value
            for index, node in enumerate(graph.node):
                self.where = f"{prefix}: {validate.node_label(node, index)}"
                self.convert_node(index, node, f"{prefix}/")
            outs = []
            for o in graph.output:
                if o.name not in self.values:
                    raise holder.error(f"output {o.name} of {prefix} is not produced by any node")
                outs.append(self.values[o.name])
            return outs
        finally:
            self.values, self.where = saved, saved_where

    def check_bound_input(self, inp, value, prefix: str, holder: ConvertContext) -> None:
        """A subgraph input's declared type, where given, against the value bound to it."""
        if not inp.HasField("type"):
            return
        if not inp.type.HasField("tensor_type"):
            raise holder.error(f"input {inp.name} of {prefix} is not a tensor: sequence and optional "
                               "values are not supported")
        elem = inp.type.tensor_type.elem_type
        if elem and value is not None:
            dtype = onnx_dtype(elem, f"input {inp.name} of {prefix}")
            got = holder.type_of(value).dtype
            if got != dtype:
                raise holder.error(f"input {inp.name} of {prefix} is declared {dtype}, the value given is {got}")

    def convert_node(self, index: int, node, prefix: str = "") -> None:
        span = prefix + (node.name or f"{node.op_type}_{index}")
        ctx = ImportContext(self, self.builder, node, self.opset, span, self.max_constant_bytes)
        names = list(node.input)
        while names and not names[-1]:
            names.pop()  # trailing omitted optional inputs
        inputs = []
        for name in names:
            if name not in self.values:
                raise ctx.error(f"input '{name}' is not produced by any earlier node, initializer or graph input")
            inputs.append(self.values[name])
        try:
            out = CONVERTERS[converter_key(node.domain, node.op_type)](ctx, inputs)
        except OnnxImportError as err:
            if str(err).startswith("node "):
                raise
            raise ctx.error(str(err)) from None
        except RelaxEdgeError as err:
            raise ctx.error(str(err)) from None
        outs = out if isinstance(out, list) else [out]
        wanted = [o for o in node.output]
        if len(outs) < len([o for o in wanted if o]):
            raise ctx.error(f"produces {len(outs)} outputs, the model uses {len(wanted)}")
        for name, value in zip(wanted, outs):
            if name:
                self.values[name] = value

    def output_value(self, out):
        if out.name not in self.values:
            raise OnnxImportError(f"graph output {out.name} is not produced by any node")
        value = self.values[out.name]
        ctx = ConvertContext(self.builder, onnx.helper.make_node("Identity", [out.name], [out.name]),
                             self.opset, f"output {out.name}", self.max_constant_bytes)
        expr = ctx.tensor(value)
        emit = self.builder.emit_output if self.dataflow else self.builder.emit
        return emit(expr, name=_identifier(out.name, "output"))


def _dataflow_runs(mod: IRModule) -> IRModule:
    """Main with each run of bindings between its ifs and loops made a dataflow block
    (its variables stay visible after it), so that passes such as fusion
    still see them; the module verified."""
    func = mod.functions["main"]
    blocks, run = [], []
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, (If, Loop)):
                if run:
                    blocks.append(DataflowBlock(run))
                blocks.append(BindingBlock([b]))
                run = []
            else:
                run.append(b)
    if run:
        blocks.append(DataflowBlock(run))
    main = Function(func.params, SeqExpr(blocks, func.body.body), func.ret_type, func.name, func.attrs)
    return verify(mod.with_function(main))


def from_onnx(model, dim_bounds=None, input_shapes=None, constant_inputs=None,
              max_constant_bytes=None, kv_cache=None, max_context=None) -> IRModule:
    """Import an ONNX model (path, bytes or ModelProto) as an IRModule.

    dim_bounds: {dim_param: upper} or {dim_param: (lower, upper)}.
    input_shapes: {input name: shape}, each dim an int (pinned), a str (a
        named size variable) or None (as the model says).
    constant_inputs: {input name: array} to treat graph inputs as constants.
    max_constant_bytes: the most bytes a constant computed at import time
        (ConstantOfShape, Expand, Tile, Range, folded calls) may take; it is
        checked before the constant is made. Default:
        `relax_edge.frontend.onnx.context.DEFAULT_MAX_CONSTANT_BYTES` (1 GiB).
    kv_cache: {past input: present output} of a KV-cache decoder; by default
        the pairs are found by name (past_key_values.N.key -> present.N.key,
        past_N -> present_N); `{}` finds none. Each past's sequence dim gets
        lower bound 0. The checked pairs are `main.attrs["kv_cache"]`
        (frontend/onnx/kv_cache.py, `kv_pairs(mod)`).
    max_context: bound of the context: total_seq <= N, seq <= N, past_seq
        <= N - 1 (as dim_bounds would give; a conflicting entry is an error).

    Any problem with the model raises OnnxImportError naming the node,
    initializer, input or output at fault.
    """
    from . import convert  # noqa: F401  (registers the converters)
    return OnnxImporter(model, dim_bounds, input_shapes, constant_inputs, max_constant_bytes,
                        kv_cache, max_context).run()
