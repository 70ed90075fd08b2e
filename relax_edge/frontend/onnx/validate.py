"""Checks an ONNX model must pass before any node is converted.

1. Tensors (initializers, tensor attributes): a known element type other
   than string, a rank of at most MAX_RANK, dimensions that are
   non-negative and whose size in bytes fits in int64, and exactly as much
   data as the shape says (raw bytes or typed values), so that numpy never
   infers a dimension or reads past the data.
2. External data: a relative location inside the model's folder (no `..`
   out of it, no absolute path, no symlink that leaves it), a file that
   exists, and an offset and length inside it; the bytes are read into the
   tensor here, bounded by the shape.
3. The graph: every name valid text (check_names); at least one output;
   unique graph input, initializer and node output names; every node input
   produced by an initializer, a graph input or an earlier node (a later
   producer is reported as out of order, or as a cycle); every graph output
   produced.
4. Each node against its operator's schema at the model's opset: the
   number of inputs and outputs, every required attribute present, no
   attribute the schema does not declare, and every attribute of the type
   the schema declares (tensor attributes are checked as in 1).

5. Subgraphs (If branches, Loop and Scan bodies) are checked as graphs of
   their own, 1 to 4, with the names of the enclosing scopes visible inside
   (ONNX lexical scoping): a name defined before the node that holds the
   subgraph, in its graph or in any graph around it. A subgraph may shadow
   an outer name.

Every failure is an OnnxImportError naming the tensor, the input, the output
or the node (name and op type) at fault; inside a subgraph, also the node
and attribute holding it.
"""

from __future__ import annotations

import os

import onnx
from onnx import AttributeProto, TensorProto

from .context import MAX_RANK, NO_ONNX_SCHEMA, ONNX_DTYPE_NAMES, OnnxImportError

INT64_MAX = (1 << 63) - 1

# element type -> (typed field holding the values, values per element)
_TYPED_FIELD = {
    TensorProto.FLOAT: ("float_data", 1), TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.DOUBLE: ("double_data", 1), TensorProto.COMPLEX128: ("double_data", 2),
    TensorProto.INT64: ("int64_data", 1),
    TensorProto.UINT32: ("uint64_data", 1), TensorProto.UINT64: ("uint64_data", 1),
    TensorProto.STRING: ("string_data", 1),
}
_SCALAR_NAMES = {"INT": "int", "FLOAT": "float", "STRING": "str", "TENSOR": "tensor", "GRAPH": "graph",
                 "SPARSE_TENSOR": "sparse tensor", "TYPE_PROTO": "type"}
_ATTR_TYPE_NAMES = {v: _SCALAR_NAMES.get(k) or (f"list of {_SCALAR_NAMES[k[:-1]]}" if k[:-1] in _SCALAR_NAMES
                                                else k.lower())
                    for k, v in AttributeProto.AttributeType.items()}


def node_label(node, index: int) -> str:
    """How messages name a node: its name (or op type and position) and op type."""
    return f"node {node.name or f'{node.op_type}_{index}'} ({node.op_type})"


def subgraphs(node):
    """(attribute name, GraphProto) for every graph attribute of a node."""
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH or attr.HasField("g"):
            yield attr.name, attr.g
        for j, g in enumerate(attr.graphs):
            yield f"{attr.name}[{j}]", g


def walk_nodes(graph, where: str = ""):
    """(node, index, where) for every node of the graph and of its subgraphs,
    depth first; `where` names the node and attribute holding a subgraph
    ("" in the main graph)."""
    for index, node in enumerate(graph.node):
        yield node, index, where
        for name, sub in subgraphs(node):
            inner = f"{node_label(node, index)} attribute {name}"
            yield from walk_nodes(sub, f"{where}: {inner}" if where else inner)


def _inside(where: str, msg: str) -> str:
    return f"{where}: {msg}" if where else msg


# tensors ------------------------------------------------------------------

def _itemsize(data_type: int):
    """Bytes per element (a fraction for 4-bit types)."""
    if data_type in (TensorProto.INT4, TensorProto.UINT4) or data_type == getattr(TensorProto, "FLOAT4E2M1", -1):
        return 0.5
    if data_type in (TensorProto.INT2, TensorProto.UINT2):
        return 0.25
    return onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize


