"""The keyword-spotting DS-CNN of tests/emu/test_cortex_m4.py (its seeded
weights, ``ds_cnn_weights``) as a PyTorch module exported to ONNX, and that
export quantized by ONNX Runtime's ``quantize_static`` (QDQ, per-channel int8
weights, int8 or uint8 activations, a seeded calibration reader), cached on
disk like tests/onnx_models.py (tests/model_cache.py).

The function is test_cortex_m4's at batch 1: a 10x4 conv of stride 2 with
padding (top 4, left 1, bottom 5, right 1) — exported as a Pad, then merged
into the Conv's own pads — batch norm, relu, four depthwise-separable blocks
(the depthwise's folded batch norm multiplied into its weights and bias),
a 25x5 average pool, a dense layer to 12 classes and a softmax.

``get_float_model()`` and ``get_quant_model(activation)`` return paths;
``make_input(seed)`` is a (1, 1, 49, 10) float32 input of the calibration
distribution. For tests/emu/test_mcu_int8_kws.py and scripts/mcu_report.py:
``board_without_dsp(folder)`` writes a copy of boards/qemu-cortex-m4.yaml
whose int8 kernels take their generic C path, and ``arena_lower_bound(path,
board)`` is the memory plan's lower bound of a model's main function.
"""

import importlib.metadata
import warnings
from pathlib import Path

import numpy as np
import onnx
import yaml

from relax_edge.build import optimize_module
from relax_edge.ir.shape import evaluate
from relax_edge.memory import lower_bound, plan_module
from relax_edge.memory.plan import size_vars
from relax_edge.target import BOARDS_DIR, load_board
from tests import model_cache
from tests.emu import test_cortex_m4 as m4

INPUT_SHAPE = (1, 1, m4.FRAMES, m4.FEATURES)
CLASSES = m4.CLASSES
OPSET = 17
_CALIBRATION = 16


def make_input(seed=0) -> np.ndarray:
    return np.random.default_rng(2000 + seed).standard_normal(INPUT_SHAPE).astype(np.float32)


def _torch_module(w):
    import torch
    from torch import nn

    def param(a):
        return nn.Parameter(torch.from_numpy(np.ascontiguousarray(a, np.float32)), requires_grad=False)

    def batch_norm(prefix):
        bn = nn.BatchNorm2d(m4.CHANNELS, eps=1e-5)
        bn.weight, bn.bias = param(w[f"{prefix}_scale"]), param(w[f"{prefix}_bias"])
        bn.running_mean.copy_(torch.from_numpy(w[f"{prefix}_mean"]))
        bn.running_var.copy_(torch.from_numpy(w[f"{prefix}_var"]))
        return bn

    class DSCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, m4.CHANNELS, (10, 4), stride=2)
            self.conv1.weight, self.conv1.bias = param(w["conv1"]), param(w["conv1_bias"].reshape(-1))
            self.bn1 = batch_norm("bn1")
            self.dw, self.pw, self.pw_bn = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
            for i in range(m4.BLOCKS):
                dw = nn.Conv2d(m4.CHANNELS, m4.CHANNELS, 3, padding=1, groups=m4.CHANNELS)
                dw.weight = param(w[f"dw{i}"] * w[f"dw{i}_scale"].reshape(-1, 1, 1, 1))
                dw.bias = param(w[f"dw{i}_bias"].reshape(-1))
                pw = nn.Conv2d(m4.CHANNELS, m4.CHANNELS, 1, bias=False)
                pw.weight = param(w[f"pw{i}"])
                self.dw.append(dw)
                self.pw.append(pw)
                self.pw_bn.append(batch_norm(f"pw{i}_bn"))
            self.fc = nn.Linear(m4.CHANNELS, CLASSES)
            self.fc.weight, self.fc.bias = param(w["fc"].T), param(w["fc_bias"])

        def forward(self, x):
            h = nn.functional.pad(x, (1, 1, 4, 5))          # (left, right, top, bottom)
            h = torch.relu(self.bn1(self.conv1(h)))
            for dw, pw, bn in zip(self.dw, self.pw, self.pw_bn):
                h = torch.relu(bn(pw(torch.relu(dw(h)))))
            h = nn.functional.avg_pool2d(h, (25, 5)).flatten(1)
            return torch.softmax(self.fc(h), dim=-1)

    return DSCNN().eval()


