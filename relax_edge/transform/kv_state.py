"""kv_state: a decoder's `step` function, with the KV cache as state updated in place.

`add_step(mod)` adds a graph function `step` beside `main` when main is a
KV-cache decoder (its past/present pairs recorded at import: frontend/onnx/
kv_cache.py) whose context is bounded. main stays the model as exported.

    step(input_ids (1, seq), attention_mask (1, total_seq)[, position_ids (1, seq)],
         state_0 ... state_{2L-1} (1, kv_heads, max_context, head_dim)) -> logits (1, 1, vocab)

1. Batch is 1 and past = total_seq - seq (so the bound check of total_seq
   at the input, with seq as its lower bound, keeps every write inside the
   state: attrs["bind_lower"]).
2. Each present `concat(past, new, axis)` becomes `kv_append(state, new,
   offset=past)`: a write of the new positions only.
3. Attention over a present, in the form transformers exports (q @ k^T,
   times or divided by a constant, plus a mask, softmax, @ v; K and V
   possibly repeated for grouped-query attention by reshape, broadcast_to,
   reshape), becomes `kv_attention(q, k_state, v_state, mask)`: it reads the
   state in place, with no copy of the past and no repeat of K/V. Also the
   form of ONNX Attention (frontend/onnx/convert/attention.py): q and k each
   times sqrt(scale), a 2-D or 3-D bias, and where(fully masked rows, 0, p)
   before @ v (kept as a where around kv_attention's result). Any other
   use of a present reads a copy of its valid positions (correct, O(context)).
4. Only the last position's logits are computed: the LM head (a matmul or
   matmul_nbits with a constant weight producing the logits) gets the last row of its input;
   otherwise the logits are sliced at the end.
5. The step returns the logits only; a present is never an output.

When main does not fit (no attention_mask of shape (batch, total_seq), an
input other than input_ids / attention_mask / position_ids / the pasts,
control flow, an unbounded context), no step is added and
`mod.functions["main"].attrs["no_step"]` says why.
"""

from __future__ import annotations

from ..ir.builder import Builder
from ..ir.expr import Call, Constant, Function, IRModule, MatchCast, Tuple, TupleGetItem, Var
from ..ir.shape import Proof, SizeVar, as_expr, prove_equal, substitute
from ..ir.types import TensorType, TupleType
from ..op.registry import make_call

__all__ = ["add_step", "STEP", "STATE_PREFIX", "step_reason"]

STEP = "step"
STATE_PREFIX = "state_"
TOKEN_INPUTS = ("input_ids", "attention_mask", "position_ids")


class _NoStep(Exception):
    pass


def step_reason(mod: IRModule) -> str | None:
    """Why `mod` has no step function (None when it has one)."""
    if STEP in mod.functions:
        return None
    main = mod.functions.get("main")
    if main is None:
        return "the module has no main function"
    return (main.attrs or {}).get("no_step") or "the model has no KV cache (no past/present pairs were found)"


def add_step(mod: IRModule) -> IRModule:
    """`mod` with a `step` function when main is a bounded KV-cache decoder (see the module doc)."""
    main = mod.functions.get("main")
    if main is None or STEP in mod.functions or not (main.attrs or {}).get("kv_cache"):
        return mod
    try:
        step = _StepBuilder(mod, main).build()
    except _NoStep as why:
        attrs = {**main.attrs, "no_step": str(why)}
        return mod.with_function(Function(main.params, main.body, main.ret_type, main.name, attrs))
    return IRModule({**mod.functions, STEP: step.functions[STEP]}, mod.tensor_programs, mod.externs)


def _var_dim(t, axis: int, what: str) -> SizeVar:
    v = as_expr(t.shape[axis]).as_var() if isinstance(t, TensorType) and t.shape and len(t.shape) > axis else None
    if v is None:
        raise _NoStep(f"{what} is not a size variable")
    return v


