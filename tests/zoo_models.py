"""Architectures nobody here wrote, exported fresh from torchvision and transformers.

The reference models of ``tests/onnx_models.py`` are the ones relax_edge was
tuned on. These are the models users bring: torchvision classifiers at their
usual export, transformers encoders and decoders built from small configs.
Every model gets seeded random weights (BatchNorm statistics too), is exported
with the TorchScript exporter at opset 17 with its sequence or batch dims
dynamic, and is cached (``get_zoo_model(name)``, tests/model_cache.py).

Each entry of ``ZOO`` is ``(builder, spec, kind)``: ``kind`` is "cnn" for the
image classifiers (also run on an emulated board by the tests), "image" for
classifiers exported with batch, height and width dynamic (compiled on the
host with the C backend only: their builds are the long ones), "nlp", or
"detection" (outputs whose size depends on the data: interpreted only, as the
compiled backends do not return such outputs yet). A spec may add ``bounds``
(the ``dim_bounds`` to import with, default 64 for every dynamic dim) and
``trace`` (the sizes to export at, default 7 for every dynamic dim).
"""

import warnings
from pathlib import Path

import numpy as np

from tests.model_cache import cached_export
from tests.onnx_models import (
    OPSET,
    _dynamic_axes,
    _import_torchvision,
    _import_transformers,
    _make_spec,
    _name_output_dims,
    _randomize_batchnorm,
    _tensor,
)

_TRACE_SIZE = 7
_VOCAB = 256


def _image_spec(size, classes):
    return _make_spec({"input": _tensor("float32", 1, 3, size, size)},
                      {"logits": _tensor("float32", 1, classes)}, {})


def _vision(arch, seed, **kwargs):
    import torch
    torch.manual_seed(seed)
    model = getattr(_import_torchvision().models, arch)(**kwargs)
    _randomize_batchnorm(model, seed)
    return model.eval()


def _vit(seed):
    import torch
    torch.manual_seed(seed)
    vt = _import_torchvision().models.vision_transformer
    model = vt.VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                                 mlp_dim=128, num_classes=10)
    with torch.no_grad():  # torchvision starts the head at zero: give it weights so the logits say something
        model.heads.head.weight.normal_(0.0, 0.2)
        model.heads.head.bias.normal_(0.0, 0.1)
    return model.eval()


def has_ops() -> bool:
    """Stands in for torchvision.extension._has_ops where its C++ ops did not load
    (a plain function: the exporter scripts the functions that call it)."""
    return True


def nms(dets, scores, iou_threshold: float):
    """torchvision's nms in Python, for tracing where its C++ kernel did not load:
    boxes by descending score (stable), each one dropping the later ones that
    overlap it by more than ``iou_threshold``."""
    import torch
    order = torch.argsort(scores, descending=True, stable=True)
    boxes = dets[order]
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    dropped = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for rank in range(len(order)):
        if dropped[rank]:
            continue
        keep.append(int(order[rank]))
        rest = boxes[rank + 1:]
        w = (torch.minimum(rest[:, 2], boxes[rank, 2]) - torch.maximum(rest[:, 0], boxes[rank, 0])).clamp(min=0)
        h = (torch.minimum(rest[:, 3], boxes[rank, 3]) - torch.maximum(rest[:, 1], boxes[rank, 1])).clamp(min=0)
        union = area[rank] + area[rank + 1:] - w * h
        dropped[rank + 1:] |= (union > 0) & (w * h > iou_threshold * union)  # torchvision's 0 / 0 is NaN: kept
    return torch.tensor(keep, dtype=torch.int64)


