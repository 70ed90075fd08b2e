"""fuse: merge the tensor programs of neighbouring calls so that
intermediate tensors are never materialized.

Works on a legalized module (graph functions whose dataflow blocks bind
`call_tensor`s), inside each dataflow block, greedily in binding order
until nothing changes. The pattern of every program is read from its TIR
(transform/pattern.py), and so is the pattern of every merged result, so
rules compose into chains (GELU's five elementwise ops become one kernel;
matmul + bias + residual add becomes one).

1. Inline (compute inline): a producer that is one loop nest storing one
   value per element (ELEMENTWISE, BROADCAST or INJECTIVE; asserts
   allowed, no scratch) is computed where its consumers load it: each
   `Load(tmp, idx)` becomes the producer's value with its loop variables
   replaced by `idx`, the producer's asserts placed before the consumer's
   statement. It applies when every user of the value is a fusable call in
   the block, each loads it at affine indices, and the recomputation is
   bounded: (total reads per element - 1) * arithmetic cost <= 4, where
   reads come from `reads_per_element` (a matmul re-reads each element of
   an operand once per output column: unbounded, so nothing costly is
   inlined into it; pure data movement, cost 0, may be: see 4). An
   inlined 8/16-bit integer value is cast back to its dtype, so it wraps
   around as the producer's store made it (C computes in int); a float16 or
   bfloat16 value is rounded to its dtype as the store did (kernels compute
   them in float32), so fused and unfused programs agree.
2. Epilogue: the only user of a producer that is not inlined (REDUCTION or
   OUTPUT_FUSABLE: matmul, conv, softmax, layer_norm; or too costly to
   recompute) is applied at the producer's final store, when that user is
   one loop nest that loads the producer exactly at its loop variables and
   has the same shape (matmul + bias + relu, conv + add + clip, softmax *
   x). A value the user loads twice is bound once with a `let`.
3. The merged program keeps the size parameters generic: two members'
   parameters become one when the calls pass the same graph-level size
   expression, the others are added; the fused call passes them as its
   size_args. No symbolic dimension becomes a constant.
4. Left alone: reshape programs (free views in the host), OPAQUE programs,
   calls whose numpy broadcasting is not provable at compile time (the host
   checks those dims before the call, so they stay separate calls), values
   used outside the block's calls (function outputs, tuples, aliases,
   other blocks), which are still produced, and calls of other blocks.
   With `vectorizable` (the default), two merges that measured slower on
   the host C backend are not made, since the C compiler vectorizes a
   matmul's loop over output columns only with its operand's layout and
   without calls in the loop: pure data movement (transpose, slice) into a
   consumer that re-reads it (matmul), and an epilogue with math calls
   (erf, tanh, exp) onto an OUTPUT_FUSABLE producer. Without it, matmul +
   bias + GELU and transpose + matmul become one kernel each.
5. A loop's body is fused like a function (its dataflow blocks; what it
   returns stays), before the blocks around the loop.
6. A fused program has attrs "op": "fused", "ops": the members' operators
   in order, "pattern": its analyzed pattern; its call's span joins the
   members' spans with "+", so profiles name the source nodes. It is named
   `fused_<ops>`, unique in the module. Programs no longer called are
   removed.

Not guaranteed: the greedy order finds a good grouping, not the fewest
kernels; a fused producer is never duplicated when it has reductions;
fusion does not schedule (tile, vectorize) the merged loops.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import heapq

from ..ir.expr import CallTensor, DataflowBlock, Function, GlobalVar, IRModule, Loop, SeqExpr, VarBinding
from ..ir.shape import Proof, as_expr, prove_equal, substitute
from ..ir.visitor import ExprVisitor
from ..legalize.common import broadcast_checks
from ..tir.expr import BinOp, Cast, Index, Intrinsic, Load, ScalarVar
from ..tir.program import TensorProgram
from ..tir.stmt import Assert, Buffer, Let, Seq, Store
from ..tir.visit import StmtMutator, map_expr, walk_stmt
from .legalize import NameSupply
from .pattern import (
    Pattern,
    analyze,
    arith_cost,
    at_loop_vars,
    inline_form,
    loads_in,
    output_nest,
    reads_per_element,
    stmt_exprs,
)

__all__ = ["fuse", "MAX_EXTRA_OPS"]

MAX_EXTRA_OPS = 4   # inlining may recompute this many arithmetic operations per producer element


# ------------------------------------------------------------ rewriting TIR

def _rewrite_expr(e, sizes, buffers, on_load=None):
    """`e` with size/loop variables substituted, buffers renamed, and loads
    replaced where on_load(buffer, new indices) returns an expression."""
    def visit(node):
        if isinstance(node, Index):
            return dataclasses.replace(node, value=substitute(node.value, sizes)) if sizes else node
        if isinstance(node, Load):
            idx = tuple(_rewrite_expr(i, sizes, buffers, on_load) for i in node.indices)
            out = on_load(node.buffer, idx) if on_load is not None else None
            return out if out is not None else Load(buffers.get(node.buffer, node.buffer), idx)
        return None
    return map_expr(e, visit)


class _MergeRewrite(StmtMutator):
    """A statement of the merge's base program rebuilt: expressions through
    ex, stored buffers renamed; around(old, new) may wrap or replace each
    rebuilt Store / Let / Assert."""

    def __init__(self, ex, buffers, around=None):
        self.ex, self.buffers, self.around = ex, buffers, around

    def visit_expr(self, e):
        return self.ex(e)

    def visit_buffer(self, buffer):
        return self.buffers.get(buffer, buffer)

    def wrapped(self, old, new):
        return self.around(old, new) if self.around is not None else new

    def visit_Store(self, s: Store):
        return self.wrapped(s, super().visit_Store(s))

    def visit_Let(self, s: Let):
        return self.wrapped(s, super().visit_Let(s))

    def visit_Assert(self, s: Assert):
        return self.wrapped(s, super().visit_Assert(s))


def _rewrite_stmt(s, ex, buffers, around=None):
    """`s` rebuilt for a merge (see _MergeRewrite)."""
    return _MergeRewrite(ex, buffers, around).visit(s)


def _reads_buffers(s, buffers) -> list:
    """The loads of `buffers` in the statement's own expressions."""
    return [ld for e in stmt_exprs(s) for ld in loads_in(e) if ld.buffer in buffers]


