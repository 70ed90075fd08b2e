"""The host-vulkan board: its `vulkan:` section loads, and a bad one is named
with the file and the field."""

from __future__ import annotations

import pytest
import yaml

from relax_edge.target import BOARDS_DIR, BoardError, load_board


def test_host_vulkan_names_lavapipe_and_the_workgroup_size():
    board = load_board("host-vulkan")
    assert board.transport == "local" and board.target.llvm_triple == "native"
    assert board.vulkan == {"icd": "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json", "allow_cpu": True,
                            "workgroup_size": 64, "lp_num_threads": 0}
    assert load_board("host").vulkan == {}


@pytest.mark.parametrize("section, fragment", [
    ({"icd": "x.json", "driver": "lvp"}, "vulkan: unknown field 'driver'"),
    ({"allow_cpu": "yes"}, "field 'allow_cpu' must be true or false"),
    ({"workgroup_size": 48}, "field 'vulkan.workgroup_size' must be a power of two from 1 to 1024, got 48"),
    ({"lp_num_threads": -1}, "field 'vulkan.lp_num_threads' must be 0 (the cores) or more"),
    ("lavapipe", "field 'vulkan' must be a mapping"),
])
def test_a_bad_vulkan_section_is_named(tmp_path, section, fragment):
    data = yaml.safe_load((BOARDS_DIR / "host-vulkan.yaml").read_text())
    data["vulkan"] = section
    path = tmp_path / "bad-vulkan.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(BoardError) as info:
        load_board(str(path))
    assert str(path) in str(info.value) and fragment in str(info.value)
