"""The Vulkan runtime on lavapipe (or a real GPU with RXE_VK_ANY_DEVICE=1):
dispatches against numpy, grid folding, views at unaligned offsets, the push
block past 128 bytes, a shared-memory reduction, the requirements check, no
pipeline after load, timeouts, staging, timestamps, and a missing libvulkan."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vulkan import vkrt

F32 = 4


def saxpy_kernel(spirv, local_size_x=64):
    return vkrt.kernel("saxpy", spirv["saxpy"], num_buffers=3, num_sizes=1, local_size_x=local_size_x)


def run_saxpy(ctx, n, rng, kernel_index=0):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    bx, by, bo = ctx.buffer(n * F32), ctx.buffer(n * F32), ctx.buffer(n * F32)
    ctx.write(bx, x)
    ctx.write(by, y)
    ctx.begin()
    ctx.dispatch(kernel_index, [(bx, 0, n * F32), (by, 0, n * F32), (bo, 0, n * F32)], [n], n)
    ctx.submit()
    np.testing.assert_array_equal(ctx.read(bo, n), np.float32(2) * x + y)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 100_000])
def test_saxpy_matches_numpy(open_vk, spirv, n):
    ctx = open_vk()
    ctx.load([saxpy_kernel(spirv)])
    run_saxpy(ctx, n, np.random.default_rng(n))


@pytest.mark.parametrize("local_size_x", [32, 128])
def test_the_workgroup_size_is_the_specialization_constant(open_vk, spirv, local_size_x):
    ctx = open_vk()
    ctx.load([saxpy_kernel(spirv, local_size_x)])
    run_saxpy(ctx, 1000, np.random.default_rng(1))


def test_grid_folds_into_y_past_65535_workgroups(open_vk, spirv):
    """4.2M floats at 64 per workgroup: 65,626 workgroups, two rows of x."""
    ctx = open_vk()
    ctx.load([saxpy_kernel(spirv)])
    run_saxpy(ctx, 65535 * 64 + 5000, np.random.default_rng(2))


@pytest.mark.parametrize("group_count_x, n", [(7, 100_000), (1, 65535 * 64 + 100)])
def test_grid_folds_into_z_with_a_lowered_x_limit(open_vk, spirv, group_count_x, n):
    """group_count_x 1: 65,537 workgroups as 65,535 rows in y, then z = 2."""
    ctx = open_vk(limits=vkrt.Limits(group_count_x=group_count_x))
    assert ctx.limits().group_count_x == group_count_x
    ctx.load([saxpy_kernel(spirv)])
    run_saxpy(ctx, n, np.random.default_rng(3))


@pytest.mark.parametrize("force_staging", [False, True])
def test_views_at_unaligned_offsets_of_one_arena(open_vk, spirv, force_staging):
    """x, y and out at element offsets 3, 1030 and 2049 of one buffer: bound at
    offsets aligned down to minStorageBufferOffsetAlignment, the rest in off[]."""
    ctx = open_vk(force_staging=force_staging)
    ctx.load([saxpy_kernel(spirv)])
    n, offsets = 1000, (3, 1030, 2049)
    rng = np.random.default_rng(4)
    arena = ctx.buffer(4096 * F32)
    assert ctx.mapped(arena) != force_staging
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ctx.write(arena, x, offsets[0] * F32)
    ctx.write(arena, y, offsets[1] * F32)
    ctx.begin()
    ctx.dispatch(0, [(arena, o * F32, n * F32) for o in offsets], [n], n)
    ctx.submit()
    np.testing.assert_array_equal(ctx.read(arena, n, offset=offsets[2] * F32), np.float32(2) * x + y)
    np.testing.assert_array_equal(ctx.read(arena, n, offset=offsets[0] * F32), x)


def test_push_block_past_128_bytes_is_a_storage_buffer(open_vk, spirv):
    ctx = open_vk()
    ctx.load([vkrt.kernel("many_sizes", spirv["many_sizes"], num_buffers=2, num_sizes=40)])
    rng = np.random.default_rng(5)
    n = 777
    x = rng.standard_normal(n).astype(np.float32)
    bx, bo = ctx.buffer(n * F32), ctx.buffer(n * F32)
    ctx.write(bx, x)
    outs = []
    ctx.begin()
    for run in range(3):   # several dispatches, each with its own block
        sizes = rng.integers(-1000, 1000, 40).astype(np.int32)
        count = n - 100 * run
        ctx.dispatch(0, [(bx, 0, n * F32), (bo, 0, n * F32)], sizes.tolist(), count)
        outs.append((count, sizes))
    ctx.submit()
    count, sizes = outs[-1]
    expected = x.copy()
    for c, s in outs:   # the last dispatch overwrites the first `count` elements
        expected[:c] = x[:c] + s[np.arange(c) % 40].astype(np.float32)
    np.testing.assert_array_equal(ctx.read(bo, n), expected)


@pytest.mark.parametrize("n", [64, 1000, 5000])
def test_shared_memory_reduction_with_barriers(open_vk, spirv, n):
    ctx = open_vk()
    ctx.load([vkrt.kernel("block_sum", spirv["block_sum"], num_buffers=2, num_sizes=0, shared_bytes=64 * F32)])
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    groups = -(-n // 64)
    bx, bo = ctx.buffer(n * F32), ctx.buffer(groups * F32)
    ctx.write(bx, x)
    ctx.begin()
    ctx.dispatch(0, [(bx, 0, n * F32), (bo, 0, groups * F32)], [], n)
    ctx.submit()
    padded = np.zeros(groups * 64, np.float64)
    padded[:n] = x
    np.testing.assert_allclose(ctx.read(bo, groups), padded.reshape(groups, 64).sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lowered, fragment", [
    (vkrt.Limits(push_constant_bytes=16), "kernel saxpy needs push-constant bytes 24, the device's limit is 16"),
    (vkrt.Limits(storage_buffers=2), "kernel saxpy needs storage buffers per stage 3, the device's limit is 2"),
    (vkrt.Limits(workgroup_size_x=32), "kernel saxpy needs workgroup size x 64, the device's limit is 32"),
    (vkrt.Limits(workgroup_invocations=16), "kernel saxpy needs workgroup invocations 64, the device's limit is 16"),
])
def test_lowered_limits_fail_load_with_the_named_status_and_create_nothing(open_vk, spirv, lowered, fragment):
    ctx = open_vk(limits=lowered)
    with pytest.raises(vkrt.VulkanError) as failure:
        ctx.load([saxpy_kernel(spirv)])
    assert failure.value.status == "RXE_ERR_DEVICE"
    assert fragment in failure.value.message
    assert ctx.pipelines_created == 0


def test_the_check_names_shared_memory_fp16_fp64_and_subgroup_size(open_vk, spirv):
    ctx = open_vk(limits=vkrt.Limits(shared_bytes=128, flags=vkrt.FP16 | vkrt.FP64))
    limits = ctx.limits()
    cases = [
        (dict(shared_bytes=256), "the module needs shared memory bytes 256, the device's limit is 128"),
        (dict(flags=vkrt.FP16), "the module needs fp16 (shaderFloat16 and storageBuffer16BitAccess)"),
        (dict(flags=vkrt.FP64), "the module needs fp64 (shaderFloat64), the device lacks it"),
        (dict(subgroup_size=limits.subgroup_size + 1),
         f"needs subgroup size {limits.subgroup_size + 1}, the device's subgroup size is {limits.subgroup_size}"),
    ]
    for fields, fragment in cases:
        with pytest.raises(vkrt.VulkanError) as failure:
            ctx.check(**fields)
        assert failure.value.status == "RXE_ERR_DEVICE" and fragment in failure.value.message
    ctx.check(push_constant_bytes=24, storage_buffers=3, workgroup_size_x=64, shared_bytes=128,
              subgroup_size=limits.subgroup_size)
    with pytest.raises(vkrt.VulkanError, match="kernel block_sum needs shared memory bytes 256"):
        ctx.load([vkrt.kernel("block_sum", spirv["block_sum"], num_buffers=2, num_sizes=0, shared_bytes=256)])
    assert ctx.pipelines_created == 0


def test_no_pipeline_is_created_after_load(open_vk, spirv):
    """20 dispatches of different sizes and two kernels, split into submits of
    4 dispatches: the pipeline count stays at the number loaded."""
    ctx = open_vk(per_submit=4)
    ctx.load([saxpy_kernel(spirv), vkrt.kernel("many_sizes", spirv["many_sizes"], num_buffers=2, num_sizes=40)])
    assert ctx.pipelines_created == 2
    rng = np.random.default_rng(6)
    size = 20_000
    x = rng.standard_normal(size).astype(np.float32)
    bx, by, bo = ctx.buffer(size * F32), ctx.buffer(size * F32), ctx.buffer(size * F32)
    ctx.write(bx, x)
    ctx.write(by, np.zeros(size, np.float32))
    ctx.begin()
    counts = [int(c) for c in rng.integers(1, size, 20)]
    for i, n in enumerate(counts):   # y = 2 x + y, accumulating over the saxpy dispatches
        if i % 5 == 4:
            ctx.dispatch(1, [(bx, 0, size * F32), (bo, 0, size * F32)], list(range(40)), n)
        else:
            ctx.dispatch(0, [(bx, 0, size * F32), (by, 0, size * F32), (by, 0, size * F32)], [n], n)
    ctx.submit()
    expected_y = np.zeros(size, np.float32)
    expected_o = np.zeros(size, np.float32)
    for i, n in enumerate(counts):
        if i % 5 == 4:
            expected_o[:n] = x[:n] + (np.arange(n) % 40).astype(np.float32)
        else:
            expected_y[:n] = np.float32(2) * x[:n] + expected_y[:n]
    np.testing.assert_array_equal(ctx.read(by, size), expected_y)
    np.testing.assert_array_equal(ctx.read(bo, size)[:max(counts[4::5])], expected_o[:max(counts[4::5])])
    times = ctx.times()
    assert len(times) == 20 and all(t > 0 for t in times)
    assert ctx.pipelines_created == 2


def test_timestamps_give_one_nonzero_time_per_dispatch(open_vk, spirv):
    ctx = open_vk()
    ctx.load([saxpy_kernel(spirv)])
    run_saxpy(ctx, 4096, np.random.default_rng(7))
    times = ctx.times()
    assert len(times) == 1 and times[0] > 0


SPIN_STEPS, SPIN_ITEMS = 60_000, 4096   # each invocation below lavapipe's 65535 iterations per loop


def spin_reference(count: int) -> np.ndarray:
    """The spin shader's hash for invocations 0..count-1, in numpy uint32 (wrapping) arithmetic."""
    h = np.arange(1, count + 1, dtype=np.uint32)
    for _ in range(SPIN_STEPS):
        h = h * np.uint32(1664525) + np.uint32(1013904223)
        h ^= h >> np.uint32(15)
    return h