# ------------------------------------------------------------ merging two calls

@dataclasses.dataclass
class _Member:
    """A call and its program, as seen by the merge."""
    call: CallTensor
    program: TensorProgram
    order: tuple      # (position in the original block, position in its ops, operator, span) of each op

    def positions(self, value) -> list:
        return [k for k, a in enumerate(self.call.args) if a is value]


class _Merge:
    """Arguments, input buffers and size parameters of a merged program,
    built from a base member and a second one."""

    def __init__(self, base: _Member, other: _Member):
        self.size_params = list(base.program.size_params)
        self.size_args = list(base.call.size_args)
        by_arg = dict(zip(self.size_args, self.size_params))
        self.other_sizes = {}   # other's size params -> base space
        for var, arg in zip(other.program.size_params, other.call.size_args):
            if arg in by_arg:
                self.other_sizes[var] = as_expr(by_arg[arg])
            else:
                by_arg[arg] = var
                self.size_params.append(var)
                self.size_args.append(arg)
        self.args, self.inputs = [], []
        self.base_buffers, self.other_buffers = {}, {}

    def add(self, arg, buf, sizes, table):
        """Pass `arg` (its buffer `buf`, shaped in a space mapped by `sizes`)
        and record in `table` the merged buffer that replaces `buf`."""
        for k, a in enumerate(self.args):
            if a is arg:
                table[buf] = self.inputs[k]
                return
        shape = [substitute(d, sizes) for d in buf.shape]
        table[buf] = Buffer(f"x{len(self.inputs)}", buf.dtype, shape)
        self.args.append(arg)
        self.inputs.append(table[buf])


_NARROW_INTS = ("int8", "uint8", "int16", "uint16")


