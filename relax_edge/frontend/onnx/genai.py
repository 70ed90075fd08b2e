"""ONNX Runtime GenAI model folders: `from_genai(folder)` imports the decoder with its KV cache as state.

A folder made by onnxruntime-genai's model builder (`python -m
onnxruntime_genai.models.builder -i <hf dir> -o <folder> -p int4 -e cpu`)
holds model.onnx (+ its .data) and genai_config.json. From the config:

1. `model.decoder.filename` is the ONNX file; `inputs` / `outputs` name
   input_ids, attention_mask, position_ids (optional) and the cache tensors
   (`past_key_names` "past_key_values.%d.key" -> `present_key_names`, the
   same for values, one per layer of `num_hidden_layers`): those pairs are
   from_onnx's `kv_cache=`. Token inputs named otherwise are renamed to
   input_ids / attention_mask / position_ids, the names the step contract
   (transform/kv_state.py) uses.
2. `head_size` pins the caches' last dim (the builder names it kv_cache_dim).
3. `context_length` is `max_context` unless a smaller one is given.
4. `eos_token_id` (an int or a list), `bos_token_id`, `pad_token_id` and
   `vocab_size` are `GenaiConfig`'s (`read_config(folder)`); pass
   `stop=config.eos_token_ids` to `m.generate`.

ONNX Runtime shares one buffer of context_length between past and present
(`past_present_share_buffer`); here main sees past (1, kv_heads, past,
head) -> present (1, kv_heads, past + seq, head), and `step` keeps the cache
as state updated in place. `int8_activations=True` computes the MatMulNBits
of accuracy_level 4 with int8 activations as ONNX Runtime does
(convert/contrib_llm.py); by default activations stay float32.

A folder whose config lacks a field named above, or names an input the model
does not have, is an OnnxImportError naming the field.
"""

from __future__ import annotations

import dataclasses
import json
import os

import onnx

from ...ir.expr import IRModule
from .context import OnnxImportError
from .importer import OnnxImporter, _load

__all__ = ["from_genai", "import_model", "read_config", "GenaiConfig", "CONFIG_FILE"]

CONFIG_FILE = "genai_config.json"
TOKEN_INPUTS = ("input_ids", "attention_mask", "position_ids")


@dataclasses.dataclass(frozen=True)
class GenaiConfig:
    """What from_genai reads from genai_config.json."""
    model_file: str
    token_inputs: dict             # our name (input_ids, attention_mask, position_ids) -> the model's
    kv_cache: dict                 # past input -> present output, layer by layer, keys then values
    layers: int
    head_size: int
    context_length: int
    eos_token_ids: tuple
    bos_token_id: int | None
    pad_token_id: int | None
    vocab_size: int | None


def _field(tree: dict, path: str, kind, default=dataclasses.MISSING):
    node = tree
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            if default is not dataclasses.MISSING:
                return default
            raise OnnxImportError(f"{CONFIG_FILE}: field {path} is missing")
        node = node[key]
    if not isinstance(node, kind) or isinstance(node, bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise OnnxImportError(f"{CONFIG_FILE}: field {path} is {node!r}; it must be {names}")
    return node


def _pattern(tree: dict, path: str, layer: int) -> str:
    text = _field(tree, path, str)
    if text.count("%d") != 1:
        raise OnnxImportError(f"{CONFIG_FILE}: field {path} = {text!r} must hold one %d (the layer)")
    return text.replace("%d", str(layer))


def read_config(folder) -> GenaiConfig:
    """The GenaiConfig of a genai model folder (its genai_config.json)."""
    path = os.path.join(os.fspath(folder), CONFIG_FILE)
    if not os.path.isfile(path):
        raise OnnxImportError(f"{folder}: no {CONFIG_FILE} (not an ONNX Runtime GenAI model folder)")
    try:
        with open(path, encoding="utf-8") as f:
            tree = json.load(f)
    except (OSError, ValueError) as err:
        raise OnnxImportError(f"{path}: not readable JSON ({err})") from None
    if not isinstance(tree, dict):
        raise OnnxImportError(f"{path}: the top level must be an object")
    dec = "model.decoder"
    layers = _field(tree, f"{dec}.num_hidden_layers", int)
    if layers < 1:
        raise OnnxImportError(f"{CONFIG_FILE}: field {dec}.num_hidden_layers = {layers} must be positive")
    tokens = {"input_ids": _field(tree, f"{dec}.inputs.input_ids", str),
              "attention_mask": _field(tree, f"{dec}.inputs.attention_mask", str)}
    position = _field(tree, f"{dec}.inputs.position_ids", str, None)
    if position is not None:
        tokens["position_ids"] = position
    pairs = {}
    for kind in ("key", "value"):
        for layer in range(layers):
            pairs[_pattern(tree, f"{dec}.inputs.past_{kind}_names", layer)] = \
                _pattern(tree, f"{dec}.outputs.present_{kind}_names", layer)
    eos = _field(tree, "model.eos_token_id", (int, list))
    eos = tuple(eos) if isinstance(eos, list) else (eos,)
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in eos):
        raise OnnxImportError(f"{CONFIG_FILE}: field model.eos_token_id = {eos!r} must be ints")
    context = _field(tree, "model.context_length", int)
    head = _field(tree, f"{dec}.head_size", int)
    if context < 1 or head < 1:
        raise OnnxImportError(f"{CONFIG_FILE}: context_length {context} and head_size {head} must be positive")
    return GenaiConfig(model_file=_field(tree, f"{dec}.filename", str), token_inputs=tokens, kv_cache=pairs,
                       layers=layers, head_size=head, context_length=context, eos_token_ids=eos,
                       bos_token_id=_field(tree, "model.bos_token_id", int, None),
                       pad_token_id=_field(tree, "model.pad_token_id", int, None),
                       vocab_size=_field(tree, "model.vocab_size", int, None))


