"""resize legalized (interpreted tensor programs) equals the numpy reference
over a symbolic batch n (and a symbolic spatial dim m): nearest in every
rounding mode, linear and cubic in every coordinate mode, up and down, from
sizes or scales, antialias, exclude_outside, tf_crop_and_resize with
extrapolation. The interpreter computes float32 coordinates in float64, so
its cases keep their ties exact (x2, x0.5, align_corners 3 -> 5); the ties
that only float32 rounding creates are checked compiled to C, where the
coordinate arithmetic is float32 as in the reference."""

import pytest

from relax_edge import op
from tests.legalize.harness import check_compiled, check_legalized

F, I = "float32", "int32"
BATCH = [{"n": 1}, {"n": 2}]
SPATIAL = [{"n": 1, "m": 5}, {"n": 2, "m": 8}]
TOL = {"rtol": 1e-5, "atol": 1e-5}


def sized(h, w, **attrs):
    """resize of an (n, c, H, W) input to (n, c, h, w)."""
    return lambda x: op.resize(x, sizes=(x.type.shape[0], x.type.shape[1], h, w), **attrs)


def scaled(sh, sw, **attrs):
    return lambda x: op.resize(x, scales=(1, 1, sh, sw), **attrs)


NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
CROP = {"coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -3.5}

# name, input dims, dtype, build, sizes
CASES = [
    *[(f"nearest_asymmetric_x2_{m}", ("n", 2, 3, 3), F,
       scaled(2, 2, coordinate_transformation_mode="asymmetric", nearest_mode=m), BATCH) for m in NEAREST_MODES],
    *[(f"nearest_half_pixel_down_{m}", ("n", 1, 4, 6), F, scaled(0.5, 0.5, nearest_mode=m), BATCH)
      for m in NEAREST_MODES],
    ("nearest_align_corners_ties", ("n", 1, 3, 3), F,
     sized(5, 5, coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil"), BATCH),
    ("nearest_pytorch_half_pixel_to_1", ("n", 1, 3, 4), F,
     sized(1, 7, coordinate_transformation_mode="pytorch_half_pixel"), BATCH),
    ("nearest_half_pixel_symmetric", ("n", 1, 4, 3), F,
     scaled(1.5, 2, coordinate_transformation_mode="half_pixel_symmetric"), BATCH),
    ("nearest_int32_crop", ("n", 2, 3, 4), I,
     sized(4, 3, roi=(0, 0, 0.4, -0.3, 1, 1, 1.2, 0.7), nearest_mode="floor", **CROP), BATCH),
    ("nearest_symbolic", ("n", "m"), F, lambda x: op.resize(x, sizes=(x.type.shape[0], x.type.shape[1] * 2 + 1),
                                                            nearest_mode="ceil"), SPATIAL),
    ("linear_half_pixel_up", ("n", 2, 3, 4), F, sized(5, 7, mode="linear"), BATCH),
    ("linear_align_corners_down", ("n", 1, 5, 6), F,
     sized(3, 4, mode="linear", coordinate_transformation_mode="align_corners"), BATCH),
    ("linear_asymmetric_scales", ("n", 1, 4, 5), F,
     scaled(1.5, 0.6, mode="linear", coordinate_transformation_mode="asymmetric"), BATCH),
    ("linear_pytorch_half_pixel_to_1", ("n", 1, 3, 4), F,
     sized(1, 6, mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), BATCH),
    ("linear_half_pixel_symmetric", ("n", 1, 4, 3), F,
     scaled(0.5, 2.5, mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), BATCH),
    ("cubic_half_pixel_up", ("n", 2, 3, 4), F, sized(6, 5, mode="cubic"), BATCH),
    ("cubic_asymmetric_scales", ("n", 1, 4, 4), F,
     scaled(2, 0.75, mode="cubic", coordinate_transformation_mode="asymmetric"), BATCH),
    ("cubic_align_corners", ("n", 1, 4, 5), F,
     sized(7, 3, mode="cubic", coordinate_transformation_mode="align_corners"), BATCH),
    ("cubic_exclude_outside", ("n", 1, 5, 4), F,
     sized(3, 7, mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1), BATCH),
    ("linear_antialias_down", ("n", 1, 6, 7), F, scaled(0.5, 0.6, mode="linear", antialias=1), BATCH),
    ("cubic_antialias_down", ("n", 1, 8, 5), F, sized(3, 2, mode="cubic", antialias=1), BATCH),
    ("cubic_antialias_up_and_down", ("n", 1, 3, 8), F, sized(5, 3, mode="cubic", antialias=1, exclude_outside=1),
     BATCH),
    ("linear_crop_extrapolation", ("n", 1, 4, 5), F,
     sized(3, 6, mode="linear", roi=(0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4), **CROP), BATCH),
    ("cubic_crop_to_1", ("n", 1, 4, 5), F, sized(1, 4, mode="cubic", roi=(0, 0, 0.2, 0.1, 1, 1, 0.6, 0.8), **CROP),
     BATCH),
    ("linear_symbolic", ("n", 1, "m"), F,
     lambda x: op.resize(x, sizes=(x.type.shape[0], 1, x.type.shape[2] * 2), mode="linear"), SPATIAL),
    ("linear_antialias_symbolic_scale", ("n", 1, "m"), F,
     lambda x: op.resize(x, sizes=(x.type.shape[0], 1, (x.type.shape[2] + 1) // 2), mode="linear", antialias=1),
     SPATIAL),
    ("cubic_both_axes", ("n", 3), F, lambda x: op.resize(x, sizes=(x.type.shape[0] * 2, 5), mode="cubic"), BATCH),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_resize_legalized(case):
    _, dims, dtype, build, sizes = case
    check_legalized([dims], [dtype], build, sizes, **TOL)


# Each case has outputs whose float32 coordinate lands on a rounding boundary
# that its float64 value misses (e.g. 1 / float32(2/3) is 1.5 in float32).
FLOAT32_TIES = [
    ("round_prefer_floor", "asymmetric", (3, 3), (10, 10)),
    ("round_prefer_ceil", "asymmetric", (3, 5), (2, 4)),
    ("floor", "half_pixel", (3, 5), (1, 3)),
    ("ceil", "half_pixel", (3, 5), (5, 7)),
]


@pytest.mark.parametrize("case", FLOAT32_TIES, ids=[c[0] for c in FLOAT32_TIES])
def test_resize_float32_ties_compiled(case, tmp_path):
    nearest_mode, coord_mode, (h, w), (oh, ow) = case
    check_compiled([("n", 1, h, w)], [F], sized(oh, ow, nearest_mode=nearest_mode,
                                                 coordinate_transformation_mode=coord_mode), BATCH, tmp_path, **TOL)


COMPILED = ["nearest_int32_crop", "nearest_symbolic", "linear_half_pixel_symmetric", "cubic_antialias_down",
            "linear_crop_extrapolation", "linear_antialias_symbolic_scale"]


@pytest.mark.parametrize("name", COMPILED)
def test_resize_compiled(name, tmp_path):
    _, dims, dtype, build, sizes = next(c for c in CASES if c[0] == name)
    check_compiled([dims], [dtype], build, sizes, tmp_path, **TOL)