PADDING = (4, 1, 5, 1)   # test_cortex_m4's first conv: (top, left, bottom, right)


def _merge_pad_into_conv(model: onnx.ModelProto) -> onnx.ModelProto:
    """The exporter's zero Pad of the input (its pads computed by a chain of shape nodes) becomes the first
    Conv's pads attribute; the chain, now unused, is removed."""
    graph = model.graph
    pad = next(n for n in graph.node if n.op_type == "Pad")
    conv = next(n for n in graph.node if n.op_type == "Conv" and n.input[0] == pad.output[0])
    assert pad.input[0] == graph.input[0].name and all(a.s in (b"", b"constant") for a in pad.attribute)
    for attr in list(conv.attribute):
        if attr.name == "pads":
            conv.attribute.remove(attr)
    conv.attribute.append(onnx.helper.make_attribute("pads", list(PADDING)))
    conv.input[0] = pad.input[0]
    graph.node.remove(pad)
    while True:   # drop the nodes whose outputs nothing reads
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        dead = [n for n in graph.node if not set(n.output) & used]
        if not dead:
            break
        for n in dead:
            graph.node.remove(n)
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    return model


def _export_float(path: Path) -> None:
    import torch
    module = _torch_module(m4.ds_cnn_weights())
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.from_numpy(make_input(0)),), str(path), dynamo=False, opset_version=OPSET,
                          input_names=["mfcc"], output_names=["probs"])
    model = _merge_pad_into_conv(onnx.load(str(path)))
    onnx.save(model, str(path))


def _key(*parts):
    return "-".join([model_cache.source_key(__file__, m4.__file__), *parts,
                     importlib.metadata.version("onnxruntime").replace(".", "")])


def get_float_model() -> Path:
    return model_cache.export_once("kws_ds_cnn_f32", _key("f32"), _export_float)


def _quantize(out_path, activation):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"mfcc": make_input(100 + i)} for i in range(_CALIBRATION)])

        def get_next(self):
            return next(self.batches, None)

    with model_cache.private_copy(get_float_model(), out_path) as src:
        quantize_static(str(src), str(out_path), Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8,
                        weight_type=QuantType.QInt8, per_channel=True)


def get_quant_model(activation="int8") -> Path:
    """The float model quantized by quantize_static (QDQ, per-channel int8 weights, ``activation`` int8 / uint8)."""
    name = f"kws_ds_cnn_qdq_{activation}"
    return model_cache.export_once(name, _key(activation), lambda p: _quantize(p, activation))


def board_without_dsp(folder: Path, board: str = "qemu-cortex-m4") -> Path:
    """``board``'s YAML without the `dsp` feature and with -U__ARM_FEATURE_DSP, the macro the int8 kernels
    choose their SMLAD path by: they take their generic C path, compiled for the same core and FPU (an
    -march=armv7-m build does not link: picolibc has no hard-float ARMv7-M multilib)."""
    data = yaml.safe_load((BOARDS_DIR / f"{board}.yaml").read_text())
    t = data["target"]
    t["features"] = [f for f in t["features"] if f != "dsp"]
    t["cflags"] = [*t["cflags"], "-U__ARM_FEATURE_DSP"]
    data["name"] = f"{board}-nodsp"
    path = Path(folder) / f"{board}-nodsp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def arena_lower_bound(path, board) -> int:
    """The most bytes live at once in the memory plan of the model at ``path`` built for ``board``."""
    import relax_edge as rxe
    mod = optimize_module(rxe.from_onnx(str(path)), load_board(board))
    plan = plan_module(mod)["main"].plan
    env = {v: v.upper for v in size_vars(plan.buffers)}
    return lower_bound(plan.buffers, [evaluate(b.size, env) for b in plan.buffers])