def _last_dim_one(t) -> bool:
    return isinstance(t, TensorType) and bool(t.shape) and prove_equal(t.shape[-1], 1) is Proof.YES


def _scalar(e):
    if isinstance(e, Constant) and e.data.size == 1 and e.data.dtype.kind == "f":
        return float(e.data.reshape(-1)[0])
    return None


class _StepBuilder:
    def __init__(self, mod: IRModule, main: Function):
        self.mod, self.main = mod, main
        self.pairs = tuple(main.attrs["kv_cache"])
        self.bindings = {}   # Var -> value, every binding of main
        self.order = []
        for block in main.body.blocks:
            for b in block.bindings:
                if isinstance(b, MatchCast) or not isinstance(b.value, (Call, Constant, Var, Tuple, TupleGetItem)):
                    raise _NoStep(f"binding {b.var.name} is control flow or a run-time cast "
                                  f"({type(b.value).__name__}); the step handles straight-line graphs only")
                self.bindings[b.var] = b.value
                self.order.append(b.var)

    # ---- reading main ----------------------------------------------------------------
    def strip(self, e):
        """Through aliases, single-input concats and casts to the same dtype."""
        while isinstance(e, Var) and e in self.bindings:
            v = self.bindings[e]
            if isinstance(v, Var):
                e = v
            elif isinstance(v, Call) and v.op.name == "concat" and len(v.args) == 1:
                e = v.args[0]
            elif isinstance(v, Call) and v.op.name == "cast" and v.args[0].type == v.type:
                e = v.args[0]
            else:
                break
        return e

    def call(self, e, *names):
        e = self.strip(e)
        v = self.bindings.get(e) if isinstance(e, Var) else None
        return v if isinstance(v, Call) and v.op.name in names else None

    def outputs(self) -> list:
        body = self.main.body.body
        if isinstance(body, Var) and isinstance(self.bindings.get(body), Tuple):
            return list(self.bindings[body].fields)
        return list(body.fields) if isinstance(body, Tuple) else [body]

    # ---- the plan -----------------------------------------------------------------------
    def build(self) -> IRModule:
        main = self.main
        params = {p.name: p for p in main.params}
        past_params = {main.params[p.param] for p in self.pairs}
        others = [p.name for p in main.params if p not in past_params and p.name not in TOKEN_INPUTS]
        if others:
            raise _NoStep(f"input {others[0]} is not one that generation feeds (input_ids, attention_mask, "
                          "position_ids and the pasts)")
        if "input_ids" not in params or "attention_mask" not in params:
            raise _NoStep("generation needs the inputs input_ids (batch, seq) and attention_mask (batch, total_seq)")
        ids, mask = params["input_ids"].type, params["attention_mask"].type
        if len(ids.shape) != 2 or len(mask.shape) != 2:
            raise _NoStep("input_ids and attention_mask must be (batch, seq) and (batch, total_seq)")
        seq = _var_dim(ids, 1, "input_ids dimension 1")
        total = _var_dim(mask, 1, "attention_mask dimension 1")
        if total.upper is None:
            raise _NoStep("the context is unbounded: import with max_context=N (or bound total_seq)")
        self.max_context = total.upper
        first = main.params[self.pairs[0].param]
        past = _var_dim(first.type, self.pairs[0].axis, f"input {first.name} dimension {self.pairs[0].axis}")
        self.mapping = {past: as_expr(total) - seq}
        batch = as_expr(ids.shape[0]).as_var()
        if batch is not None:
            self.mapping[batch] = as_expr(1)
        elif prove_equal(ids.shape[0], 1) is not Proof.YES:
            raise _NoStep(f"the batch dimension is {ids.shape[0]}; generation runs batch 1")
        self.past, self.total = self.sub(as_expr(past)), as_expr(total)

        self.past_index = {main.params[p.param]: i for i, p in enumerate(self.pairs)}   # a past param -> pair index
        self.presents = {}   # the present's concat Var -> pair index
        self.new_of = {}     # pair index -> the new positions' Var
        outs = self.outputs()
        for i, p in enumerate(self.pairs):
            if p.axis != 2 or len(main.params[p.param].type.shape) != 4:
                raise _NoStep(f"{p.past}: the cache must be (batch, kv_heads, past_seq, head_dim)")
            cat = self.strip(outs[p.output])
            v = self.call(cat, "concat")
            if v is None or len(v.args) != 2 or self.strip(v.args[0]) is not main.params[p.param] \
                    or v.attrs["axis"] % 4 != 2:
                raise _NoStep(f"{p.present} is not concat({p.past}, new positions) on axis 2")
            self.presents[cat] = i
            self.new_of[i] = v.args[1]
        self.attention = {}   # the attention result's Var -> (q, k pair, v pair, mask, scale)
        for var in self.order:
            found = self.match_attention(var)
            if found is not None:
                self.attention[var] = found
        present_outputs = {p.output for p in self.pairs}
        self.results = [o for k, o in enumerate(outs) if k not in present_outputs]
        if not self.results:
            raise _NoStep("the model has no output beside the presents")
        return self.emit(params)

    def repeated(self, e):
        """The pair whose present `e` is, or repeats along the heads (reshape, broadcast_to, reshape)."""
        e = self.strip(e)
        if e in self.presents:
            return self.presents[e], 1
        outer = self.call(e, "reshape")
        mid = outer and self.call(outer.args[0], "broadcast_to")
        inner = mid and self.call(mid.args[0], "reshape")
        src = inner and self.strip(inner.args[0])
        if src not in self.presents:
            return None
        s, u, w = src.type.shape, inner.type.shape, mid.type.shape
        if len(u) != 5 or prove_equal(u[2], 1) is not Proof.YES or not as_expr(w[2]).is_const:
            return None
        if any(prove_equal(u[a], s[b]) is not Proof.YES for a, b in ((1, 1), (3, 2), (4, 3))):
            return None
        return self.presents[src], as_expr(w[2]).value

    def match_attention(self, var):
        out = self.bindings.get(var)
        if not isinstance(out, Call) or out.op.name != "matmul":
            return None
        rv = self.repeated(out.args[1])
        probs, guard = out.args[0], None
        wh = self.call(probs, "where")   # rows the mask hides entirely zeroed (ONNX Attention): kept around the result
        if wh is not None and _scalar(wh.args[1]) == 0 and _last_dim_one(wh.args[0].type):
            probs, guard = wh.args[2], (wh.args[0], wh.args[1])
        sm = self.call(probs, "softmax")
        if rv is None or sm is None or sm.attrs["axis"] % 4 != 3:
            return None
        scores, mask = self.strip(sm.args[0]), None
        add = self.call(scores, "add")
        if add is not None:
            for a, b in ((0, 1), (1, 0)):
                if self.call(add.args[a], "multiply", "divide", "matmul") is not None:
                    scores, mask = self.strip(add.args[a]), add.args[b]
                    break
            else:
                return None
        scale = 1.0
        op = self.call(scores, "multiply", "divide")
        if op is not None:
            c = _scalar(op.args[1])
            if c is None and op.op.name == "multiply":
                c, scores = _scalar(op.args[0]), op.args[1]
            else:
                scores = op.args[0]
            if c is None or c == 0:
                return None
            scale = c if op.op.name == "multiply" else 1.0 / c
        mm = self.call(scores, "matmul")
        tr = mm and self.call(mm.args[1], "transpose")
        if tr is None or tuple(a % 4 for a in tr.attrs["axes"]) != (0, 1, 3, 2):
            return None
        k, k_scale = self.scaled(tr.args[0])
        q, q_scale = self.scaled(mm.args[0]) if k_scale != 1.0 else (mm.args[0], 1.0)   # sqrt(scale) on q and k
        scale *= k_scale * q_scale
        rk = self.repeated(k)
        if rk is None or rk[1] != rv[1] or not isinstance(q.type, TensorType) or len(q.type.shape) != 4:
            return None
        if mask is not None and (not isinstance(mask.type, TensorType) or not 2 <= len(mask.type.shape) <= 4):
            return None
        return q, rk[0], rv[0], mask, scale, guard

    def scaled(self, e):
        """`e` as (x, c) when it is x times a nonzero scalar constant c, else (e, 1.0)."""
        m = self.call(e, "multiply")
        for a, b in ((0, 1), (1, 0)):
            c = m and _scalar(m.args[b])
            if c:
                return m.args[a], c
        return e, 1.0

    # ---- writing step -------------------------------------------------------------------
    def sub(self, e):
        return substitute(as_expr(e), self.mapping)

    def sub_attr(self, v):
        if isinstance(v, SizeVar) or hasattr(v, "terms"):
            return self.sub(v)
        if isinstance(v, tuple):
            return tuple(self.sub_attr(x) for x in v)
        return v

    def sub_type(self, t):
        if isinstance(t, TensorType) and t.shape is not None:
            return TensorType(tuple(self.sub(d) for d in t.shape), t.dtype)
        if isinstance(t, TupleType):
            return TupleType([self.sub_type(f) for f in t.fields])
        return t

    def needed(self) -> set:
        """The bindings the step's results and the state writes depend on."""
        seen, todo = set(), [*self.results, *self.presents]
        while todo:
            e = todo.pop()
            if not isinstance(e, Var) or e in seen or e not in self.bindings:
                continue
            seen.add(e)
            if e in self.attention:
                q, _, _, mask, _, guard = self.attention[e]
                todo += [x for x in (q, mask, *(guard or ())) if x is not None]
                continue
            if e in self.presents:
                todo.append(self.new_of[self.presents[e]])
                continue
            v = self.bindings[e]
            todo += list(v.args) if isinstance(v, Call) else list(v.fields) if isinstance(v, Tuple) \
                else [v.tuple_value] if isinstance(v, TupleGetItem) else [v] if isinstance(v, Var) else []
        return seen

    def emit(self, params: dict) -> IRModule:
        main = self.main
        b = Builder()
        new_params, states = [], {}
        tokens = [params[n] for n in TOKEN_INPUTS if n in params]   # the contract's order, not the model's
        for p in tokens:
            new_params.append(Var(p.name, self.sub_type(p.type)))
        for i, pair in enumerate(self.pairs):
            t = main.params[pair.param].type
            shape = (1, self.sub(t.shape[1]), self.max_context, self.sub(t.shape[3]))
            if not all(as_expr(d).is_const for d in shape):
                raise _NoStep(f"{pair.past}: its heads and head_dim must be known, got {t.shape}")
            states[i] = Var(f"{STATE_PREFIX}{i}", TensorType(shape, t.dtype))
        env = dict(zip(tokens, new_params))
        self.appended = {}
        needed = self.needed()
        self.lm_head = self.find_lm_head()
        seq = as_expr(params["input_ids"].type.shape[1]).as_var()
        attrs = {"entry": True, "bind_lower": ((as_expr(self.total).as_var(), as_expr(seq)),),
                 "max_context": self.max_context, "kv_cache": self.pairs}
        with b.function(STEP, [*new_params, *states.values()], attrs):
            with b.dataflow():
                for var in self.order:
                    if var not in needed:
                        continue
                    value = self.emit_binding(b, var, env, states)
                    if value is not None:
                        env[var] = value
                results = [env[r] if isinstance(r, Var) else r for r in self.results]
                logits = self.last_position(b, results[0])
                out = b.emit_output(logits, "logits")
            b.ret(out)
        return b.get()

    def lookup(self, b, e, env, states):
        if not isinstance(e, Var):
            return e
        if e in self.presents and e not in env:   # a present read outside attention: its valid positions
            i = self.presents[e]
            env[e] = b.emit(make_call("strided_slice", [self.appended[i]],
                                      {"begin": (0,), "end": (self.total,), "axes": (2,)}))
        if e not in env and e in self.past_index:   # the past itself: positions [0, past)
            env[e] = b.emit(make_call("strided_slice", [states[self.past_index[e]]],
                                      {"begin": (0,), "end": (self.past,), "axes": (2,)}))
        return env[e]

    def emit_binding(self, b, var, env, states):
        v = self.bindings[var]
        if var in self.presents:
            i = self.presents[var]
            new = self.lookup(b, self.new_of[i], env, states)
            self.appended[i] = b.emit(make_call("kv_append", [states[i], new], {"offset": self.past}, span=None),
                                      f"state_{i}_appended")
            return None   # read through lookup: by kv_attention in place, or as a copy of its valid positions
        if var in self.attention:
            q, ik, iv, mask, scale, guard = self.attention[var]
            args = [self.lookup(b, q, env, states), self.appended[ik], self.appended[iv]]
            if mask is not None:
                m = self.lookup(b, mask, env, states)
                rank = len(m.type.shape)
                if rank < 4:   # a (seq, kv) or (heads, seq, kv) bias: as (1, ..., seq, kv)
                    m = b.emit(make_call("reshape", [m], {"shape": (1,) * (4 - rank) + tuple(m.type.shape)}))
                args.append(m)
            out = b.emit(make_call("kv_attention", args, {"kv_len": self.total, "scale": scale}, span=v.span))
            if guard is not None:   # where(rows, 0, p) @ v is where(rows, 0, p @ v) for rows (..., 1)
                rows, zero = (self.lookup(b, g, env, states) for g in guard)
                out = b.emit(make_call("where", [rows, zero, out], span=v.span))
            return out
        if isinstance(v, Constant):
            return v
        if isinstance(v, Var):
            return self.lookup(b, v, env, states)
        if isinstance(v, Tuple):
            return b.emit(Tuple([self.lookup(b, f, env, states) for f in v.fields]))
        if isinstance(v, TupleGetItem):
            return b.emit(TupleGetItem(self.lookup(b, v.tuple_value, env, states), v.index))
        args = [self.lookup(b, a, env, states) for a in v.args]
        if var is self.lm_head:   # the LM head on the last position only
            x = args[0]
            n = as_expr(x.type.shape[-2])
            args[0] = b.emit(make_call("strided_slice", [x], {"begin": (n - 1,), "end": (n,),
                                                              "axes": (len(x.type.shape) - 2,)}))
        attrs = {k: self.sub_attr(a) for k, a in v.attrs.items()}
        return b.emit(make_call(v.op.name, args, attrs, span=v.span))

    def find_lm_head(self):
        """The matmul or matmul_nbits with a constant weight producing the logits (through reshapes and a bias add)."""
        e = self.strip(self.results[0])
        for _ in range(4):
            v = self.bindings.get(e) if isinstance(e, Var) else None
            if not isinstance(v, Call):
                return None
            if v.op.name in ("matmul", "matmul_nbits"):   # x first, a constant weight second in both
                x = v.args[0]
                if isinstance(v.args[1], Constant) and isinstance(x.type, TensorType) and len(x.type.shape) == 3:
                    return e
                return None
            if v.op.name != "add":
                return None
            e = self.strip(next((a for a in v.args if not isinstance(a, Constant)), v.args[0]))
        return None

    def last_position(self, b, logits):
        """The logits as (1, 1, vocab): the last position's row (already so when the LM head was narrowed)."""
        t = logits.type
        if not isinstance(t, TensorType) or len(t.shape) != 3:
            raise _NoStep(f"the logits must be (batch, seq, vocab), got {t}")
        if prove_equal(t.shape[1], 1) is Proof.YES:
            return logits
        n = as_expr(t.shape[1])
        return make_call("strided_slice", [logits], {"begin": (n - 1,), "end": (n,), "axes": (1,)})
