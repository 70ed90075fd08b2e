"""Fixtures for the Vulkan runtime tests: the library built once per session,
the shaders compiled and validated, and contexts opened with the validation
layer (when installed) that must end with zero validation messages."""

from __future__ import annotations

import pytest

from tests.vulkan import vkrt

SHADERS = ("saxpy", "many_sizes", "block_sum", "spin")


@pytest.fixture(scope="session")
def vk_lib(tmp_path_factory):
    reason = vkrt.unavailable()
    if reason is not None:
        pytest.skip(reason)
    vkrt.pin_driver()
    return vkrt.build_library(tmp_path_factory.mktemp("vulkan_runtime"))


@pytest.fixture(scope="module")
def vulkan_env():
    """For tests that load artifacts through rxe.connect("host-vulkan"): the validation layer on when installed;
    the value says whether it is."""
    reason = vkrt.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as mp:
        if vkrt.validation_installed():
            mp.setenv("RXE_VK_VALIDATION", "1")
        yield vkrt.validation_installed()


@pytest.fixture(scope="session")
def spirv(vk_lib, tmp_path_factory):
    out = tmp_path_factory.mktemp("vulkan_shaders")
    return {name: vkrt.compile_shader(name, out) for name in SHADERS}


@pytest.fixture
def open_vk(vk_lib):
    """open_vk(**options) -> a Context; each is closed after the test, and its
    validation messages must be zero when the layer is installed."""
    opened = []

    def open_context(**options):
        ctx = vkrt.Context(vk_lib, validation=vkrt.validation_installed(), **options)
        opened.append(ctx)
        return ctx

    yield open_context
    messages = []
    for ctx in opened:
        count, first = ctx.validation_messages()
        ctx.close()
        if count:
            messages.append(f"{count} validation messages, the first: {first}")
    assert messages == []