def _as_stored(value, dtype: str):
    """An inlined value as its producer's store left it: C computes 8/16-bit
    integer arithmetic in int, so arithmetic is cast back to the dtype (the
    wrap-around the store did before fusion)."""
    if dtype in _NARROW_INTS and (isinstance(value, Intrinsic)
                                  or isinstance(value, BinOp) and value.op not in ("min", "max")):
        return Cast(value, dtype)
    if dtype in ("float16", "bfloat16") and not isinstance(value, (Load, Cast)):
        return Cast(value, dtype)   # rounded as the store did: the producer's result is float16 (bfloat16)
    return value


def _inline(producer: _Member, consumer: _Member, value_var, form) -> tuple:
    """The consumer with the producer computed at each of its loads."""
    ploops, value, asserts = form
    merge = _Merge(consumer, producer)
    tmp = {consumer.program.inputs[k] for k in consumer.positions(value_var)}
    for arg, buf in zip(consumer.call.args, consumer.program.inputs):
        if buf in tmp:
            for parg, pbuf in zip(producer.call.args, producer.program.inputs):
                merge.add(parg, pbuf, merge.other_sizes, merge.other_buffers)
        else:
            merge.add(arg, buf, {}, merge.base_buffers)

    def substitution(idx):
        sub = dict(merge.other_sizes)
        sub.update({loop.var: i.value for loop, i in zip(ploops, idx)})
        return sub

    def on_load(buf, idx):
        if buf in tmp:
            return _as_stored(_rewrite_expr(value, substitution(idx), merge.other_buffers), buf.dtype)
        return None

    def ex(e):
        return _rewrite_expr(e, {}, merge.base_buffers, on_load)

    def around(old, new):
        checks = [Assert(_rewrite_expr(a.cond, substitution(ld.indices), merge.other_buffers), a.message,
                         tuple(_rewrite_expr(v, substitution(ld.indices), merge.other_buffers) for v in a.values))
                  for ld in _reads_buffers(old, tmp) for a in asserts]
        return Seq([*checks, new]) if checks else new

    body = _rewrite_stmt(consumer.program.body, ex, merge.base_buffers, around)
    return merge, body, consumer.program.outputs, consumer.program.scratch


def _epilogue(producer: _Member, consumer: _Member, value_var, form) -> tuple:
    """The producer with the consumer applied at its final store."""
    cloops, cvalue, casserts = form
    nest = output_nest(producer.program)
    merge = _Merge(producer, consumer)
    for arg, buf in zip(producer.call.args, producer.program.inputs):
        merge.add(arg, buf, {}, merge.base_buffers)
    tmp = {consumer.program.inputs[k] for k in consumer.positions(value_var)}
    for arg, buf in zip(consumer.call.args, consumer.program.inputs):
        if buf not in tmp:
            merge.add(arg, buf, merge.other_sizes, merge.other_buffers)
    (cout,) = consumer.program.outputs
    out = Buffer(cout.name, cout.dtype, [substitute(d, merge.other_sizes) for d in cout.shape])

    def ex(e):
        return _rewrite_expr(e, {}, merge.base_buffers)

    def around(old, new):
        if old is not nest.store:
            return new
        value = new.value
        uses = sum(ld.buffer in tmp for e in (cvalue, *_assert_exprs(casserts)) for ld in loads_in(e))
        scalar = ScalarVar(f"{nest.store.buffer.name}_value", value.dtype) if uses > 1 else None
        loaded = _as_stored(value, nest.store.buffer.dtype) if scalar is None else scalar
        sub = dict(merge.other_sizes)
        sub.update({loop.var: i.value for loop, i in zip(cloops, new.indices)})

        def cex(e):
            return _rewrite_expr(e, sub, merge.other_buffers,
                                 lambda buf, idx: loaded if buf in tmp else None)
        store = Store(out, new.indices, cex(cvalue))
        checks = [Assert(cex(a.cond), a.message, tuple(cex(v) for v in a.values)) for a in casserts]
        stmt = Seq([*checks, store]) if checks else store
        return Let(scalar, _as_stored(value, nest.store.buffer.dtype), stmt) if scalar is not None else stmt

    body = _rewrite_stmt(producer.program.body, ex, merge.base_buffers, around)
    return merge, body, (out,), producer.program.scratch


# ------------------------------------------------------------ the pass

class _Refs(ExprVisitor):
    """How many times each variable is referenced."""

    def __init__(self):
        self.count = collections.Counter()

    def visit_Var(self, v):
        self.count[v] += 1

    def visit_binding(self, b):
        self.visit(b.value)