def _ssdlite(seed):
    """SSDlite320-MobileNetV3 with its postprocessing (score threshold, top-k, batched NMS), 5 classes."""
    import torch

    from tests import onnx_models
    tv = _import_torchvision()
    import torchvision.extension
    if onnx_models._TORCHVISION_SCHEMAS is not None:  # torchvision's own kernels did not load
        torchvision.extension._has_ops = has_ops
        if not torch._C._dispatch_has_kernel_for_dispatch_key("torchvision::nms", "CPU"):
            onnx_models._TORCHVISION_SCHEMAS.impl("nms", nms, "CPU")
    torch.manual_seed(seed)
    model = tv.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=5)
    # BatchNorm statistics measured on random images: with made-up ones the features collapse to constants
    # and the boxes' scores tie, leaving NMS's order to rounding
    for bn in [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]:
        bn.reset_running_stats()
        bn.momentum = None
    model.backbone.train()
    with torch.no_grad():
        model.backbone(torch.rand(8, 3, 320, 320, generator=torch.Generator().manual_seed(seed + 1)))
    return _wrap(lambda m, image: tuple(m([image])[0][k] for k in ("boxes", "scores", "labels")))(model).eval()


def _ssdlite_spec():
    spec = _make_spec({"image": _tensor("float32", 3, 320, 320)},
                      {"boxes": _tensor("float32", "detections", 4), "scores": _tensor("float32", "detections"),
                       "labels": _tensor("int64", "detections")}, {})
    # pixels in [0, 1), as the model's transform expects
    spec["make_inputs"] = lambda seed=0, **sizes: {
        "image": np.random.default_rng(seed).random((3, 320, 320), dtype=np.float32)}
    return spec


def _tokens_spec(outputs):
    inputs = {"input_ids": _tensor("int64", 1, "seq", value_range=(0, _VOCAB)),
              "attention_mask": _tensor("int64", 1, "seq", value_range=(1, 2))}
    return _make_spec(inputs, outputs, {"seq": (5, 12)})


def _wrap(forward):
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return forward(self.inner, *args)

    return Wrapper


def _minilm(seed):
    """A sentence-transformers MiniLM: BERT, mean pooling over the mask, L2 normalization."""
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    config = tf.BertConfig(vocab_size=_VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=64, attn_implementation="eager")

    def forward(bert, input_ids, attention_mask):
        hidden = bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)

    return _wrap(forward)(tf.BertModel(config)).eval()


def _distilbert(seed):
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    config = tf.DistilBertConfig(vocab_size=_VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                 max_position_embeddings=64, attn_implementation="eager")
    return _wrap(lambda m, ids, mask: m(input_ids=ids, attention_mask=mask).last_hidden_state)(
        tf.DistilBertModel(config)).eval()


def _causal_lm(config_class, model_class, seed, **config):
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    cfg = getattr(tf, config_class)(vocab_size=_VOCAB, attn_implementation="eager", **config)
    return _wrap(lambda m, ids, mask: m(input_ids=ids, attention_mask=mask, use_cache=False).logits)(
        getattr(tf, model_class)(cfg)).eval()


def _gpt_neox(seed):
    return _causal_lm("GPTNeoXConfig", "GPTNeoXForCausalLM", seed, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=128, max_position_embeddings=64, rotary_pct=0.25)


def _phi(seed):
    return _causal_lm("PhiConfig", "PhiForCausalLM", seed, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
                      partial_rotary_factor=0.5)


def _t5(seed):
    """T5 encoder-decoder: encoder over input_ids, decoder over decoder_input_ids."""
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    config = tf.T5Config(vocab_size=_VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                         num_heads=4, relative_attention_num_buckets=8, decoder_start_token_id=0,
                         attn_implementation="eager")
    return _wrap(lambda m, ids, mask, dec: m(input_ids=ids, attention_mask=mask, decoder_input_ids=dec,
                                             use_cache=False).last_hidden_state)(tf.T5Model(config)).eval()


def _t5_spec():
    inputs = {"input_ids": _tensor("int64", 1, "seq", value_range=(0, _VOCAB)),
              "attention_mask": _tensor("int64", 1, "seq", value_range=(1, 2)),
              "decoder_input_ids": _tensor("int64", 1, "dec", value_range=(0, _VOCAB))}
    return _make_spec(inputs, {"hidden": _tensor("float32", 1, "dec", 64)}, {"seq": (5, 12), "dec": (3, 6)})


def _whisper_encoder(seed):
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    config = tf.WhisperConfig(num_mel_bins=16, d_model=64, encoder_layers=2, encoder_attention_heads=4,
                              encoder_ffn_dim=128, decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=128,
                              max_source_positions=32, attn_implementation="eager")
    return _wrap(lambda m, feats: m(input_features=feats).last_hidden_state)(
        tf.WhisperModel(config).get_encoder()).eval()


