"""What the farm tests share: two tiny ONNX models, board files behind the
loopback sshd (one reachable, one down, one whose commands wait for a gate
the test opens) and farm files."""

from __future__ import annotations

import getpass

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
    """The loopback sshd board and a board whose port is closed (down)."""
    user = getpass.getuser()
    return {"sshd": sshd.board_file(folder / "ssh-loopback.yaml", name="ssh-loopback", user=user),
            "down": sshd.board_file(folder / "ssh-down.yaml", name="ssh-down", user=user, port=free_port())}


GATE_SCRIPT = 'gate=$1; shift\nwhile [ ! -e "$gate" ]; do sleep 0.1; done\nexec "$@"\n'
GATE_TIMEOUT_S = 900   # the board's timeout: its cells wait for the gate, not for a slow emulator


def gated_board(sshd, folder, name: str = "ssh-gate") -> tuple:
    """(board file, gate): the loopback sshd board whose every command waits until the file `gate` exists,
    so that its cells stay in flight, deterministically, until the test opens the gate."""
    script = folder / f"{name}.sh"
    script.write_text(GATE_SCRIPT)
    gate = folder / f"{name}.open"
    prefix = ["sh", str(script), str(gate), "qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
    path = sshd.board_file(folder / f"{name}.yaml", name=name, user=getpass.getuser(), command_prefix=prefix)
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "timeout_s": GATE_TIMEOUT_S}))
    return path, gate


def write_farm(path, boards: dict, ssh: list, ray: str = "local") -> str:
    path.write_text(yaml.safe_dump({"ray": ray, "num_cpus": 2, "boards": boards, "ssh": [str(s) for s in ssh]}))
    return str(path)
