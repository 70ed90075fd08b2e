"""A remote session left open when the interpreter exits: the loaded model's
finalizer must not close the server's pipes at shutdown (the stderr drain
thread is frozen there holding its reader's lock: a fatal error, exit 134,
seen every time on a loaded machine and not at all on an idle one), and the
server ends on its stdin's end."""

import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper

import relax_edge as rxe

SCRIPT = """
import sys
import numpy as np
import relax_edge as rxe
dev = rxe.connect("qemu-armv7")
loaded = dev.load(rxe.Artifact.load(sys.argv[1]))
print(float(loaded.run(np.full((2, 3), -1.5, np.float32))[0].sum()))
"""


def test_session_left_open_exits_cleanly(tmp_path):
    graph = helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "abs",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    art = rxe.build(rxe.from_onnx(model), board="qemu-armv7", backend="c", out_dir=tmp_path, name="m", quiet=True,
                    profile=False)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(art.out_dir)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Fatal Python error" not in proc.stderr
    assert np.isclose(float(proc.stdout.split()[-1]), 9.0)
