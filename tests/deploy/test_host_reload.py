"""A model rebuilt in one process runs as rebuilt on the host.

The dynamic loader hands back the library it already mapped for a path it
has opened, or for a new file on the inode of a deleted one; the host
transport (relax_edge/deploy/host.py load_library) loads such a library from
a private copy. Without it, a rebuild into the same out_dir ran the old
weights in process, silently.
"""

import shutil

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe

X = np.array([1.0, -2.0, 0.5], np.float32)


def scaled(scale: float):
    c = numpy_helper.from_array(np.full(3, scale, np.float32), "c")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [c])
    return rxe.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_a_rebuild_into_the_same_folder_runs_the_new_model(backend, tmp_path):
    with rxe.connect("host") as dev:
        first = dev.load(rxe.build(scaled(2.0), board="host", backend=backend, out_dir=tmp_path / "art",
                                   profile=False, quiet=True))
        np.testing.assert_array_equal(first.run(X)[0], X * 2)
        for scale in (3.0, -1.5):
            m = dev.load(rxe.build(scaled(scale), board="host", backend=backend, out_dir=tmp_path / "art",
                                   profile=False, quiet=True))
            np.testing.assert_array_equal(m.run(X)[0], X * np.float32(scale))
        np.testing.assert_array_equal(first.run(X)[0], X * 2)   # the first library is still the first model


def test_a_new_library_on_a_deleted_ones_inode_runs_the_new_model(tmp_path):
    with rxe.connect("host") as dev:
        for scale in (4.0, 5.0, 6.0, 7.0):
            shutil.rmtree(tmp_path / "art", ignore_errors=True)
            art = rxe.build(scaled(scale), board="host", out_dir=tmp_path / "art", profile=False, quiet=True)
            np.testing.assert_array_equal(dev.load(art).run(X)[0], X * np.float32(scale))


def test_an_unchanged_library_is_loaded_once(tmp_path):
    art = rxe.build(scaled(2.0), board="host", out_dir=tmp_path / "art", profile=False, quiet=True)
    with rxe.connect("host") as dev:
        a, b = dev.load(art), dev.load(art)
        assert a.lib._handle == b.lib._handle
        assert not list((tmp_path / "art").glob(".*.so"))   # no private copy left behind
