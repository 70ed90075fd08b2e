"""What a decoder's `step` function (transform/kv_state.py) reads its state with: the checks of
tests/frontend/test_kv_dynamo.py and test_kv_opset23.py that the KV cache is read in place."""

from relax_edge.ir.expr import Call


def state_reads(step) -> tuple[dict, set]:
    """A step function's op counts and the ops that read a state input (directly or as kv_append's result)."""
    states = {p for p in step.params if p.name.startswith("state_")}
    appended, counts, readers = set(), {"kv_append": 0, "kv_attention": 0}, set()
    for block in step.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, Call):
                op = b.value.op.name
                counts[op] = counts.get(op, 0) + 1
                if op == "kv_append":
                    appended.add(b.var)
                readers |= {op for a in b.value.args if a in states or a in appended}
    return counts, readers