def test_a_fence_timeout_is_a_named_status_and_the_context_recovers(open_vk, spirv):
    ctx = open_vk()
    ctx.load([vkrt.kernel("spin", spirv["spin"], num_buffers=1, num_sizes=1), saxpy_kernel(spirv)])
    out = ctx.buffer(SPIN_ITEMS * F32)
    ctx.begin()
    ctx.dispatch(0, [(out, 0, SPIN_ITEMS * F32)], [SPIN_STEPS], SPIN_ITEMS)
    with pytest.raises(vkrt.VulkanError) as failure:
        ctx.submit(timeout_ns=1000)
    assert failure.value.status == "RXE_ERR_TIMEOUT"
    assert "the fence was not signalled within 1000 ns (submit 1 of 1)" in failure.value.message
    ctx.wait()
    np.testing.assert_array_equal(ctx.read(out, 64, np.uint32), spin_reference(64))   # the loop ran to its end
    run_saxpy(ctx, 100, np.random.default_rng(8), kernel_index=1)
    ctx.begin()   # time out again and close without waiting: rxe_vk_close waits for the device
    ctx.dispatch(0, [(out, 0, SPIN_ITEMS * F32)], [SPIN_STEPS], SPIN_ITEMS)
    with pytest.raises(vkrt.VulkanError, match="RXE_ERR_TIMEOUT"):
        ctx.submit(timeout_ns=1000)


