"""The android-arm64-vulkan board and the Vulkan loader's name: the board
loads with its android: and vulkan: sections (a phone GPU, no CPU device),
and the runtime's loader name comes from RXE_VULKAN_LIBRARY when the options
name none, so a missing loader is RXE_ERR_NO_VULKAN naming it, not a crash.
Neither a phone, Android's loader nor a phone GPU is exercised here."""

import pytest

from relax_edge.target import load_board
from tests.vulkan import vkrt


def test_android_vulkan_board_is_a_phone_gpu_over_adb():
    board = load_board("android-arm64-vulkan")
    assert board.transport == "adb" and board.target.os == "android"
    assert board.android["abi"] == "arm64-v8a" and board.android["api_level"] == 24
    assert board.vulkan["allow_cpu"] is False and board.vulkan["workgroup_size"] == 64
    assert "icd" not in board.vulkan          # the phone's own driver, nothing pinned


def test_loader_named_by_the_environment_is_missing(tmp_path, monkeypatch):
    reason = vkrt.unavailable()
    if reason is not None:
        pytest.skip(reason)
    lib = vkrt.build_library(tmp_path)
    monkeypatch.setenv("RXE_VULKAN_LIBRARY", "libvulkan-absent-on-this-phone.so")
    with pytest.raises(vkrt.VulkanError) as failure:
        vkrt.Context(lib, validation=False)
    assert failure.value.status == "RXE_ERR_NO_VULKAN"
    assert "cannot load the Vulkan loader libvulkan-absent-on-this-phone.so" in failure.value.message