def element_count(tensor, what: str) -> int:
    """The number of elements `tensor`'s dims give, after checking each dim."""
    if len(tensor.dims) > MAX_RANK:
        raise OnnxImportError(f"{what}: rank {len(tensor.dims)} is more than {MAX_RANK}")
    count, nonzero = 1, 1
    for i, d in enumerate(tensor.dims):
        if d < 0:
            raise OnnxImportError(f"{what}: dimension {i} is {d}; dimensions must be non-negative "
                                  f"(dims {list(tensor.dims)})")
        count *= d
        nonzero *= max(d, 1)  # numpy refuses these shapes even when another dim is 0
        if nonzero * 16 > INT64_MAX:
            raise OnnxImportError(f"{what}: dims {list(tensor.dims)} are too large (their size in bytes "
                                  "overflows int64)")
    return count


def check_tensor(tensor, what: str) -> None:
    """Element type, dims and data length of a TensorProto (its data in place)."""
    dt = tensor.data_type
    if dt == TensorProto.UNDEFINED:
        raise OnnxImportError(f"{what}: the element type is undefined (data_type 0)")
    if dt == TensorProto.STRING:
        raise OnnxImportError(f"{what}: string tensors are not supported")
    if dt not in TensorProto.DataType.values():
        raise OnnxImportError(f"{what}: unknown element type {dt}")
    count = element_count(tensor, what)
    if tensor.data_location == TensorProto.EXTERNAL:
        return  # checked when its bytes are read (read_external_data)
    name = ONNX_DTYPE_NAMES.get(dt, TensorProto.DataType.Name(dt).lower())
    if tensor.HasField("raw_data"):
        want = int(-(-count * _itemsize(dt) // 1))
        if len(tensor.raw_data) != want:
            raise OnnxImportError(f"{what}: raw_data holds {len(tensor.raw_data)} bytes, dims "
                                  f"{list(tensor.dims)} of {name} need {want}")
        return
    field, per = _TYPED_FIELD.get(dt, ("int32_data", 1))
    have = len(getattr(tensor, field))
    want = count * per
    if dt in (TensorProto.INT4, TensorProto.UINT4):
        want = (count + 1) // 2
    if dt in (TensorProto.INT2, TensorProto.UINT2):   # four to an int32_data value
        want = (count + 3) // 4
    if have != want:
        raise OnnxImportError(f"{what}: {field} holds {have} values, dims {list(tensor.dims)} of {name} "
                              f"need {want}")


# external data -------------------------------------------------------------

def _external_info(tensor) -> dict:
    return {e.key: e.value for e in tensor.external_data}


def read_external_data(tensor, what: str, base_dir: str | None) -> None:
    """Read an external tensor's bytes into raw_data, inside `base_dir` only."""
    info = _external_info(tensor)
    location = info.get("location", "")
    if base_dir is None:
        raise OnnxImportError(f"{what}: its data is in the external file '{location}'; import the "
                              "model from its path so that the file can be found next to it")
    if not location:
        raise OnnxImportError(f"{what}: external data gives no location")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        raise OnnxImportError(f"{what}: external data location '{location}' is an absolute path; "
                              "it must be relative to the model's folder")
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise OnnxImportError(f"{what}: external data location '{location}' is outside the model's folder")
    if not os.path.isfile(path):
        raise OnnxImportError(f"{what}: external data file '{location}' does not exist next to the model")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        raise OnnxImportError(f"{what}: external data offset/length are not integers "
                              f"({info.get('offset')!r}, {info.get('length')!r})") from None
    size = os.path.getsize(path)
    want = int(-(-element_count(tensor, what) * _itemsize(tensor.data_type) // 1))
    if length is None:
        length = want
    if offset < 0 or length < 0 or offset + length > size:
        raise OnnxImportError(f"{what}: external data offset {offset} + length {length} runs past the end "
                              f"of '{location}' ({size} bytes)")
    if length != want:
        raise OnnxImportError(f"{what}: external data length {length} bytes, dims {list(tensor.dims)} need {want}")
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT
    tensor.raw_data = data


def model_tensors(graph, where: str = ""):
    """(tensor, description) for every initializer and tensor attribute of the
    graph and of its subgraphs."""
    for init in graph.initializer:
        yield init, _inside(where, f"initializer {init.name}")
    for index, node in enumerate(graph.node):
        label = _inside(where, node_label(node, index))
        for attr in node.attribute:
            if attr.type == AttributeProto.TENSOR or attr.HasField("t"):
                yield attr.t, f"{label}: attribute {attr.name}"
            for j, t in enumerate(attr.tensors):
                yield t, f"{label}: attribute {attr.name}[{j}]"
        for name, sub in subgraphs(node):
            yield from model_tensors(sub, f"{label} attribute {name}")


def load_external_data(model, base_dir: str | None) -> None:
    for tensor, what in model_tensors(model.graph):
        if tensor.data_location == TensorProto.EXTERNAL:
            check_tensor(tensor, what)   # element type and dims, before the bytes are sized and read
            read_external_data(tensor, what, base_dir)


# the graph ----------------------------------------------------------------

def check_names(graph, where: str = "") -> None:
    """Every name is text (protobuf hands back bytes where a string field
    holds invalid UTF-8), in the graph and its subgraphs."""
    try:
        _check_names(graph)
    except OnnxImportError as err:
        raise OnnxImportError(_inside(where, str(err))) from None
    for index, node in enumerate(graph.node):
        for name, sub in subgraphs(node):
            check_names(sub, _inside(where, f"{node_label(node, index)} attribute {name}"))


def _check_names(graph) -> None:
    def bad(value):
        return not isinstance(value, str)
    for what, items in (("graph input", graph.input), ("graph output", graph.output),
                        ("initializer", graph.initializer)):
        for i, item in enumerate(items):
            if bad(item.name):
                raise OnnxImportError(f"{what} {i}: the name {item.name!r} is not valid UTF-8")
            if hasattr(item, "type") and item.type.HasField("tensor_type"):
                for j, d in enumerate(item.type.tensor_type.shape.dim):
                    if bad(d.dim_param):
                        raise OnnxImportError(f"{what} {item.name} dimension {j}: the name {d.dim_param!r} "
                                              "is not valid UTF-8")
    for index, node in enumerate(graph.node):
        for field in ("name", "op_type", "domain"):
            if bad(getattr(node, field)):
                raise OnnxImportError(f"node {index}: the {field} {getattr(node, field)!r} is not valid UTF-8")
        for field in ("input", "output"):
            for name in getattr(node, field):
                if bad(name):
                    raise OnnxImportError(f"{node_label(node, index)}: the {field} name {name!r} is not valid UTF-8")
        for attr in node.attribute:
            if bad(attr.name):
                raise OnnxImportError(f"{node_label(node, index)}: the attribute name {attr.name!r} "
                                      "is not valid UTF-8")


def check_graph(graph, outer: frozenset = frozenset(), where: str = "") -> None:
    """The structure of `graph` (3 of the module docstring) and of its
    subgraphs (5); `outer` holds the names visible from enclosing scopes."""
    try:
        _check_graph(graph, outer, where)
    except OnnxImportError as err:
        raise OnnxImportError(_inside(where, str(err))) from None


def _check_graph(graph, outer: frozenset, where: str) -> None:
    if not graph.output:
        raise OnnxImportError("the graph has no outputs")
    if where and graph.sparse_initializer:
        raise OnnxImportError(f"initializer {graph.sparse_initializer[0].values.name}: "
                              "sparse initializers are not supported")
    known: dict[str, str] = {}
    for init in graph.initializer:
        if init.name in known:
            raise OnnxImportError(f"initializer {init.name}: two initializers have this name")
        known[init.name] = f"initializer {init.name}"
    seen_inputs = set()
    for inp in graph.input:
        if inp.name in seen_inputs:
            raise OnnxImportError(f"graph input {inp.name}: two graph inputs have this name")
        seen_inputs.add(inp.name)
        known.setdefault(inp.name, f"graph input {inp.name}")
    producer: dict[str, int] = {}
    for index, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                first = graph.node[producer[out]]
                raise OnnxImportError(f"{node_label(node, index)}: output '{out}' is also written by "
                                      f"{node_label(first, producer[out])}")
            if out in known:
                raise OnnxImportError(f"{node_label(node, index)}: output '{out}' overwrites the {known[out]}")
            producer[out] = index
    available = set(known)
    for index, node in enumerate(graph.node):
        if not node.op_type:
            raise OnnxImportError(f"{node_label(node, index)}: the node has no op type")
        for name in node.input:
            if not name or name in available or (name in outer and name not in producer):
                continue
            if name in producer:
                later = producer[name]
                kind = "a cycle" if _reaches(graph, producer, later, index) else "out of topological order"
                raise OnnxImportError(f"{node_label(node, index)}: input '{name}' is produced by the later "
                                      f"{node_label(graph.node[later], later)} ({kind})")
            raise OnnxImportError(f"{node_label(node, index)}: input '{name}' is not produced by any node, "
                                  "initializer or graph input")
        for attr, sub in subgraphs(node):
            scope = frozenset(outer | available)
            inner = f"{node_label(node, index)} attribute {attr}"
            try:
                _check_graph(sub, scope, inner)
            except OnnxImportError as err:
                raise OnnxImportError(f"{inner}: {err}") from None
        available.update(o for o in node.output if o)
    for out in graph.output:
        if out.name not in available and out.name not in outer:
            raise OnnxImportError(f"graph output {out.name} is not produced by any node, initializer or input")


def _reaches(graph, producer, start: int, target: int) -> bool:
    """Whether node `target` is among the producers `start` depends on."""
    stack, seen = [start], set()
    while stack:
        i = stack.pop()
        if i == target:
            return True
        if i in seen:
            continue
        seen.add(i)
        stack.extend(producer[n] for n in graph.node[i].input if n in producer)
    return False


# nodes against their schemas ----------------------------------------------

def check_schemas(graph, opset: int) -> None:
    """Every node of the graph and of its subgraphs against its schema (4)."""
    for node, index, where in walk_nodes(graph):
        try:
            check_node_schema(node, index, opset)
        except OnnxImportError as err:
            raise OnnxImportError(_inside(where, str(err))) from None


def check_node_schema(node, index: int, opset: int) -> None:
    label = node_label(node, index)
    if node.domain not in ("", "ai.onnx") or node.op_type in NO_ONNX_SCHEMA:
        return   # no ONNX schema: its converter checks it (an unknown operator is reported as unsupported)
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        raise OnnxImportError(f"{label}: operator {node.op_type} does not exist at opset {opset}") from None
    n_in = len(node.input)
    while n_in and not node.input[n_in - 1]:
        n_in -= 1  # trailing omitted optional inputs
    if not schema.min_input <= n_in <= schema.max_input:
        if schema.min_input == schema.max_input:
            want = str(schema.min_input)
        elif schema.max_input < 1 << 30:
            want = f"{schema.min_input} to {schema.max_input}"
        else:
            want = f"at least {schema.min_input}"
        raise OnnxImportError(f"{label}: has {n_in} inputs, {node.op_type}-{schema.since_version} takes {want}")
    if not schema.min_output <= len(node.output) <= schema.max_output:
        raise OnnxImportError(f"{label}: has {len(node.output)} outputs, {node.op_type}-{schema.since_version} "
                              f"gives {schema.min_output} to {schema.max_output}")
    names = set()
    for attr in node.attribute:
        if attr.name in names:
            raise OnnxImportError(f"{label}: attribute {attr.name} is given twice")
        names.add(attr.name)
        spec = schema.attributes.get(attr.name)
        if spec is None:
            raise OnnxImportError(f"{label}: {node.op_type}-{schema.since_version} has no attribute {attr.name}")
        want = int(spec.type)
        if attr.type != want:
            got = _ATTR_TYPE_NAMES.get(attr.type, f"attribute type {attr.type}")
            if attr.type in (AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING):
                value = onnx.helper.get_attribute_value(attr)
                got += f" {value.decode(errors='replace') if isinstance(value, bytes) else value!r}"
            raise OnnxImportError(f"{label}: attribute {attr.name} must be {_ATTR_TYPE_NAMES.get(want, want)}, "
                                  f"got {got}")
        if attr.type == AttributeProto.TENSOR:
            check_tensor(attr.t, f"{label}: attribute {attr.name}")
    for name, spec in schema.attributes.items():
        if spec.required and name not in names:
            raise OnnxImportError(f"{label}: required attribute {name} is missing")