def test_views_past_max_storage_buffer_range_are_named(open_vk, spirv):
    ctx = open_vk(limits=vkrt.Limits(storage_buffer_range=1024))
    ctx.load([saxpy_kernel(spirv)])
    big, small = ctx.buffer(2048 * F32), ctx.buffer(64 * F32)
    ctx.begin()
    with pytest.raises(vkrt.VulkanError) as failure:
        ctx.dispatch(0, [(small, 0, 64 * F32), (big, 0, 2048 * F32), (small, 0, 64 * F32)], [64], 64)
    assert failure.value.status == "RXE_ERR_BOUND"
    assert "kernel saxpy: view 1 spans 8192 bytes from its aligned offset, past maxStorageBufferRange 1024" \
        in failure.value.message
    with pytest.raises(vkrt.VulkanError, match="view 2 .* is outside its buffer of 256 bytes"):
        ctx.dispatch(0, [(small, 0, 0), (small, 0, 0), (small, 128, 256)], [64], 64)
    # bytes 0: the rest of the buffer, clamped to the range
    x = np.arange(64, dtype=np.float32)
    ctx.write(big, x)
    ctx.write(small, np.ones(64, np.float32))
    ctx.dispatch(0, [(big, 0, 0), (small, 0, 0), (big, 4096, 0)], [64], 64)
    ctx.submit()
    np.testing.assert_array_equal(ctx.read(big, 64, offset=4096), np.float32(2) * x + 1)


