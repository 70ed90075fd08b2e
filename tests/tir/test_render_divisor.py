"""Index text of a floor division or modulo by a product: the divisor is
grouped, so C's and Python's left-to-right `*` and `%` do not split it (an
(n*2, 4) -> (n, 1, 2, 4) reshape after a matmul indexed `x % 2 * n`)."""

import pytest

from relax_edge.codegen.c.kernel import CRenderer
from relax_edge.ir.shape import SizeVar, as_expr
from relax_edge.tir.interp import PythonRenderer


@pytest.mark.parametrize("renderer", [CRenderer, PythonRenderer])
def test_product_divisor_is_grouped(renderer):
    n = SizeVar("n")
    r = renderer()
    for expr, value in [((as_expr(3) * n + 1) % (2 * n), lambda k: (3 * k + 1) % (2 * k)),
                        ((as_expr(5) * n + 3) // (n * n), lambda k: (5 * k + 3) // (k * k)),
                        ((as_expr(3) * n + 1) % n, lambda k: (3 * k + 1) % k)]:
        text = r.int_expr(expr).replace(" / ", " // ")  # C's division of non-negatives is Python's //
        for k in (1, 2, 3, 5):
            assert eval(text, {r.size_value(n): k}) == value(k), text
