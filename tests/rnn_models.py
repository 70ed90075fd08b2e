"""Small keyword-spotting recurrent networks exported from PyTorch, as test
references: 49 frames x 40 MFCC features -> LSTM(64) or GRU(64) -> the last
frame's hidden state -> Linear(12), seeded weights, batch first with a
dynamic batch (`batch`).

``get_kws(cell)`` (``cell`` "lstm" or "gru") exports once into the cache
folder of tests/onnx_models.py (``cache_dir()``), under a key of this file's
source and the exporting packages' versions, behind a file lock, written to
a temporary name and then renamed (tests/model_cache.py).
"""

import warnings
from pathlib import Path

from tests.model_cache import cached_export

FRAMES, FEATURES, HIDDEN, CLASSES = 49, 40, 64, 12
OPSET = 17
CELLS = ("lstm", "gru")


def build_kws(cell: str, seed: int = 0):
    import torch

    class KeywordSpotter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layer = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
            self.rnn = layer(FEATURES, HIDDEN, batch_first=True)
            self.fc = torch.nn.Linear(HIDDEN, CLASSES)

        def forward(self, mfcc):
            out, _ = self.rnn(mfcc)
            return self.fc(out[:, -1])

    torch.manual_seed(seed)
    return KeywordSpotter().eval()


def export_kws(cell: str, path) -> Path:
    import torch
    model = build_kws(cell)
    trace = torch.zeros(2, FRAMES, FEATURES)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (trace,), str(path), dynamo=False, opset_version=OPSET, input_names=["mfcc"],
                          output_names=["logits"], dynamic_axes={"mfcc": {0: "batch"}, "logits": {0: "batch"}})
    return Path(path)


def get_kws(cell: str) -> Path:
    """The exported model of `cell`, from the cache (exported on first use)."""
    if cell not in CELLS:
        raise KeyError(f"unknown cell {cell!r}; known: {', '.join(CELLS)}")
    return cached_export(f"kws_{cell}", __file__, lambda path: export_kws(cell, path))