def _whisper_spec():
    return _make_spec({"input_features": _tensor("float32", 1, 16, 64)},
                      {"hidden": _tensor("float32", 1, 32, 64)}, {})


def _dynamic_image_spec(classes, batch, h, w):
    """Batch, height and width all dynamic, run at two sizes of each; bounds: what a user would state."""
    spec = _make_spec({"input": _tensor("float32", "batch", 3, "h", "w")},
                      {"logits": _tensor("float32", "batch", classes)}, {"batch": batch, "h": h, "w": w})
    spec["bounds"] = {"batch": 8, "h": (32, 256), "w": (32, 256)}
    spec["trace"] = {"batch": 2, "h": 88, "w": 88}
    return spec


def _small_swin(seed):
    """A two-stage Swin (torchvision's class): pads to whole 7x7 windows and shifts them, at any image size."""
    import torch
    torch.manual_seed(seed)
    st = _import_torchvision().models.swin_transformer
    return st.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
                              num_classes=10).eval()


def _deberta_v2(seed):
    """DeBERTa-v2 with relative attention (p2c and c2p): it tiles its relative embeddings by the batch size."""
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    config = tf.DebertaV2Config(vocab_size=_VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, max_position_embeddings=64, relative_attention=True,
                                position_buckets=16, pos_att_type=["p2c", "c2p"], attn_implementation="eager")
    return _wrap(lambda m, ids, mask: m(input_ids=ids, attention_mask=mask).last_hidden_state)(
        tf.DebertaV2Model(config)).eval()


def _batched_tokens_spec(outputs):
    inputs = {"input_ids": _tensor("int64", "batch", "seq", value_range=(0, _VOCAB)),
              "attention_mask": _tensor("int64", "batch", "seq", value_range=(1, 2))}
    return _make_spec(inputs, outputs, {"batch": (2, 1), "seq": (5, 11)})


_GPT2_LAYERS, _GPT2_HEADS, _GPT2_HEAD_DIM = 2, 4, 16


def _gpt2_with_cache(seed):
    """GPT-2 as an LLM runtime runs it: past keys and values in, logits and present keys and values out."""
    import torch
    tf = _import_transformers()
    torch.manual_seed(seed)
    config = tf.GPT2Config(vocab_size=_VOCAB, n_embd=_GPT2_HEADS * _GPT2_HEAD_DIM, n_layer=_GPT2_LAYERS,
                           n_head=_GPT2_HEADS, n_positions=64, attn_implementation="eager")

    def forward(gpt2, input_ids, attention_mask, *past):
        cache = tf.DynamicCache()
        for layer in range(_GPT2_LAYERS):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = gpt2(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.logits, *present)

    return _wrap(forward)(tf.GPT2LMHeadModel(config)).eval()


def _gpt2_with_cache_spec():
    kv = [f"{kind}_{layer}" for layer in range(_GPT2_LAYERS) for kind in ("key", "value")]
    past = {f"past_{n}": _tensor("float32", "batch", _GPT2_HEADS, "past", _GPT2_HEAD_DIM) for n in kv}
    inputs = {"input_ids": _tensor("int64", "batch", "seq", value_range=(0, _VOCAB)),
              "attention_mask": _tensor("int64", "batch", "total", value_range=(1, 2)), **past}
    outputs = {"logits": _tensor("float32", "batch", "seq", _VOCAB),
               **{f"present_{n}": _tensor("float32", "batch", _GPT2_HEADS, "total", _GPT2_HEAD_DIM) for n in kv}}
    # a prompt of 3 tokens on an empty cache, then one token after 9
    spec = _make_spec(inputs, outputs, {"batch": (2, 1), "seq": (3, 1), "past": (0, 9), "total": (3, 10)})
    spec["bounds"] = {"batch": 8, "seq": 64, "past": (0, 64), "total": 64}
    make = spec["make_inputs"]
    spec["make_inputs"] = lambda seed=0, **sizes: make(seed, **{**sizes, "total": sizes["seq"] + sizes["past"]})
    return spec


