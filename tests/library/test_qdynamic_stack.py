"""The stack use stated in relax_edge/kernels_qdynamic.h against
-fstack-usage, measured by tests/library/test_qint8_stack.py's test on
qdynamic.c and qgemm.c (the 32-bit output mode, through the thread pool's
task), on the same compilers."""

import pytest

from tests.library import test_qint8_stack
from tests.library.test_qint8_stack import COMPILERS
from tests.library.test_stack_usage import ROOT

HEADER = ROOT / "runtime_c" / "include" / "relax_edge" / "kernels_qdynamic.h"
SOURCES = [ROOT / "runtime_c" / "kernels" / "qdynamic.c", ROOT / "runtime_c" / "kernels" / "qgemm.c"]


def test_header_states_every_entry_point(monkeypatch):
    monkeypatch.setattr(test_qint8_stack, "HEADER", HEADER)
    assert set(test_qint8_stack.stated()) == {"rxe_lib_matmul_integer_i32", "rxe_lib_dynamic_qdense_f32"}


@pytest.mark.parametrize("which", [pytest.param(k, marks=[pytest.mark.emu] if v[2] else [])
                                   for k, v in COMPILERS.items()])
def test_stack_usage_within_stated_bounds(which, tmp_path, monkeypatch):
    monkeypatch.setattr(test_qint8_stack, "HEADER", HEADER)
    monkeypatch.setattr(test_qint8_stack, "SOURCES", SOURCES)
    test_qint8_stack.test_stack_usage_within_stated_bounds(which, tmp_path, monkeypatch)
