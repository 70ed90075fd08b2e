"""scripts/code_metrics.py on a small synthetic tree: a package with a known
import cycle (one module-level, one only through an import inside a function),
known dispatch on statement and expression classes, known function lengths and
known line counts."""

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("code_metrics", ROOT / "scripts" / "code_metrics.py")
code_metrics = sys.modules.setdefault("code_metrics", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(code_metrics)

FILES = {
    "relax_edge/__init__.py": "",
    "relax_edge/errors.py": "class RelaxEdgeError(Exception):\n    pass\n",
    "relax_edge/tir/__init__.py": "from .stmt import For, Seq, Store, Stmt\n",
    "relax_edge/tir/stmt.py": """
        class Stmt:
            pass


        class Store(Stmt):
            pass


        class For(Stmt):
            pass


        class Seq(Stmt):
            def __repr__(self):
                from .printer import show   # deferred: stmt -> printer -> stmt
                return show(self)


        class Helper:
            pass
        """,
    "relax_edge/tir/printer.py": """
        from .stmt import For, Seq, Store


        def show(s):
            if isinstance(s, Store):
                return "store"
            elif isinstance(s, (For, Seq)):
                return "nest"
            return "?"


        def only_one(s):
            return isinstance(s, For)
        """,
    "relax_edge/ir/__init__.py": "",
    "relax_edge/ir/expr.py": """
        class Expr:
            pass


        class Var(Expr):
            pass


        class Call(Expr):
            pass


        class Binding:
            pass
        """,
    # a module-level cycle a -> b -> a
    "relax_edge/transform/__init__.py": "",
    "relax_edge/transform/a.py": """
        from . import b
        from ..ir import expr as E
        from ..tir import For, Store
        import ast


        class Pass:
            def visit(self, s):
                if type(s) is For:
                    return 1
                return 2 if type(s) == Store else 0

            def table(self):
                return {E.Var: 1, E.Call: 2}


        def not_ours(node):
            # ast.If and ast.For are not the IR's classes
            return isinstance(node, (ast.If, ast.For))


        def matcher(s):
            match s:
                case For():
                    return 1
                case Store():
                    return 2
            return 0


        def outer(s):
            def inner(x):
                return isinstance(x, For) or isinstance(x, Store)
            return inner(s) if isinstance(s, For) else None
        """,
    "relax_edge/transform/b.py": """
        from .a import Pass

        # a comment


        def long_one():
            x = 1
            y = 2
            z = 3
            return x + y + z
        """,
    "runtime_c/src/x.c": """
        /* a block
           comment */
        int f(void) { // trailing
            return 1; /* inline */
        }

        // only a comment
        const char *s = "/* not a comment */";
        """,
}


@pytest.fixture
def tree(tmp_path):
    for rel, text in FILES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return tmp_path


def test_statement_and_expression_classes(tree):
    assert code_metrics.subclasses_in(tree / "relax_edge/tir/stmt.py", "Stmt") == ["For", "Seq", "Store"]
    assert code_metrics.subclasses_in(tree / "relax_edge/ir/expr.py", "Expr") == ["Call", "Var"]


def test_dispatch_sites(tree):
    d = code_metrics.dispatch_sites(tree / "relax_edge")
    stmt = [(s["file"], s["function"], s["classes"]) for s in d["tir_stmt"]["sites"]]
    assert stmt == [
        ("relax_edge/tir/printer.py", "show", ["For", "Seq", "Store"]),
        ("relax_edge/transform/a.py", "Pass.visit", ["For", "Store"]),
        ("relax_edge/transform/a.py", "matcher", ["For", "Store"]),
        ("relax_edge/transform/a.py", "outer.inner", ["For", "Store"]),
    ]
    expr = [(s["file"], s["function"], s["classes"]) for s in d["ir_expr"]["sites"]]
    assert expr == [("relax_edge/transform/a.py", "Pass.table", ["Call", "Var"])]


def test_import_cycles(tree):
    g = code_metrics.import_graph(tree / "relax_edge")
    assert g["module"]["relax_edge.transform.a"] == [
        "relax_edge.ir.expr", "relax_edge.tir", "relax_edge.transform.b"]
    assert code_metrics.strongly_connected(g["module"]) == [["relax_edge.transform.a", "relax_edge.transform.b"]]
    assert code_metrics.strongly_connected(g["all"]) == [
        ["relax_edge.tir.printer", "relax_edge.tir.stmt"], ["relax_edge.transform.a", "relax_edge.transform.b"]]


def test_strongly_connected_larger():
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": ["d"], "f": ["f"], "g": []}
    assert code_metrics.strongly_connected(graph) == [["a", "b", "c"], ["d", "e"]]


def test_function_lengths(tree):
    lengths = code_metrics.function_lengths(tree / "relax_edge")
    by_name = {(f["file"], f["function"]): f["length"] for f in lengths}
    assert by_name[("relax_edge/transform/b.py", "long_one")] == 5
    assert by_name[("relax_edge/transform/a.py", "outer.inner")] == 2
    assert by_name[("relax_edge/transform/a.py", "outer")] == 4
    assert code_metrics.longest_functions(lengths, 1)[0]["function"] == "matcher"
    assert code_metrics.function_length(tree / "relax_edge/transform/b.py", "long_one") == 5


def test_lines(tree):
    lines = code_metrics.package_lines(tree / "relax_edge")
    assert lines["transform"] == 24 + 6      # non-blank: a.py 25, b.py 7, one comment line in each
    assert list(lines)[-1] == code_metrics.TOP_LEVEL and lines[code_metrics.TOP_LEVEL] == 2
    assert code_metrics.runtime_lines(tree / "runtime_c") == {"src": 4}


def test_main_prints_a_table_and_json(tree, capsys, tmp_path):
    out_json = tmp_path / "m.json"
    assert code_metrics.main(["--root", str(tree), "--no-duplicates", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert "| TIR statement dispatch sites | 4 |" in text
    assert "| import cycles, module-level (SCCs > 1 module) | 1 |" in text
    assert "| duplicates: pairs (total) | n/a |" in text
    data = json.loads(out_json.read_text())
    assert data["functions"]["build"] is None
    assert code_metrics.main(["--root", str(tree), "--no-duplicates", "--baseline", str(out_json)]) == 0
    assert "| TIR statement dispatch sites | 4 | 4 | +0 |" in capsys.readouterr().out
