"""Real architectures exported to ONNX with seeded random weights, as test references.

``export_<name>(path)`` builds the model in PyTorch, exports it with the
TorchScript exporter at opset 17 and returns ``(path, spec)``. ``get_model(name)``
does the same through the on-disk cache of tests/model_cache.py, shared by all
test processes.

``spec`` describes the graph's interface without needing torch:

- ``inputs``: ``{name: {"dtype": str, "shape": tuple, "range": (low, high)}}``;
  a shape entry is an int or the name of a dynamic dim; ``range`` (integer
  inputs only) is the half-open interval of valid values.
- ``outputs``: ``{name: {"dtype": str, "shape": tuple}}``, same conventions.
- ``dynamic``: ``{dim name: (small, large)}``, two sizes tests can run at.
- ``make_inputs(seed=0, **sizes)``: random valid inputs as numpy arrays; a dim
  left out takes its small size.
"""

import sys
import warnings
from pathlib import Path

import numpy as np

from tests import model_cache

OPSET = 17
MODEL_NAMES = ("mobilenet_v2", "resnet18", "bert", "gpt2", "mlp", "bert_long", "gpt2_long")
# exported on demand, outside the float32 matrix of tests/test_onnx_models.py: BERT with float16 weights and activations
EXTRA_MODELS = ("bert_fp16",)

# Exports trace at this size for every dynamic dim, so that neither test size
# can hide a length baked into the graph.
_TRACE_SIZE = 7
_TORCHVISION_SCHEMAS = None  # kept alive: the placeholder schemas live as long as it does

_BERT = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=128, max_position_embeddings=64)
_GPT2 = dict(vocab_size=512, n_embd=64, n_layer=2, n_head=4, n_positions=64)
# the same architectures with room for long sequences (memory benchmarks)
_BERT_LONG = {**_BERT, "max_position_embeddings": 512}
_GPT2_LONG = {**_GPT2, "n_positions": 1024}
_MLP_SIZES = (32, 64, 64, 10)


# ---------------------------------------------------------------- specs

def _tensor(dtype, *shape, value_range=None):
    entry = {"dtype": dtype, "shape": tuple(shape)}
    if value_range is not None:
        entry["range"] = value_range
    return entry


def _make_spec(inputs, outputs, dynamic):
    spec = {"inputs": inputs, "outputs": outputs, "dynamic": dynamic}
    spec["make_inputs"] = lambda seed=0, **sizes: make_inputs(spec, seed, **sizes)
    return spec


def concrete_shape(shape, sizes):
    """``shape`` with its dim names replaced by ``sizes[name]``."""
    return tuple(sizes[d] if isinstance(d, str) else d for d in shape)


def make_inputs(spec, seed=0, **sizes):
    """Random valid inputs for ``spec``: normal floats, integers within ``range``."""
    sizes = {**{d: s[0] for d, s in spec["dynamic"].items()}, **sizes}
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, t in spec["inputs"].items():
        shape = concrete_shape(t["shape"], sizes)
        if "range" in t:
            arrays[name] = rng.integers(*t["range"], size=shape).astype(t["dtype"])
        else:
            arrays[name] = rng.standard_normal(shape).astype(t["dtype"])
    return arrays


def _image_spec():
    return _make_spec({"input": _tensor("float32", 1, 3, 224, 224)},
                      {"logits": _tensor("float32", 1, 1000)}, {})


def bert_spec(dtype="float32"):
    vocab, hidden = _BERT["vocab_size"], _BERT["hidden_size"]
    inputs = {"input_ids": _tensor("int64", 1, "seq", value_range=(0, vocab)),
              "attention_mask": _tensor("int64", 1, "seq", value_range=(0, 2))}
    outputs = {"last_hidden_state": _tensor(dtype, 1, "seq", hidden),
               "pooler_output": _tensor(dtype, 1, hidden)}
    return _make_spec(inputs, outputs, {"seq": (5, 16)})


def gpt2_spec():
    vocab = _GPT2["vocab_size"]
    inputs = {"input_ids": _tensor("int64", 1, "seq", value_range=(0, vocab)),
              "attention_mask": _tensor("int64", 1, "seq", value_range=(1, 2))}
    outputs = {"logits": _tensor("float32", 1, "seq", vocab)}
    return _make_spec(inputs, outputs, {"seq": (5, 16)})


def mlp_spec():
    return _make_spec({"x": _tensor("float32", "batch", _MLP_SIZES[0])},
                      {"probs": _tensor("float32", "batch", _MLP_SIZES[-1])},
                      {"batch": (1, 8)})


SPECS = {"mobilenet_v2": _image_spec, "resnet18": _image_spec, "bert": bert_spec,
         "gpt2": gpt2_spec, "mlp": mlp_spec, "bert_long": bert_spec, "gpt2_long": gpt2_spec,
         "bert_fp16": lambda: bert_spec("float16")}


# ---------------------------------------------------------------- torch models

