"""Check a legalization: a one-operator module over symbolic dims, run by the
graph interpreter (numpy reference) and, legalized, by the tensor-program
interpreter, at several sizes."""

import numpy as np

import relax_edge as rxe
from relax_edge.ir import Builder, SizeVar, TensorType, Var, verify
from relax_edge.tir.verify import verify_program
from relax_edge.transform.legalize import legalize


def one_op_module(templates, dtypes, build):
    """A module whose inputs have the templates' dims ('n', 'm' are symbolic)."""
    size_vars = {}

    def dim(d):
        return size_vars.setdefault(d, SizeVar(d)) if isinstance(d, str) else d

    params = [Var(f"x{i}", TensorType([dim(d) for d in t], dt)) for i, (t, dt) in enumerate(zip(templates, dtypes))]
    bb = Builder()
    with bb.function("main", params):
        bb.ret(bb.emit(build(*params)))
    return bb.get()


def random_arrays(templates, dtypes, sizes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for t, dt in zip(templates, dtypes):
        shape = tuple(sizes[d] if isinstance(d, str) else d for d in t)
        if dt.startswith("float"):
            out.append(rng.standard_normal(shape).astype(dt))
        elif dt == "bool":
            out.append(rng.random(shape) > 0.5)
        else:
            out.append(rng.integers(-5, 6, shape).astype(dt))
    return out


def check_legalized(templates, dtypes, build, sizes_list, make_arrays=None, rtol=1e-5, atol=1e-6):
    mod = one_op_module(templates, dtypes, build)
    lowered = legalize(mod)
    verify(lowered)
    for program in lowered.tensor_programs.values():
        verify_program(program)
    assert not any(True for f in lowered.functions.values()
                   for blk in f.body.blocks for b in blk.bindings
                   if type(b.value).__name__ == "Call"), "an operator call survived legalization"
    for k, sizes in enumerate(sizes_list):
        arrays = (make_arrays or random_arrays)(templates, dtypes, sizes, k)
        expected = rxe.interpret(mod, *arrays)
        actual = rxe.interpret(lowered, *arrays)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, (actual.shape, expected.shape)
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    return lowered


def check_compiled(templates, dtypes, build, sizes_list, out_dir, make_arrays=None, rtol=1e-5, atol=1e-6,
                   board="host", backend="c"):
    """Compile a one-operator module with `backend` (C, or LLVM kernels) for
    `board` once, run it there at every size, and compare with the numpy
    reference. Returns the artifact."""
    mod = one_op_module(templates, dtypes, build)
    art = rxe.build(mod, board=board, backend=backend, out_dir=out_dir, name="op")
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for k, sizes in enumerate(sizes_list):
            arrays = (make_arrays or random_arrays)(templates, dtypes, sizes, k)
            expected = rxe.interpret(mod, *arrays)
            (actual,) = loaded.run(*arrays)
            assert actual.shape == expected.shape and actual.dtype == expected.dtype, (actual.shape, expected.shape)
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    return art
