"""genai_config.json as from_genai reads it (frontend/onnx/genai.py): the fields it takes, and a bad folder
refused by the field at fault. The builder's own folders are tests/deploy/test_genai_model.py's."""

import json

import pytest
from onnx import TensorProto, helper, save

import relax_edge as rxe
from relax_edge.frontend.onnx import OnnxImportError
from relax_edge.frontend.onnx.genai import read_config

CONFIG = {
    "model": {
        "bos_token_id": 1, "eos_token_id": [2, 7], "pad_token_id": 0, "context_length": 32, "vocab_size": 16,
        "decoder": {
            "filename": "model.onnx", "head_size": 4, "num_hidden_layers": 1,
            "inputs": {"input_ids": "tokens", "attention_mask": "attention_mask",
                       "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
            "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                        "present_value_names": "present.%d.value"},
        },
    },
}


def folder_with(tmp_path, config, model=True):
    (tmp_path / "genai_config.json").write_text(json.dumps(config))
    if model:   # a stand-in decoder of the config's names: present = concat(past, the tokens as keys)
        cache = [1, 1, "past", 4]
        nodes = [helper.make_node("Cast", ["tokens"], ["logits"], to=TensorProto.FLOAT),
                 helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("a", TensorProto.INT64, [2],
                                                                                     [1, 3])),
                 helper.make_node("Constant", [], ["wide"], value=helper.make_tensor("w", TensorProto.INT64, [4],
                                                                                     [1, 1, 1, 4])),
                 helper.make_node("Unsqueeze", ["logits", "axes"], ["column"]),
                 helper.make_node("Expand", ["column", "wide"], ["new"])]
        nodes += [helper.make_node("Concat", [f"past_key_values.0.{k}", "new"], [f"present.0.{k}"], axis=2)
                  for k in ("key", "value")]
        graph = helper.make_graph(
            nodes, "stand_in",
            [helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "seq"]),
             helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "total"]),
             *[helper.make_tensor_value_info(f"past_key_values.0.{k}", TensorProto.FLOAT, cache)
               for k in ("key", "value")]],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq"]),
             *[helper.make_tensor_value_info(f"present.0.{k}", TensorProto.FLOAT, [1, 1, "total", 4])
               for k in ("key", "value")]])
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(tmp_path / "model.onnx"))
    return tmp_path


def test_read_config_takes_the_fields(tmp_path):
    config = read_config(folder_with(tmp_path, CONFIG, model=False))
    assert config.token_inputs == {"input_ids": "tokens", "attention_mask": "attention_mask"}
    assert config.kv_cache == {"past_key_values.0.key": "present.0.key", "past_key_values.0.value": "present.0.value"}
    assert (config.eos_token_ids, config.bos_token_id, config.context_length, config.head_size) == ((2, 7), 1, 32, 4)


def test_token_inputs_are_renamed_and_the_context_bounded(tmp_path):
    mod = rxe.from_genai(folder_with(tmp_path, CONFIG))
    main = mod["main"]
    assert [p.name for p in main.params][:2] == ["input_ids", "attention_mask"]
    assert main.attrs["max_context"] == 32
    assert main.params[2].type.shape[3] == 4


def _without(path):
    config = json.loads(json.dumps(CONFIG))
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node[key]
    del node[last]
    return config


@pytest.mark.parametrize("change, message", [
    (lambda c: _without("model.decoder.head_size"), r"field model\.decoder\.head_size is missing"),
    (lambda c: {**c, "model": {**c["model"], "eos_token_id": "2"}}, r"field model\.eos_token_id is '2'"),
    (lambda c: json.loads(json.dumps(c).replace("past_key_values.%d.key", "past_key")),
     r"past_key_names = 'past_key' must hold one %d"),
    (lambda c: json.loads(json.dumps(c).replace('"tokens"', '"ids"')),
     r"inputs\.input_ids names 'ids', which model\.onnx does not take"),
    (lambda c: json.loads(json.dumps(c).replace('"present.%d.value"', '"out.%d.value"')),
     r"the cache pair past_key_values\.0\.value -> out\.0\.value is not an input and an output"),
])
def test_bad_config_is_refused_by_field(tmp_path, change, message):
    with pytest.raises(OnnxImportError, match=message):
        rxe.from_genai(folder_with(tmp_path, change(CONFIG)))


def test_a_folder_without_config_is_refused(tmp_path):
    with pytest.raises(OnnxImportError, match=r"no genai_config\.json \(not an ONNX Runtime GenAI model folder\)"):
        rxe.from_genai(tmp_path)


def test_from_onnx_of_a_folder_names_from_genai(tmp_path):
    with pytest.raises(OnnxImportError, match=r"an ONNX Runtime GenAI model folder; import it with rxe\.from_genai"):
        rxe.from_onnx(folder_with(tmp_path, CONFIG))