def _rename_inputs(model: onnx.ModelProto, names: dict) -> None:
    """Graph inputs renamed (old -> new) with every node reading them, subgraphs included."""
    if not names:
        return
    taken = {i.name for i in model.graph.input} | {o for n in model.graph.node for o in n.output}
    for old, new in names.items():
        if new in taken:
            raise OnnxImportError(f"{CONFIG_FILE}: input {old} stands for {new}, but the model already has a "
                                  f"value named {new}")

    def visit(graph):
        for node in graph.node:
            node.input[:] = [names.get(x, x) for x in node.input]
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    visit(sub)
    for inp in model.graph.input:
        inp.name = names.get(inp.name, inp.name)
    visit(model.graph)


def from_genai(folder, max_context: int | None = None, int8_activations: bool = False,
               dim_bounds=None) -> IRModule:
    """Import the decoder of ONNX Runtime GenAI model folder `folder` (see the module doc): an IRModule
    with main (the model as exported) and, for a bounded context, `step` (generation, m.generate)."""
    from . import convert  # noqa: F401  (registers the converters)
    config = read_config(folder)
    if max_context is None:
        max_context = config.context_length
    elif isinstance(max_context, bool) or not isinstance(max_context, int) or not 1 <= max_context:
        raise OnnxImportError(f"max_context must be a positive int, got {max_context!r}")
    path = os.path.join(os.fspath(folder), config.model_file)
    model, base_dir = _load(path)
    inputs = {i.name for i in model.graph.input}
    outputs = {o.name for o in model.graph.output}
    for ours, theirs in config.token_inputs.items():
        if theirs not in inputs:
            raise OnnxImportError(f"{CONFIG_FILE}: inputs.{ours} names {theirs!r}, which {config.model_file} "
                                  f"does not take (its inputs: {', '.join(sorted(inputs))})")
    for past, present in config.kv_cache.items():
        if past not in inputs or present not in outputs:
            raise OnnxImportError(f"{CONFIG_FILE}: the cache pair {past} -> {present} is not an input and an "
                                  f"output of {config.model_file}")
    _rename_inputs(model, {theirs: ours for ours, theirs in config.token_inputs.items() if ours != theirs})
    shapes = {past: [None, None, None, config.head_size] for past in config.kv_cache}
    return import_model(model, int8_activations, base_dir=base_dir, dim_bounds=dim_bounds, input_shapes=shapes,
                        kv_cache=dict(config.kv_cache), max_context=max_context)


def import_model(model, int8_activations: bool = False, base_dir=None, **from_onnx_args) -> IRModule:
    """from_onnx(model, **from_onnx_args) with the contrib operators' import options: `int8_activations`
    (MatMulNBits of accuracy_level 4 with int8 activations); `base_dir`, the folder of a ModelProto's
    external data."""
    from . import convert  # noqa: F401  (registers the converters)
    importer = OnnxImporter(model, **from_onnx_args)
    if base_dir is not None:
        importer.base_dir = base_dir
    importer.int8_activations = bool(int8_activations)
    return importer.run()
