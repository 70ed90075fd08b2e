"""The Vulkan conv2d shaders (codegen/vulkan/conv.py) through rxe.build:
conv2d with constant weights and one group becomes the library call the
Vulkan host dispatches with the wide or one of the tall implicit-GEMM
shaders (by the output's pixels and channels at run time), pointwise and not, with
strides, padding, dilation, bias and relu / relu6, checked against PyTorch
from one build over symbolic sizes, with the validation layer on (when
installed) and zero messages."""

from __future__ import annotations

import numpy as np
import torch

import relax_edge as rxe
from relax_edge import op
from relax_edge.codegen.vulkan import conv
from relax_edge.ir import Builder, SizeVar, TensorType, Tuple, Var
from relax_edge.op.registry import make_call
from tests.vulkan import vkrt

CI = 6
# (output channels, kernel, stride, padding, dilation, bias, activation 0 / 1 relu / 2 relu6)
# (at few pixels: the tall shaders of 64, 512, 64, 64, 256 and 128 channels; the wide one at 30 x 31;
# then two depthwise layers: CI output channels, each its own group)
LAYERS = [(13, 1, 1, 0, 1, True, 2), (1000, 1, 1, 0, 1, True, 0), (17, 3, 2, 1, 1, True, 1),
          (9, 3, 1, 2, 2, False, 0), (250, 3, 1, 1, 1, True, 2), (120, 1, 1, 0, 1, True, 1),
          (CI, 3, 2, 1, 1, True, 2), (CI, 5, 1, 4, 2, False, 0)]


def _weights():
    rng = np.random.default_rng(0)
    out = []
    for co, k, *_ in LAYERS:
        cg = 1 if co == CI else CI   # depthwise: one input channel per group
        w = (rng.standard_normal((co, cg, k, k)) / np.sqrt(cg * k * k)).astype("float32")
        out.append((w, rng.standard_normal((1, co, 1, 1)).astype("float32")))
    return out


def _module(weights):
    x = Var("x", TensorType((SizeVar("b", upper=4), CI, SizeVar("h", upper=64), SizeVar("w", upper=64)), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            outs = []
            for (_, _, s, p, d, bias, act), (w, b) in zip(LAYERS, weights):
                y = op.conv2d(x, w, strides=(s, s), padding=(p, p, p, p), dilation=(d, d), groups=CI // w.shape[1])
                y = op.add(y, b) if bias else y
                y = op.relu(y) if act == 1 else make_call("clip", [y], {"min": 0.0, "max": 6.0}) if act == 2 else y
                outs.append(y)
            out = bb.emit_output(Tuple(outs))
        bb.ret(out)
    return bb.get()


def _reference(x, weights):
    out = []
    for (_, _, s, p, d, bias, act), (w, b) in zip(LAYERS, weights):
        y = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), stride=s,
                                       padding=p, dilation=d, groups=CI // w.shape[1]).numpy()
        y = y + b if bias else y
        out.append(np.maximum(y, 0) if act == 1 else np.clip(y, 0, 6) if act == 2 else y)
    return out


def test_convolutions_match_pytorch_from_one_build(vulkan_env, tmp_path):
    weights = _weights()
    art = rxe.build(_module(weights), board="host-vulkan", backend="vulkan", out_dir=tmp_path, profile=False)
    text = (art.out_dir / f"{art.prefix}.c").read_text()
    assert all(f'"{name}"' in text for name in [*conv.SHADERS, conv.DEPTHWISE])
    assert text.count(f'"{conv.CONV_SYMBOL}"') >= len(LAYERS) - 2   # every layer is a library call
    assert text.count(f'"{conv.DEPTHWISE_SYMBOL}"') >= 2
    rng = np.random.default_rng(1)
    with rxe.connect("host-vulkan") as dev:
        mod = dev.load(art)
        created = mod.pipelines_created()
        for b, h, w in ((1, 30, 31), (2, 9, 11), (1, 1, 2)):   # wide and tall shapes, then tall ones
            x = rng.standard_normal((b, CI, h, w)).astype("float32")
            for k, (got, want) in enumerate(zip(mod.run(x), _reference(x, weights))):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"layer {k} at {b}x{h}x{w}")
        assert mod.pipelines_created() == created
        vkrt.assert_clean(mod, vulkan_env)
