"""What the farm tests share: two tiny ONNX models, board files behind the
loopback sshd (one reachable, one down, one that never answers) and farm files."""

from __future__ import annotations

import getpass
import socket

import numpy as np
import yaml

from tests.deploy.sshd import free_port
from tests.models import save_tiny_onnx


def save_gemm_sigmoid_onnx(path) -> None:
    """Gemm by a 16x8 weight and a bias over a 2x16 input, then Sigmoid."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"]), helper.make_node("Sigmoid", ["y"], ["z"])], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def models(folder) -> list:
    tiny, gemm = folder / "tiny.onnx", folder / "gemm.onnx"
    save_tiny_onnx(tiny)
    save_gemm_sigmoid_onnx(gemm)
    return [tiny, gemm]


def ssh_boards(sshd, folder) -> dict:
    """The loopback sshd board, a board whose port is closed (down) and one whose port never answers."""
    user = getpass.getuser()
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)   # connections complete in the backlog and hear nothing
    return {"sshd": sshd.board_file(folder / "ssh-loopback.yaml", name="ssh-loopback", user=user),
            "down": sshd.board_file(folder / "ssh-down.yaml", name="ssh-down", user=user, port=free_port()),
            "hang": sshd.board_file(folder / "ssh-hang.yaml", name="ssh-hang", user=user,
                                    port=hang.getsockname()[1]),
            "hang_socket": hang}


def write_farm(path, boards: dict, ssh: list) -> str:
    path.write_text(yaml.safe_dump({"ray": "local", "num_cpus": 2, "boards": boards, "ssh": [str(s) for s in ssh]}))
    return str(path)
