"""`rxe.optimize(..., verify=True)`: every model of the test zoo (the ONNX
exports of tests/onnx_models.py and the Builder models of tests/models.py)
passes the graph-IR and tensor-program verifiers after every pass, on the
host and on a vector board; a pass that leaves an ill-formed tensor program
is named in the error, with the program."""

import dataclasses

import pytest

import relax_edge as rxe
from relax_edge import pipeline
from relax_edge.ir import IRModule, SizeVar
from relax_edge.ir.shape import as_expr
from relax_edge.tir.expr import Const, Index
from relax_edge.tir.stmt import Buffer, Seq, Store
from tests.models import build_cnn, build_mlp, cnn_weights, mlp_weights
from tests.onnx_models import MODEL_NAMES, get_model

# optimize only (the vector board's schedule, no emulator): the parameter is not
# named `board`, which tests/conftest.py would mark `emu`
PIPELINE_BOARDS = ("host", "qemu-aarch64")


def onnx_module(name):
    path, _ = get_model(name)
    return rxe.from_onnx(str(path))


BUILDER_MODELS = {"builder_mlp": lambda: build_mlp(mlp_weights()), "builder_cnn": lambda: build_cnn(cnn_weights())}


def zoo():
    """The name of every model of the test zoo (each optimizes in a second or two)."""
    return [*MODEL_NAMES, *BUILDER_MODELS]


def make_module(model):
    return BUILDER_MODELS[model]() if model in BUILDER_MODELS else onnx_module(model)


def tensor_calls(mod):
    """How many graph bindings call a tensor program, over every function."""
    return sum(type(b.value).__name__ == "CallTensor"
               for fn in mod.functions.values() for blk in fn.body.blocks for b in blk.bindings)


@pytest.mark.parametrize("pipeline_board", PIPELINE_BOARDS)
@pytest.mark.parametrize("model", zoo())
def test_every_model_verifies_after_every_pass(model, pipeline_board):
    optimized = rxe.optimize(make_module(model), pipeline_board, verify=True)
    assert optimized.tensor_programs, "no tensor program was checked"
    assert tensor_calls(optimized) > 0


def stray_store(program):
    """The program, also storing to a buffer that is neither a parameter nor allocated."""
    stray = Buffer("stray", "float32", (4,))
    return Store(stray, (Index(as_expr(0)),), Const(0.0, "float32")), "store to stray"


def unbound_loop_var(program):
    """The program, also storing through an index that no loop binds."""
    out = program.outputs[0]
    k = SizeVar("k_unbound")
    return Store(out, tuple(Index(k) for _ in out.shape), Const(0.0, "float32")), "uses k_unbound"


def planting(make_stmt, planted):
    """A pass that appends make_stmt's statement to the module's first tensor
    program, recording (program name, the expected message) in `planted`."""
    def run(mod, board):
        name = sorted(mod.tensor_programs)[0]
        program = mod.tensor_programs[name]
        stmt, message = make_stmt(program)
        bad = dataclasses.replace(program, body=Seq((program.body, stmt)))
        planted.append((name, message))
        return IRModule(mod.functions, {**mod.tensor_programs, name: bad}, mod.externs)
    return run


@pytest.mark.parametrize("make_stmt", [stray_store, unbound_loop_var], ids=["undefined_buffer", "unbound_var"])
def test_ill_formed_tensor_program_names_the_pass(make_stmt, monkeypatch):
    planted = []
    monkeypatch.setitem(pipeline.PASSES, "plant", planting(make_stmt, planted))
    mod = build_mlp(mlp_weights())
    with pytest.raises(rxe.RelaxEdgeError) as caught:
        rxe.optimize(mod, "host", passes=["legalize", "fuse", "plant", "schedule"], verify=True)
    ((program, message),) = planted
    assert str(caught.value).startswith(f"after pass plant: tensor program {program} is ill-formed")
    assert message in str(caught.value)


def test_the_planted_program_passes_unverified(monkeypatch):
    """Without verify=True the same pipeline runs through: the verifier is what caught it."""
    planted = []
    monkeypatch.setitem(pipeline.PASSES, "plant", planting(stray_store, planted))
    out = rxe.optimize(build_mlp(mlp_weights()), "host", passes=["legalize", "plant"])
    ((program, _),) = planted
    assert out.tensor_programs[program].body.stmts[-1].buffer.name == "stray"
