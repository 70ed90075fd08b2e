"""The `emu` marker (pyproject.toml [tool.pytest.ini_options] markers).

A test is `emu` when it needs QEMU (qemu-user, qemu-system-arm) or a cross
toolchain (aarch64/armv7/riscv64 gcc, arm-none-eabi, clang --target=...).
It is assigned here, in one place, by two rules:

1. every test under tests/emu/;
2. every test parametrized with `board`, `board_name`, `arch` or `target`
   set to a shipped board other than host (boards/*.yaml: the qemu-* boards
   and the cross-compiled android/ssh boards) or to a cross architecture
   (aarch64, armv7, riscv64, cortex_m4..., android_...).

Tests that need an emulator or a cross toolchain without such a parameter
carry `@pytest.mark.emu` themselves. Rule 2 errs towards `emu`: a test that
only optimizes for a QEMU board (tests/transform/test_pipeline.py) lands there
too, and still runs in the full suite.

`-m "not emu and not slow"` is the host-only loop; `scripts/test.sh` with no
`-m` still runs everything.

Scheduling (scripts/test.sh runs `pytest -n N --dist loadgroup`): the tests of
a module that share a module-scoped fixture form one xdist group, so the
fixture is set up on one worker only, and slow tests are collected first.
"""

import warnings
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
EMU_DIR = TESTS / "emu"
BOARD_ARGS = ("board", "board_name", "arch", "target")
CROSS_BOARDS = frozenset(p.stem for p in (TESTS.parent / "boards").glob("*.yaml")) - {"host"}
CROSS_ARCHS = ("aarch64", "armv7", "riscv64", "cortex_m4", "android_")


def _names_a_cross_target(value) -> bool:
    return isinstance(value, str) and (value in CROSS_BOARDS or value.startswith(CROSS_ARCHS))


def _needs_emulation(item) -> bool:
    if EMU_DIR in Path(str(item.path)).resolve().parents:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(_names_a_cross_target(params.get(arg)) for arg in BOARD_ARGS)


def _shares_a_module_fixture(item) -> bool:
    """The test uses a fixture set up once per module (or class, or package): an export, a build, a device."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(d.scope in ("module", "class", "package")
                                    for defs in info.name2fixturedefs.values() for d in defs)


@pytest.hookimpl(tryfirst=True)   # before xdist reads the xdist_group markers (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _needs_emulation(item) and item.get_closest_marker("emu") is None:
            item.add_marker(pytest.mark.emu)
        # a module's tests that share a module fixture run on one worker, which sets it up once (a test module
        # spread over two workers built its model, or exported SmolLM2, on each)
        if item.get_closest_marker("xdist_group") is None and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))
    # the slow ones first, so that the workers end together (xdist then orders groups by size)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_collection_finish(session):
    """Under `--dist loadgroup`, pytest-xdist has suffixed each grouped test's id with its group by now; a
    pytest it does not support leaves the ids as they were and the groups are silently ignored."""
    config = session.config
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid]
    if lost:
        warnings.warn(pytest.PytestConfigWarning(
            f"--dist loadgroup: {len(lost)} tests marked xdist_group kept their ids ({lost[0]}, ...): this "
            f"pytest {pytest.__version__} / pytest-xdist pair ignores the groups, and module fixtures are set "
            "up on every worker (pyproject.toml pins the pytest that works)"), stacklevel=1)