class _Fuser:
    def __init__(self, mod: IRModule, vectorizable: bool):
        self.vectorizable = vectorizable
        self.programs = dict(mod.tensor_programs)
        self.names = NameSupply(mod)
        self.analyses: dict = {}   # (analysis, id(program), ...) -> (program, its result): programs never change
        self.members: dict = {}    # id(binding) -> (binding, its _Member or None)
        self.failed: set = set()   # (id(var), id(producer call), ids of the consumer calls, rule) that did not fuse
        self.keep: list = []       # what the ids of `failed` name, kept alive so that no id is reused
        self.order: dict = {}      # call -> its _Member.order

    def fresh_name(self, ops) -> str:
        base = "fused_" + "_".join(ops)
        if len(base) > 60:
            base = "fused_" + "_".join(ops[:3]) + f"_and_{len(ops) - 3}_more"
        return self.names(base)

    def analysis(self, fn, program, *args):
        """fn(program, *args), computed once per program (and arguments)."""
        key = (fn, id(program), *map(id, args))
        if key not in self.analyses:
            self.analyses[key] = (program, args, fn(program, *args))
        return self.analyses[key][2]

    def pattern(self, program) -> Pattern:
        return self.analysis(analyze, program)

    def member(self, binding) -> _Member | None:
        """The binding's call when it may take part in fusion (once per binding)."""
        key = id(binding)
        if key not in self.members:
            self.members[key] = (binding, self.new_member(binding))
        return self.members[key][1]

    def new_member(self, binding) -> _Member | None:
        call = binding.value if isinstance(binding, VarBinding) else None
        if not isinstance(call, CallTensor) or call.program.name not in self.programs:
            return None
        program = self.programs[call.program.name]
        op = program.attrs.get("op")
        if op == "reshape" or self.pattern(program) is Pattern.OPAQUE:
            return None
        skip = program.attrs.get("broadcast_skip")
        if skip is not None and broadcast_checks([a.type for a in call.args], call.type, skip):
            return None
        return _Member(call, program, self.order[call])

    # rules ------------------------------------------------------------------
    def attempt(self, rule, producer: _Member, var, consumers: list):
        """rule(producer, var, consumers), or None at once where the same calls failed before
        (the rules are pure functions of the calls and their programs)."""
        key = (id(var), id(producer.call), tuple(id(c.call) for c in consumers), rule.__name__)
        if key in self.failed:
            return None
        result = rule(producer, var, consumers)
        if result is None:
            self.failed.add(key)
            self.keep.append((var, producer.call, [c.call for c in consumers]))
        return result

    def try_inline(self, producer: _Member, var, consumers: list):
        form = self.analysis(inline_form, producer.program)
        if form is None:
            return None
        _, value, asserts = form
        cost = arith_cost(value) + sum(arith_cost(e) for e in _assert_exprs(asserts))
        reads = 0
        for c in consumers:
            tmp = {c.program.inputs[k] for k in c.positions(var)}
            loads = [ld for e in _all_exprs(c.program.body) for ld in loads_in(e) if ld.buffer in tmp]
            if not all(isinstance(i, Index) for ld in loads for i in ld.indices):
                return None
            for buf in tmp:
                n = self.analysis(reads_per_element, c.program, buf)
                reads = None if n is None or reads is None else reads + n
        if (reads is None and (cost > 0 or self.vectorizable)) or \
                (reads is not None and (reads - 1) * cost > MAX_EXTRA_OPS):
            return None
        return [self.merged(_inline(producer, c, var, form), producer, c) for c in consumers]

    def try_epilogue(self, producer: _Member, var, consumers: list):
        (consumer,) = consumers
        if self.analysis(output_nest, producer.program) is None:
            return None
        form = self.analysis(inline_form, consumer.program)
        if form is None or len(var.type.shape) != len(consumer.call.type.shape):
            return None
        if not all(prove_equal(a, b) is Proof.YES for a, b in zip(var.type.shape, consumer.call.type.shape)):
            return None
        cloops, cvalue, casserts = form
        if self.vectorizable and self.pattern(producer.program) is Pattern.OUTPUT_FUSABLE and _calls_math(cvalue):
            return None
        tmp = {consumer.program.inputs[k] for k in consumer.positions(var)}
        for e in (cvalue, *_assert_exprs(casserts)):
            if any(ld.buffer in tmp and not at_loop_vars(ld, cloops) for ld in loads_in(e)):
                return None
        return self.merged(_epilogue(producer, consumer, var, form), producer, consumer)

    def merged(self, parts, producer: _Member, consumer: _Member) -> CallTensor:
        merge, body, outputs, scratch = parts
        order = tuple(sorted(set(producer.order + consumer.order)))
        ops = tuple(op for _, _, op, _ in order)
        name = self.fresh_name(ops)
        program = TensorProgram(name, tuple(merge.inputs), tuple(outputs), body, tuple(merge.size_params),
                                tuple(scratch))
        program.attrs.update({"op": "fused", "ops": ops, "pattern": self.pattern(program).value})
        self.programs[name] = program
        span = "+".join(dict.fromkeys(s for *_, s in order if s)) or None
        call = CallTensor(GlobalVar(name), merge.args, consumer.call.type, merge.size_args, span)
        self.order[call] = order
        return call

    # blocks -----------------------------------------------------------------
    def fuse_block(self, bindings: list, outside: collections.Counter) -> list:
        """The block's bindings after every fusion, made greedily in binding order (see _BlockState)."""
        state = _BlockState(self, bindings)
        while self.fuse_once(state, outside):
            pass
        return state.bindings()

    def fuse_once(self, state: "_BlockState", outside: collections.Counter) -> bool:
        """Make the first fusion in binding order; False when nothing fuses. Only the bindings
        marked dirty are tried: the others failed to fuse as consumers and have not changed since."""
        slots = state.slots
        while (k := state.next_dirty()) is not None:
            b = slots[k]
            if b is None or state.member(k) is None:
                continue
            for a in dict.fromkeys(b.value.args):
                pk = state.position.get(a)
                if pk is None or state.member(pk) is None or outside[a] or \
                        not all(state.member(u) is not None for u in state.users[a]):
                    continue
                producer = state.member(pk)
                consumers = [state.member(u) for u in state.users[a]]
                calls = self.attempt(self.try_inline, producer, a, consumers)
                if calls is not None:
                    state.replace(pk, dict(zip(state.users[a], calls)))
                    return True
                if len(consumers) == 1:
                    call = self.attempt(self.try_epilogue, producer, a, consumers)
                    if call is not None:
                        state.replace(pk, {k: call})
                        return True
        return False

    def function(self, f: Function) -> Function:
        f = self.loop_bodies(f)
        refs = _Refs()
        refs.visit(f)
        blocks = []
        for block in f.body.blocks:
            if not isinstance(block, DataflowBlock):
                blocks.append(block)
                continue
            inside = collections.Counter(a for b in block.bindings if isinstance(b.value, CallTensor)
                                         for a in b.value.args)
            outside = refs.count - inside
            for k, b in enumerate(block.bindings):
                if isinstance(b.value, CallTensor) and b.value.program.name in self.programs:
                    attrs = self.programs[b.value.program.name].attrs
                    ops = attrs.get("ops", (attrs.get("op", b.value.program.name),))
                    self.order[b.value] = tuple((k, j, op, b.value.span) for j, op in enumerate(ops))
            bindings = self.fuse_block(list(block.bindings), outside)
            blocks.append(block if len(bindings) == len(block.bindings) else DataflowBlock(bindings))
        if all(a is b for a, b in zip(blocks, f.body.blocks)):
            return f
        return Function(f.params, SeqExpr(blocks, f.body.body), f.ret_type, f.name, f.attrs)


    def loop_bodies(self, f: Function) -> Function:
        """`f` with the body of each of its loops fused."""
        blocks = []
        for block in f.body.blocks:
            out = []
            for b in block.bindings:
                if isinstance(b, VarBinding) and isinstance(b.value, Loop):
                    e = b.value
                    body = self.function(Function(e.params, e.body, name=f"{f.name}/{b.var.name}")).body
                    if body is not e.body:
                        b = VarBinding(b.var, Loop(e.trip_count, e.cond, e.init, e.params, body, e.type))
                out.append(b)
            same = all(x is y for x, y in zip(out, block.bindings))
            blocks.append(block if same else type(block)(out))
        if all(a is b for a, b in zip(blocks, f.body.blocks)):
            return f
        return Function(f.params, SeqExpr(blocks, f.body.body), f.ret_type, f.name, f.attrs)


