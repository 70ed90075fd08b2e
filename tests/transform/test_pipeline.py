"""The optimizing pipeline: every pass's output verifies, the optimized
module computes what the imported one does (interpreter), and names that
are not passes are refused."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.pipeline import PASSES, default_passes
from tests.onnx_models import get_model


def kinds(mod):
    out = {}
    for blk in mod.functions["main"].body.blocks:
        for b in blk.bindings:
            out[type(b.value).__name__] = out.get(type(b.value).__name__, 0) + 1
    return out


@pytest.mark.parametrize("board", ["host", "qemu-cortex-m4"])
def test_bert_through_every_pass(board):
    path, spec = get_model("bert")
    mod = rxe.from_onnx(str(path))
    optimized = rxe.optimize(mod, board, verify=True)
    found = kinds(optimized)
    assert "Call" not in found and found["CallExtern"] > 0 and found["CallTensor"] > 0
    assert set(default_passes(board)) <= set(PASSES)
    for seq in (3, 11):   # one optimized module, two sequence lengths
        feeds = spec["make_inputs"](seed=seq, seq=seq)
        np.testing.assert_allclose(rxe.interpret(optimized, *feeds.values())[0],
                                   rxe.interpret(mod, *feeds.values())[0], rtol=1e-4, atol=1e-5)


def test_microcontrollers_get_no_kernel_with_scratch():
    path, _ = get_model("mobilenet_v2")
    mod = rxe.optimize(rxe.from_onnx(str(path)), "qemu-cortex-m4", passes=["fold_constants", "dispatch"])
    names = {b.value.name for blk in mod.functions["main"].body.blocks for b in blk.bindings
             if type(b.value).__name__ == "CallExtern"}
    assert names == {"rxe_lib_depthwise_conv2d_f32", "rxe_lib_dense_f32"}


def test_unknown_pass_is_named():
    path, _ = get_model("mlp")
    with pytest.raises(rxe.RelaxEdgeError, match="unknown passes vectorize_everything"):
        rxe.optimize(rxe.from_onnx(str(path)), "host", passes=["fold_constants", "vectorize_everything"])
