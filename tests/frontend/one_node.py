"""Checks shared by the one-node ONNX operator tests: outputs against a
reference, and a model compiled for the host and loaded."""

import contextlib

import numpy as np

import relax_edge as rxe


def assert_matches(actual, expected, tol: float = 0.0, float16_tol: float | None = None) -> None:
    """Same shape and dtype; floats within `tol` (float16 within `float16_tol`
    where given), everything else exactly (`tol` 0: floats exactly too)."""
    actual = np.asarray(actual)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, \
        (actual.shape, actual.dtype, expected.shape, expected.dtype)
    if expected.dtype == np.float16 and float16_tol is not None:
        np.testing.assert_allclose(actual.astype(np.float32), expected, rtol=float16_tol, atol=float16_tol)
    elif expected.dtype.kind == "f" and tol:
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(actual, expected)


@contextlib.contextmanager
def compiled(model, backend: str, out_dir):
    """`model` (ONNX) built for the host with `backend` into `out_dir`, loaded."""
    art = rxe.build(rxe.from_onnx(model), board="host", backend=backend, out_dir=out_dir, name="m")
    with rxe.connect("host") as dev:
        yield dev.load(art)
