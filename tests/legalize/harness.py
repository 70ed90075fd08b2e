"""Check a legalization: a one-operator module over symbolic dims, run by the
graph interpreter (numpy reference) and, legalized, by the tensor-program
interpreter, at several sizes."""

import numpy as np

import relax_edge as rxe
from relax_edge.ir import Builder, SizeVar, TensorType, Tuple, Var, verify
from relax_edge.tir.verify import verify_program
from relax_edge.transform.legalize import legalize


def op_params(templates, dtypes, size_vars, prefix="x"):
    """Inputs with the templates' dims, a named dim ('n', 'm') the SizeVar of that name in `size_vars`."""
    def dim(d):
        return size_vars.setdefault(d, SizeVar(d)) if isinstance(d, str) else d
    return [Var(f"{prefix}{i}", TensorType([dim(d) for d in t], dt))
            for i, (t, dt) in enumerate(zip(templates, dtypes))]


def assert_matches(actual, expected, rtol, atol):
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def one_op_module(templates, dtypes, build):
    """A module whose inputs have the templates' dims ('n', 'm' are symbolic)."""
    params = op_params(templates, dtypes, {})
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
    art = rxe.build(mod, board=board, backend=backend, out_dir=out_dir, name="op", profile=False)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for k, sizes in enumerate(sizes_list):
            arrays = (make_arrays or random_arrays)(templates, dtypes, sizes, k)
            expected = rxe.interpret(mod, *arrays)
            (actual,) = loaded.run(*arrays)
            assert_matches(actual, expected, rtol, atol)
    return art


class OpBatch:
    """One-operator cases compiled together: each case's inputs side by side
    in one module (the symbolic dims shared) whose outputs are the cases'
    results, built once for `board`, loaded once and run at every size. A
    case is then checked on its own output against its own one-operator
    module in the graph interpreter (`check`). `cases`: (name, templates,
    dtypes, build, make_arrays or None). A build or a run that fails is
    raised again by every case's check."""

    MAX_TENSORS = 150   # inputs, and outputs, of one function (the RPC server takes 160)

    def __init__(self, cases, sizes_list, out_dir, board="host", backend="c"):
        self.cases = {c[0]: c for c in cases}
        self.runs = {c[0]: [] for c in cases}
        self.error = None
        try:
            self._run(cases, sizes_list, out_dir, board, backend)
        except Exception as err:   # noqa: BLE001 - kept for every case's check
            self.error = err

    @classmethod
    def chunks(cls, cases):
        """`cases` in consecutive groups of at most MAX_TENSORS inputs and outputs each."""
        groups, inputs = [[]], 0
        for case in cases:
            if groups[-1] and (inputs + len(case[1]) > cls.MAX_TENSORS or len(groups[-1]) >= cls.MAX_TENSORS):
                groups.append([])
                inputs = 0
            groups[-1].append(case)
            inputs += len(case[1])
        return groups

    def _run(self, cases, sizes_list, out_dir, board, backend):
        size_vars = {}
        params = [op_params(templates, dtypes, size_vars, f"c{j}_x")
                  for j, (_, templates, dtypes, _, _) in enumerate(cases)]
        bb = Builder()
        with bb.function("main", [p for ps in params for p in ps]):
            bb.ret(Tuple([bb.emit(case[3](*ps)) for case, ps in zip(cases, params)]))
        art = rxe.build(bb.get(), board=board, backend=backend, out_dir=out_dir, name="ops", quiet=True,
                        profile=False)
        with rxe.connect(board) as dev:
            loaded = dev.load(art)
            for k, sizes in enumerate(sizes_list):
                arrays = [(make or random_arrays)(templates, dtypes, sizes, k)
                          for _, templates, dtypes, _, make in cases]
                outputs = loaded.run(*[a for case_arrays in arrays for a in case_arrays])
                assert len(outputs) == len(cases), (len(outputs), len(cases))
                for case, case_arrays, out in zip(cases, arrays, outputs):
                    self.runs[case[0]].append((case_arrays, out))

    def check(self, name, rtol=1e-5, atol=1e-6):
        """Case `name`'s output at every size against the graph interpreter."""
        if self.error is not None:
            raise AssertionError(f"the batch holding {name} failed: {self.error}") from self.error
        _, templates, dtypes, build, _ = self.cases[name]
        mod = one_op_module(templates, dtypes, build)
        for arrays, actual in self.runs[name]:
            assert_matches(actual, rxe.interpret(mod, *arrays), rtol, atol)