class _BlockState:
    """A dataflow block during fusion: its bindings in place (None where a
    producer was inlined away, so positions never shift), where each variable
    is bound, the positions of the tensor-program calls reading each one, and
    the dirty positions: consumers whose fusions may succeed where they failed
    before (at first every one)."""

    def __init__(self, fuser: _Fuser, bindings: list):
        self.fuser = fuser
        self.slots = list(bindings)
        self.position = {b.var: k for k, b in enumerate(bindings)}
        self.users = collections.defaultdict(list)
        for k, b in enumerate(bindings):
            if isinstance(b.value, CallTensor):
                for a in dict.fromkeys(b.value.args):
                    self.users[a].append(k)
        self.dirty = list(range(len(bindings)))   # a heap of positions, each once (`marked`)
        self.marked = set(self.dirty)

    def next_dirty(self) -> int | None:
        """The first dirty position, now clean; None when every position is clean."""
        if not self.dirty:
            return None
        k = heapq.heappop(self.dirty)
        self.marked.discard(k)
        return k

    def mark(self, positions) -> None:
        for k in positions:
            if k not in self.marked:
                self.marked.add(k)
                heapq.heappush(self.dirty, k)

    def member(self, k: int) -> _Member | None:
        b = self.slots[k]
        return None if b is None else self.fuser.member(b)

    def bindings(self) -> list:
        return [b for b in self.slots if b is not None]

    def replace(self, pk: int, calls: dict) -> None:
        """Drop the producer at `pk`, bind the new `calls` (position -> call) in place, and mark
        dirty what a fusion may now succeed at: the changed bindings, the readers of their values
        (their producer changed) and the readers of what they read (its readers changed)."""
        producer = self.slots[pk]
        self._unread(pk, producer)
        self.slots[pk] = None
        del self.position[producer.var]
        self.users.pop(producer.var, None)
        for k, call in calls.items():
            self._unread(k, self.slots[k])
            self.slots[k] = VarBinding(self.slots[k].var, call)
            for a in dict.fromkeys(call.args):
                bisect.insort(self.users[a], k)
        for k, call in calls.items():
            self.mark([k, *self.users.get(self.slots[k].var, ())])
            for a in dict.fromkeys(call.args):
                self.mark(self.users[a])

    def _unread(self, k: int, b) -> None:
        for a in dict.fromkeys(b.value.args):
            readers = self.users.get(a)   # None: the value just dropped
            if readers is not None:
                readers.remove(k)


