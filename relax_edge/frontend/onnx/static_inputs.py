"""Which node inputs the importer needs at compile time.

Shapes, axes, pads, repeats and the like must be known when the model is
imported (initializers, Constant nodes, or values computed from shapes).
`static_graph_inputs(model)` names the graph inputs that feed such slots, so
a caller can pass them as `constant_inputs` to `from_onnx`.
"""

from __future__ import annotations

import onnx

# op type -> indices of inputs that must be known at compile time
STATIC_SLOTS = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Pad": {1, 2, 3},
    "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1}, "Split": {1},
    "ReduceProd": {1}, "ReduceSumSquare": {1}, "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1},
    "ReduceLogSumExp": {1},
    "Squeeze": {1}, "Unsqueeze": {1}, "Range": {0, 1, 2}, "ConstantOfShape": {0},
    "Resize": {1, 2, 3}, "Trilu": {1}, "Dropout": {1, 2},
    "OneHot": {1}, "CumSum": {1},
}


# nodes whose output depends only on the *shape* of their input
_SHAPE_ONLY = {"Shape", "Size"}


def _nodes(graph):
    """The graph's nodes, each followed by those of its subgraphs (If, Loop, Scan)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _nodes(sub)


def _reads(node) -> set:
    """The names a node reads, those its subgraphs read from outer scopes included."""
    names = set(node.input)
    for attr in node.attribute:
        for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            names |= {i for n in _nodes(sub) for i in n.input} | {o.name for o in sub.output}
    return names


def static_graph_inputs(model: onnx.ModelProto) -> set:
    """Graph inputs that feed, directly or through other nodes, a slot that
    must be known at compile time (in subgraphs too)."""
    needed = set()
    nodes = list(_nodes(model.graph))
    for node in nodes:
        for index in STATIC_SLOTS.get(node.op_type, ()):
            if index < len(node.input) and node.input[index]:
                needed.add(node.input[index])
    for node in reversed(nodes):
        if node.op_type not in _SHAPE_ONLY and any(o in needed for o in node.output):
            needed.update(i for i in _reads(node) if i)
    return needed & {i.name for i in model.graph.input}