ZOO = {
    "mobilenet_v3_small": (lambda s: _vision("mobilenet_v3_small", s), lambda: _image_spec(128, 1000), "cnn"),
    "efficientnet_b0": (lambda s: _vision("efficientnet_b0", s), lambda: _image_spec(128, 1000), "cnn"),
    "shufflenet_v2_x0_5": (lambda s: _vision("shufflenet_v2_x0_5", s), lambda: _image_spec(128, 1000), "cnn"),
    "regnet_y_400mf": (lambda s: _vision("regnet_y_400mf", s), lambda: _image_spec(128, 1000), "cnn"),
    "convnext_tiny": (lambda s: _vision("convnext_tiny", s), lambda: _image_spec(96, 1000), "cnn"),
    "vit_small_image": (_vit, lambda: _image_spec(64, 10), "cnn"),
    "minilm_l2_normalized": (_minilm, lambda: _tokens_spec({"embedding": _tensor("float32", 1, 64)}), "nlp"),
    "distilbert": (_distilbert, lambda: _tokens_spec({"hidden": _tensor("float32", 1, "seq", 64)}), "nlp"),
    "gpt_neox": (_gpt_neox, lambda: _tokens_spec({"logits": _tensor("float32", 1, "seq", _VOCAB)}), "nlp"),
    "phi": (_phi, lambda: _tokens_spec({"logits": _tensor("float32", 1, "seq", _VOCAB)}), "nlp"),
    "t5_small_config": (_t5, _t5_spec, "nlp"),
    "whisper_tiny_encoder": (_whisper_encoder, _whisper_spec, "nlp"),
    "ssdlite320_mobilenet_v3": (_ssdlite, _ssdlite_spec, "detection"),
    "deberta_v2": (_deberta_v2, lambda: _batched_tokens_spec({"hidden": _tensor("float32", "batch", "seq", 64)}),
                   "nlp"),
    "mistral_sliding_window": (
        lambda s: _causal_lm("MistralConfig", "MistralForCausalLM", s, hidden_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                             max_position_embeddings=64, sliding_window=4),
        lambda: _tokens_spec({"logits": _tensor("float32", 1, "seq", _VOCAB)}), "nlp"),
    "gpt2_with_cache": (_gpt2_with_cache, _gpt2_with_cache_spec, "nlp"),
    "mobilenet_v3_small_any_size": (lambda s: _vision("mobilenet_v3_small", s),
                                    lambda: _dynamic_image_spec(1000, (3, 1), (160, 97), (192, 71)), "image"),
    "swin_small_any_size": (_small_swin, lambda: _dynamic_image_spec(10, (2, 1), (64, 97), (80, 71)), "image"),
}


def zoo_spec(name):
    return ZOO[name][1]()


def export_zoo_model(name, path, seed=0):
    """Build ``name`` with seeded weights and export it to ``path``; returns ``(path, spec)``."""
    import torch
    builder, spec_fn, _ = ZOO[name]
    spec = spec_fn()
    model = builder(seed)
    trace = spec["make_inputs"](**{d: spec.get("trace", {}).get(d, _TRACE_SIZE) for d in spec["dynamic"]})
    args = tuple(torch.from_numpy(np.abs(a) if a.dtype.kind == "f" else a) for a in trace.values())
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention kernel has no ONNX export
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=OPSET,
                          input_names=list(spec["inputs"]), output_names=list(spec["outputs"]),
                          dynamic_axes=_dynamic_axes(spec))
    torch.backends.mha.set_fastpath_enabled(fastpath)
    _name_output_dims(path, spec)
    return Path(path), spec


def get_zoo_model(name):
    """``(path, spec)`` of zoo model ``name``, exported once into the shared cache folder."""
    if name not in ZOO:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(ZOO)}")
    return cached_export(f"zoo-{name}", __file__, lambda path: export_zoo_model(name, path)), zoo_spec(name)


def feeds(spec, seed=0, **sizes):
    """Valid inputs for ``spec`` at ``sizes`` (small sizes by default)."""
    return {k: np.ascontiguousarray(v) for k, v in spec["make_inputs"](seed=seed, **sizes).items()}