def _all_exprs(s) -> list:
    out = []
    walk_stmt(s, lambda x: out.extend(stmt_exprs(x)))
    return out


def _calls_math(e) -> bool:
    found = []
    map_expr(e, lambda node: found.append(node) if isinstance(node, Intrinsic) else None)
    return bool(found)


def _assert_exprs(asserts) -> list:
    return [e for a in asserts for e in (a.cond, *a.values)]


class _Called(ExprVisitor):
    """The names of the tensor programs that functions call."""

    def __init__(self, functions):
        self.names = set()
        for f in functions:
            self.visit(f)

    def visit_CallTensor(self, c):
        self.names.add(c.program.name)
        super().visit_CallTensor(c)

    def visit_binding(self, b):
        self.visit(b.value)


def fuse(mod: IRModule, vectorizable: bool = True) -> IRModule:
    """The module with fusable calls merged (see the module's description;
    `vectorizable=False` drops the guards of its point 4)."""
    fuser = _Fuser(mod, vectorizable)
    functions = {name: fuser.function(f) for name, f in mod.functions.items()}
    before, after = _Called(mod.functions.values()).names, _Called(functions.values()).names
    programs = {name: p for name, p in fuser.programs.items()
                if name in after or (name in mod.tensor_programs and name not in before)}
    return IRModule(functions, programs, mod.externs)
