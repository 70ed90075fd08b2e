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


def static_graph_inputs(model: onnx.ModelProto) -> set:
    """Graph inputs that feed, directly or through other nodes, a slot that
    must be known at compile time."""
    needed = set()
    for node in model.graph.node:
        for index in STATIC_SLOTS.get(node.op_type, ()):
            if index < len(node.input) and node.input[index]:
                needed.add(node.input[index])
    for node in reversed(model.graph.node):
        if node.op_type not in _SHAPE_ONLY and any(o in needed for o in node.output):
            needed.update(i for i in node.input if i)
    return needed & {i.name for i in model.graph.input}