def _import_torchvision():
    """Import torchvision, also where its C++ ops were built for another torch.

    The classification models need none of those ops; torchvision only needs
    the schemas of ``nms`` and ``qnms`` to exist when it is imported.
    """
    if "torchvision" in sys.modules and hasattr(sys.modules["torchvision"], "models"):
        return sys.modules["torchvision"]
    import torch
    try:
        import torchvision
    except RuntimeError as exc:
        if "torchvision::nms" not in str(exc):
            raise
        for mod in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            del sys.modules[mod]
        global _TORCHVISION_SCHEMAS
        _TORCHVISION_SCHEMAS = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            _TORCHVISION_SCHEMAS.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import torchvision
    return torchvision


def _import_transformers():
    _import_torchvision()  # transformers imports torchvision when present
    import transformers
    return transformers


def _randomize_batchnorm(model, seed):
    """Random affine parameters and running statistics for every BatchNorm."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(0.0, 0.1, generator=gen)
                m.running_mean.normal_(0.0, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)


def _vision_model(arch, seed):
    import torch
    torch.manual_seed(seed)
    model = getattr(_import_torchvision().models, arch)()
    _randomize_batchnorm(model, seed)
    return model.eval()


def build_mobilenet_v2(seed=0):
    return _vision_model("mobilenet_v2", seed)


def build_resnet18(seed=0):
    return _vision_model("resnet18", seed)


def _hf_wrapper(model, *outputs):
    """A module taking (input_ids, attention_mask) and returning ``outputs`` of ``model``."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            return tuple(out[k] for k in outputs)

    return Wrapper().eval()


def build_bert(seed=0, config=None):
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    config = tf.BertConfig(**(config or _BERT), attn_implementation="eager")
    return _hf_wrapper(tf.BertModel(config), "last_hidden_state", "pooler_output")


def build_gpt2(seed=0, config=None):
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    last = _GPT2["vocab_size"] - 1
    config = tf.GPT2Config(**(config or _GPT2), bos_token_id=last, eos_token_id=last,
                           attn_implementation="eager")
    return _hf_wrapper(tf.GPT2LMHeadModel(config), "logits")


def build_mlp(seed=0):
    import torch
    torch.manual_seed(seed)
    nn = torch.nn
    i, h1, h2, o = _MLP_SIZES
    return nn.Sequential(nn.Linear(i, h1), nn.ReLU(), nn.Linear(h1, h2), nn.Tanh(),
                         nn.Linear(h2, o), nn.Softmax(dim=-1)).eval()


BUILDERS = {"mobilenet_v2": build_mobilenet_v2, "resnet18": build_resnet18,
            "bert": build_bert, "gpt2": build_gpt2, "mlp": build_mlp,
            "bert_long": lambda seed=0: build_bert(seed, _BERT_LONG),
            "gpt2_long": lambda seed=0: build_gpt2(seed, _GPT2_LONG),
            "bert_fp16": lambda seed=0: build_bert(seed).half()}   # weights and activations float16


# ---------------------------------------------------------------- export

def _dynamic_axes(spec):
    tensors = {**spec["inputs"], **spec["outputs"]}
    axes = {name: {i: d for i, d in enumerate(t["shape"]) if isinstance(d, str)}
            for name, t in tensors.items()}
    return {name: a for name, a in axes.items() if a}


def export_model(name, path):
    """Build model ``name``, export it to ``path`` and return ``(path, spec)``."""
    import torch
    spec = SPECS[name]()
    model = BUILDERS[name]()
    trace = spec["make_inputs"](**{d: _TRACE_SIZE for d in spec["dynamic"]})
    args = tuple(torch.from_numpy(a) for a in trace.values())
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=OPSET,
                          input_names=list(spec["inputs"]), output_names=list(spec["outputs"]),
                          dynamic_axes=_dynamic_axes(spec))
    _name_output_dims(path, spec)
    return Path(path), spec


def _name_output_dims(path, spec):
    """Give the graph outputs the shapes of ``spec``: the exporter leaves a
    static dim it could not infer as an invented symbol."""
    import onnx
    model = onnx.load(str(path))
    for out in model.graph.output:
        dims = out.type.tensor_type.shape.dim
        for dim, want in zip(dims, spec["outputs"][out.name]["shape"]):
            if isinstance(want, str):
                dim.dim_param = want
            else:
                dim.dim_value = want
    onnx.save(model, str(path))


def export_mobilenet_v2(path):
    return export_model("mobilenet_v2", path)


def export_resnet18(path):
    return export_model("resnet18", path)


def export_bert(path):
    return export_model("bert", path)


def export_gpt2(path):
    return export_model("gpt2", path)


def export_mlp(path):
    return export_model("mlp", path)


# ---------------------------------------------------------------- cache

cache_dir = model_cache.cache_dir   # scripts/fuzz_onnx.py finds the exports through this module


def cache_key():
    """Changes with this file's source and with the exporting packages' versions."""
    return model_cache.source_key(__file__)


def get_model(name):
    """``(path, spec)`` of model ``name``, exported once into the cache directory."""
    if name not in SPECS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join((*MODEL_NAMES, *EXTRA_MODELS))}")
    path = model_cache.export_once(name, cache_key(), lambda tmp: export_model(name, tmp))
    return path, SPECS[name]()