def test_without_libvulkan_open_returns_the_named_status(vk_lib):
    with pytest.raises(vkrt.VulkanError) as failure:
        vkrt.Context(vk_lib, library="libvulkan-not-installed.so.1")
    assert failure.value.status == "RXE_ERR_NO_VULKAN"
    assert "cannot load the Vulkan loader libvulkan-not-installed.so.1" in failure.value.message


def test_bad_records_and_calls_out_of_order_are_named(open_vk, spirv):
    ctx = open_vk()
    bad = np.array([1, 2, 3, 4, 5, 6], np.uint32)
    with pytest.raises(vkrt.VulkanError, match="kernel 0 \\(junk\\): not SPIR-V"):
        ctx.load([vkrt.kernel("junk", bad, num_buffers=1, num_sizes=0)])
    ctx.load([saxpy_kernel(spirv)])
    with pytest.raises(vkrt.VulkanError, match="already loaded"):
        ctx.load([saxpy_kernel(spirv)])
    b = ctx.buffer(64)
    with pytest.raises(vkrt.VulkanError, match="outside rxe_vk_begin"):
        ctx.dispatch(0, [(b, 0, 64)] * 3, [16], 16)
    ctx.begin()
    with pytest.raises(vkrt.VulkanError, match="kernel 3, 1 are loaded"):
        ctx.dispatch(3, [(b, 0, 64)] * 3, [16], 16)
    with pytest.raises(vkrt.VulkanError, match="view 0 starts at byte 2, not a multiple of 4"):
        ctx.dispatch(0, [(b, 2, 8)] * 3, [2], 2)
    with pytest.raises(vkrt.VulkanError, match="bytes 60..68 are outside the buffer of 64 bytes"):
        ctx.write(b, np.zeros(2, np.float32), 60)
    ctx.submit()
    assert ctx.times() == []


@pytest.mark.skipif(not vkrt.validation_installed(), reason="VK_LAYER_KHRONOS_validation is not installed "
                    "(apt-get install vulkan-validationlayers; scripts/setup.sh installs it)")
def test_the_validation_layer_counts_what_it_reports(vk_lib, spirv):
    """A record whose push block is shorter than the shader's (2 buffers declared,
    the shader reads off[2]): the layer reports the pipeline, the context counts it.
    The zero counts the other tests assert are therefore real."""
    ctx = vkrt.Context(vk_lib, validation=True)
    try:
        ctx.load([vkrt.kernel("saxpy", spirv["saxpy"], num_buffers=2, num_sizes=0)])
        count, first = ctx.validation_messages()
    finally:
        ctx.close()
    assert count > 0 and "Push constant" in first


def test_runs_of_growing_length_and_an_empty_dispatch(open_vk, spirv):
    """Three runs on one context (1, 40 and 3 dispatches, one of them over 0
    items): the pools grow and are reused, each run matches numpy."""
    ctx = open_vk(per_submit=16)
    ctx.load([saxpy_kernel(spirv)])
    n = 500
    rng = np.random.default_rng(9)
    x = rng.standard_normal(n).astype(np.float32)
    bx, by = ctx.buffer(n * F32), ctx.buffer(n * F32)
    ctx.write(bx, x)
    for dispatches in (1, 40, 3):
        ctx.write(by, np.zeros(n, np.float32))
        expected = np.zeros(n, np.float32)
        ctx.begin()
        for i in range(dispatches):
            count = 0 if i == 1 else n - i
            ctx.dispatch(0, [(bx, 0, n * F32), (by, 0, n * F32), (by, 0, n * F32)], [count], count)
            expected[:count] = np.float32(2) * x[:count] + expected[:count]
        ctx.submit()
        np.testing.assert_array_equal(ctx.read(by, n), expected)
        assert len(ctx.times()) == dispatches
    assert ctx.pipelines_created == 1


def test_device_choice_is_named_when_nothing_fits(vk_lib):
    """On lavapipe alone: without allow_cpu no device is usable; an index past
    the devices is named with their count."""
    probe = vkrt.Context(vk_lib, validation=False)
    cpu_only = "llvmpipe" in probe.device_name   # the preferred device is the CPU one: no GPU here
    probe.close()
    if cpu_only:
        with pytest.raises(vkrt.VulkanError) as failure:
            vkrt.Context(vk_lib, validation=False, allow_cpu=False)
        assert failure.value.status == "RXE_ERR_DEVICE"
        assert "(a CPU device needs allow_cpu)" in failure.value.message
    with pytest.raises(vkrt.VulkanError) as failure:
        vkrt.Context(vk_lib, validation=False, device_index=99)
    assert failure.value.status == "RXE_ERR_DEVICE" and "device_index 99: there are" in failure.value.message
