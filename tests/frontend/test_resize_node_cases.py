"""The ONNX backend node test cases of Resize, imported and interpreted
through node_tests.run_case: every case listed here must pass.

Two cases are left out: test_resize_downsample_scales_linear_align_corners
and test_resize_downsample_scales_cubic_align_corners. Their expected
outputs come from the ONNX reference implementation, which for
align_corners divides by the fractional length `scale * in - 1`; the spec
(`length_resized - 1`) and ONNX Runtime divide by the integer output length
less one, and so does relax_edge. ONNX Runtime fails both cases too."""

import warnings

import pytest
from onnx.backend.test.case.node import collect_testcases

from relax_edge.frontend.onnx.node_tests import run_case

PASSING = """
test_resize_downsample_scales_cubic test_resize_downsample_scales_cubic_A_n0p5_exclude_outside
test_resize_downsample_scales_cubic_antialias test_resize_downsample_scales_linear
test_resize_downsample_scales_linear_antialias test_resize_downsample_scales_linear_half_pixel_symmetric
test_resize_downsample_scales_nearest test_resize_downsample_sizes_cubic
test_resize_downsample_sizes_cubic_antialias test_resize_downsample_sizes_linear_antialias
test_resize_downsample_sizes_linear_pytorch_half_pixel test_resize_downsample_sizes_nearest
test_resize_downsample_sizes_nearest_not_larger test_resize_downsample_sizes_nearest_not_smaller
test_resize_tf_crop_and_resize test_resize_tf_crop_and_resize_axes_2_3
test_resize_tf_crop_and_resize_axes_3_2
test_resize_tf_crop_and_resize_extrapolation_value test_resize_upsample_scales_cubic
test_resize_upsample_scales_cubic_A_n0p5_exclude_outside test_resize_upsample_scales_cubic_align_corners
test_resize_upsample_scales_cubic_asymmetric test_resize_upsample_scales_linear
test_resize_upsample_scales_linear_align_corners test_resize_upsample_scales_linear_half_pixel_symmetric
test_resize_upsample_scales_nearest test_resize_upsample_scales_nearest_axes_2_3
test_resize_upsample_scales_nearest_axes_3_2 test_resize_upsample_sizes_cubic test_resize_upsample_sizes_nearest
test_resize_upsample_sizes_nearest_axes_2_3 test_resize_upsample_sizes_nearest_axes_3_2
test_resize_upsample_sizes_nearest_ceil_half_pixel test_resize_upsample_sizes_nearest_floor_align_corners
test_resize_upsample_sizes_nearest_not_larger test_resize_upsample_sizes_nearest_not_smaller
test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric
""".split()

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    CASES = {c.name: c for c in collect_testcases("Resize")}


@pytest.mark.parametrize("name", PASSING)
def test_resize_node_case(name):
    result = run_case(CASES[name])
    assert result.status == "pass", result.detail


RESIZE_10 = [("nearest", (1, 1, 2, 1.5)), ("nearest", (1, 1, 0.6, 0.5)), ("nearest", (1, 2, 1.5, 0.4)),
             ("nearest", (1, 1, 0.75, 7 / 3)), ("linear", (1, 1, 1.5, 0.6)), ("linear", (1, 1, 2, 2))]


@pytest.mark.parametrize("mode, scales", RESIZE_10, ids=[f"{m}-{s}" for m, s in RESIZE_10])
def test_resize_10_follows_onnxruntime(mode, scales):
    """Resize-10 is asymmetric, and its nearest takes floor along axes that
    grow and ceil along axes that shrink (not Resize-11's defaults)."""
    import numpy as np
    from onnx import TensorProto, helper

    import relax_edge as rxe
    from tests.frontend.test_onnx_import import make_model, ort, vi

    shape = [2, 2, 5, 7]
    node = helper.make_node("Resize", ["x", "scales"], ["y"], mode=mode)
    model = make_model([node], [vi("x", shape)], [vi("y", None, TensorProto.FLOAT)],
                       {"scales": np.array(scales, np.float32)}, opset=10)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = ort(model, x)[0]
        actual = rxe.interpret(rxe.from_onnx(model), x)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)
