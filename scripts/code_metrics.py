"""Code metrics of the relax_edge tree, for before/after comparisons of a refactor.

    python scripts/code_metrics.py                      # Markdown table and lists on stdout
    python scripts/code_metrics.py --json before.json   # the same numbers as JSON too
    python scripts/code_metrics.py --baseline before.json --no-duplicates

What it measures (all from the source text, nothing is imported or run):

- lines: non-blank lines that are not comment-only, of the .py files per
  subpackage of relax_edge/ (docstrings count as code) and of the .c/.h files
  per folder of runtime_c/;
- dispatch sites: functions (or module/class bodies) that branch on the class of
  a tensor-program statement (the subclasses of Stmt in relax_edge/tir/stmt.py)
  or of a graph-IR expression (the subclasses of Expr in relax_edge/ir/expr.py)
  naming two or more of those classes in isinstance(), type(x) is/==/in,
  x.__class__ is, a dict keyed by the classes, or match-case class patterns
  (a module-level tuple of the classes, _LEAVES = (Var, Constant), counts as
  naming them).
  A name counts only where it refers to the relax_edge class (imported from the
  package, or defined in the file), so ast.If or typing.Tuple do not;
- duplicates: the pairs the `duplicates` command reports over relax_edge/ and
  runtime_c/ (n/a where the command is missing);
- import cycles: strongly connected components of more than one module in the
  graph of relax_edge's imports of itself, with module-level imports only and
  with the imports inside functions too (imports under `if TYPE_CHECKING:`
  count as deferred; importlib.import_module calls are listed, not followed).
  An edge goes to the module named (`from .x import y`: to .x.y where that is
  a module, else to .x), not to the packages above it that Python also runs;
- function lengths: build() in relax_edge/build.py and the longest functions,
  as end_lineno - lineno + 1 of the def.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "relax_edge"
TOP_LEVEL = "(top-level)"
TIR_STMT_FILE = "tir/stmt.py"
TIR_STMT_BASE = "Stmt"
IR_EXPR_FILE = "ir/expr.py"
IR_EXPR_BASE = "Expr"


# ---------------------------------------------------------------- files

def python_files(pkg_dir: Path) -> list:
    """The .py files below pkg_dir, sorted, without __pycache__ or hidden folders."""
    out = []
    for p in sorted(pkg_dir.rglob("*.py")):
        rel = p.relative_to(pkg_dir).parts
        if any(part == "__pycache__" or part.startswith(".") for part in rel):
            continue
        out.append(p)
    return out


def c_files(c_dir: Path) -> list:
    out = []
    for p in sorted(c_dir.rglob("*")):
        rel = p.relative_to(c_dir).parts
        if p.suffix in (".c", ".h") and p.is_file() and not any(part.startswith(".") for part in rel):
            out.append(p)
    return out


def module_name(pkg_dir: Path, path: Path, package: str = PACKAGE) -> str:
    parts = list(path.relative_to(pkg_dir).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


# ---------------------------------------------------------------- 1. lines

def python_code_lines(text: str) -> int:
    """Non-blank lines that are not comment-only."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def c_code_lines(text: str) -> int:
    """Non-blank lines with something besides // and /* */ comments (string literals are skipped over)."""
    count = 0
    in_block = False
    for line in text.splitlines():
        has_code = False
        i, n = 0, len(line)
        while i < n:
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    i = n
                else:
                    in_block = False
                    i = end + 2
                continue
            ch = line[i]
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block = True
                i += 2
                continue
            if ch in "\"'":
                has_code = True
                j = i + 1
                while j < n and line[j] != ch:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if not ch.isspace():
                has_code = True
            i += 1
        count += has_code
    return count


def package_lines(pkg_dir: Path) -> dict:
    """{subpackage or TOP_LEVEL: lines}, sorted by name with TOP_LEVEL last."""
    lines = {}
    for p in python_files(pkg_dir):
        rel = p.relative_to(pkg_dir).parts
        key = rel[0] if len(rel) > 1 else TOP_LEVEL
        lines[key] = lines.get(key, 0) + python_code_lines(p.read_text(encoding="utf-8"))
    return dict(sorted(lines.items(), key=lambda kv: (kv[0] == TOP_LEVEL, kv[0])))


def runtime_lines(c_dir: Path) -> dict:
    lines = {}
    for p in c_files(c_dir):
        rel = p.relative_to(c_dir).parts
        key = rel[0] if len(rel) > 1 else TOP_LEVEL
        lines[key] = lines.get(key, 0) + c_code_lines(p.read_text(encoding="utf-8", errors="replace"))
    return dict(sorted(lines.items(), key=lambda kv: (kv[0] == TOP_LEVEL, kv[0])))


# ---------------------------------------------------------------- 2. dispatch sites

def subclasses_in(path: Path, base: str) -> list:
    """Names of the classes in path that derive (transitively, within the file) from base; base itself excluded."""
    tree = parse(path)
    bases = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases[node.name] = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
                                for b in node.bases]
    found = {base}
    changed = True
    while changed:
        changed = False
        for name, bs in bases.items():
            if name not in found and any(b in found for b in bs):
                found.add(name)
                changed = True
    found.discard(base)
    return sorted(found)


def resolve_relative(current: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute module `from <level dots><module> import ...` names inside module `current`."""
    if level == 0:
        return module or ""
    parts = current.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    if module:
        parts.append(module)
    return ".".join(parts)


class ClassFamily:
    """One family of IR classes: their names and the modules a reference to them may come from."""

    def __init__(self, label: str, defining_module: str, names):
        self.label = label
        self.defining_module = defining_module
        self.names = frozenset(names)
        pkg = defining_module.rsplit(".", 1)[0]      # relax_edge.tir
        root = pkg.split(".")[0]                     # relax_edge
        self.origins = (pkg, root)

    def from_here(self, module: str) -> bool:
        pkg, root = self.origins
        return module == root or module == pkg or module.startswith(pkg + ".")


class _Names:
    """What the names of one file refer to: {local: ('class', family-label, class)} or {local: ('module', name)}."""

    def __init__(self, tree: ast.Module, current: str, is_package: bool, families, known_modules):
        self.classes = {}     # local name -> (family label, class name)
        self.modules = {}     # local name -> absolute module
        for fam in families:
            if current == fam.defining_module:
                for n in fam.names:
                    self.classes[n] = (fam.label, n)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.modules[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.modules[top] = top
            elif isinstance(node, ast.ImportFrom):
                src = resolve_relative(current, is_package, node.level, node.module)
                for a in node.names:
                    local = a.asname or a.name
                    if a.name == "*":
                        for fam in families:
                            if fam.from_here(src):
                                for n in fam.names:
                                    self.classes.setdefault(n, (fam.label, n))
                        continue
                    if f"{src}.{a.name}" in known_modules:
                        self.modules[local] = f"{src}.{a.name}"
                        continue
                    for fam in families:
                        if a.name in fam.names and fam.from_here(src):
                            self.classes[local] = (fam.label, a.name)
        # module-level tuples of classes: _LEAVES = (Var, Constant)
        self.tuples = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Tuple):
                found = self.classes_in(node.value, families)
                if found and len(found) == len(node.value.elts):
                    self.tuples[node.targets[0].id] = found

    def _dotted(self, node) -> str | None:
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def classes_in(self, node, families) -> list:
        """The (family, class) pairs a class reference (or a tuple of them) names."""
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [c for elt in node.elts for c in self.classes_in(elt, families)]
        if isinstance(node, ast.Name):
            c = self.classes.get(node.id)
            return [c] if c else list(self.tuples.get(node.id, []))
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            if base:
                for fam in families:
                    if node.attr in fam.names and fam.from_here(base):
                        return [(fam.label, node.attr)]
        return []


def _is_type_of(node) -> bool:
    """type(x) or x.__class__."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
        return len(node.args) == 1
    return isinstance(node, ast.Attribute) and node.attr == "__class__"


def _checks_in(node, names: _Names, families) -> list:
    """The (family, class) pairs one node checks the class against (not descending)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") \
            and len(node.args) == 2:
        return names.classes_in(node.args[1], families)
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(_is_type_of(s) for s in sides) and all(isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In,
                                                                        ast.NotIn)) for op in node.ops):
            return [c for s in sides if not _is_type_of(s) for c in names.classes_in(s, families)]
    if isinstance(node, ast.Dict):
        return [c for k in node.keys if k is not None for c in names.classes_in(k, families)]
    if isinstance(node, ast.MatchClass):
        return names.classes_in(node.cls, families)
    return []


def _scopes(tree: ast.Module):
    """(qualified scope name, node, own body nodes) for the module, each class and each function; a scope's nodes
    do not include those of the functions and classes nested in it."""
    out = []

    def walk(scope_name, scope_node, children):
        own = []
        stack = list(children)
        while stack:
            n = stack.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = n.name if scope_name == "<module>" else f"{scope_name}.{n.name}"
                inner = list(n.body)
                if not isinstance(n, ast.ClassDef):
                    inner += n.decorator_list + list(ast.iter_child_nodes(n.args))
                    own_defaults = []
                else:
                    own_defaults = n.decorator_list + n.bases
                own.extend(own_defaults)
                walk(qual, n, inner)
                continue
            own.append(n)
            stack.extend(ast.iter_child_nodes(n))
        out.append((scope_name, scope_node, own))

    walk("<module>", tree, list(tree.body))
    return out


def dispatch_sites(pkg_dir: Path, package: str = PACKAGE) -> dict:
    """{family label: {"classes": [...], "sites": [{"file", "function", "line", "classes"}]}}."""
    known = {module_name(pkg_dir, p, package): p for p in python_files(pkg_dir)}
    families = []
    for label, rel, base in (("tir_stmt", TIR_STMT_FILE, TIR_STMT_BASE), ("ir_expr", IR_EXPR_FILE, IR_EXPR_BASE)):
        path = pkg_dir / rel
        classes = subclasses_in(path, base) if path.exists() else []
        families.append(ClassFamily(label, module_name(pkg_dir, path, package), classes))
    result = {f.label: {"classes": sorted(f.names), "sites": []} for f in families}
    for mod, path in sorted(known.items(), key=lambda kv: str(kv[1])):
        tree = parse(path)
        names = _Names(tree, mod, path.name == "__init__.py", families, known)
        if not names.classes and not names.modules:
            continue
        for scope, node, own in _scopes(tree):
            found = {}
            for n in own:
                for label, cls in _checks_in(n, names, families):
                    found.setdefault(label, set()).add(cls)
            for label, classes in found.items():
                if len(classes) >= 2:
                    result[label]["sites"].append({
                        "file": path.relative_to(pkg_dir.parent).as_posix(), "function": scope,
                        "line": getattr(node, "lineno", 1), "classes": sorted(classes)})
    for r in result.values():
        r["sites"].sort(key=lambda s: (s["file"], s["line"], s["function"]))
    return result


# ---------------------------------------------------------------- 3. duplicates

_PAIRS = re.compile(r"^(\d+) pairs? of places")


def run_duplicates(root: Path, folders=(PACKAGE, "runtime_c"), seconds: int = 120) -> dict | None:
    """{folder: {"pairs": N, "header": first line, "incomplete": [...]}} or None without the command."""
    exe = shutil.which("duplicates")
    if exe is None:
        return None
    out = {}
    for folder in folders:
        if not (root / folder).is_dir():
            continue
        proc = subprocess.run([exe, "--repo", str(root / folder), "--seconds", str(seconds)], capture_output=True,
                              text=True, cwd=root)
        text = proc.stdout
        lines = text.splitlines()
        header = lines[0] if lines else ""
        m = _PAIRS.match(header)
        pairs = int(m.group(1)) if m else (0 if header.startswith("no duplicates") else None)
        out[folder] = {"pairs": pairs, "header": header,
                       "incomplete": [ln for ln in lines if ln.startswith("incomplete:")]}
    return out


# ---------------------------------------------------------------- 4. import cycles

def _in_type_checking(node, parents) -> bool:
    p = parents.get(node)
    while p is not None:
        if isinstance(p, ast.If) and (
                (isinstance(p.test, ast.Name) and p.test.id == "TYPE_CHECKING")
                or (isinstance(p.test, ast.Attribute) and p.test.attr == "TYPE_CHECKING")):
            return True
        p = parents.get(p)
    return False


def _in_function(node, parents) -> bool:
    p = parents.get(node)
    while p is not None:
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
        p = parents.get(p)
    return False


def import_graph(pkg_dir: Path, package: str = PACKAGE) -> dict:
    """{"module": {mod: sorted targets}, "all": {mod: sorted targets}, "dynamic": [(file, line)]}: the imports
    of the package's own modules; "module" has those that run at import time, "all" those inside functions too."""
    known = {module_name(pkg_dir, p, package): p for p in python_files(pkg_dir)}
    top = {m: set() for m in known}
    every = {m: set() for m in known}
    dynamic = []

    def target(name: str) -> str | None:
        while name:
            if name in known:
                return name
            name = name.rpartition(".")[0]
        return None

    for mod, path in sorted(known.items()):
        tree = parse(path)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [target(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = resolve_relative(mod, is_pkg, node.level, node.module)
                for a in node.names:
                    full = f"{src}.{a.name}"
                    targets.append(full if full in known else target(src))
            elif isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                    or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))):
                dynamic.append((path.relative_to(pkg_dir.parent).as_posix(), node.lineno))
                continue
            else:
                continue
            deferred = _in_function(node, parents) or _in_type_checking(node, parents)
            for t in targets:
                if t and t != mod:
                    every[mod].add(t)
                    if not deferred:
                        top[mod].add(t)
    return {"module": {m: sorted(v) for m, v in top.items()}, "all": {m: sorted(v) for m, v in every.items()},
            "dynamic": sorted(dynamic)}


def strongly_connected(graph: dict) -> list:
    """Tarjan's algorithm, iterative; the components of more than one node, each sorted, the list sorted."""
    index = {}
    low = {}
    on_stack = set()
    stack = []
    comps = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(comps, key=lambda c: (-len(c), c))


# ---------------------------------------------------------------- 5. function lengths

def function_lengths(pkg_dir: Path) -> list:
    """[{"file", "function", "line", "length"}] for every def below pkg_dir (methods and nested ones too)."""
    out = []
    for path in python_files(pkg_dir):
        rel = path.relative_to(pkg_dir.parent).as_posix()

        def visit(node, prefix, rel=rel):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    qual = prefix + child.name
                    out.append({"file": rel, "function": qual, "line": child.lineno,
                                "length": child.end_lineno - child.lineno + 1})
                    visit(child, qual + ".", rel)
                elif isinstance(child, ast.ClassDef):
                    visit(child, prefix + child.name + ".", rel)
                else:
                    visit(child, prefix, rel)

        visit(parse(path), "")
    return out


def longest_functions(lengths: list, n: int = 10) -> list:
    return sorted(lengths, key=lambda f: (-f["length"], f["file"], f["line"]))[:n]


def function_length(path: Path, name: str) -> int | None:
    """Length of the top-level def `name` in path."""
    if not path.exists():
        return None
    for node in parse(path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node.end_lineno - node.lineno + 1
    return None


# ---------------------------------------------------------------- report

def collect(root: Path, duplicates: bool = True, seconds: int = 120) -> dict:
    pkg_dir = root / PACKAGE
    lengths = function_lengths(pkg_dir)
    graph = import_graph(pkg_dir)
    return {
        "lines": {"relax_edge": package_lines(pkg_dir),
                  "runtime_c": runtime_lines(root / "runtime_c") if (root / "runtime_c").is_dir() else {}},
        "dispatch": dispatch_sites(pkg_dir),
        "duplicates": run_duplicates(root, seconds=seconds) if duplicates else None,
        "cycles": {"module_level": strongly_connected(graph["module"]),
                   "including_deferred": strongly_connected(graph["all"]),
                   "dynamic_imports": [list(d) for d in graph["dynamic"]]},
        "functions": {"build": function_length(pkg_dir / "build.py", "build"),
                      "count": len(lengths), "over_100": sum(1 for f in lengths if f["length"] > 100),
                      "longest": longest_functions(lengths)},
    }


def summary_rows(m: dict) -> list:
    """[(metric, value)] with values numbers (or "n/a")."""
    rows = []
    py = m["lines"]["relax_edge"]
    rows.append(("lines: relax_edge (total .py)", sum(py.values())))
    for k, v in py.items():
        rows.append((f"lines: relax_edge/{k}" if k != TOP_LEVEL else "lines: relax_edge top-level modules", v))
    c = m["lines"]["runtime_c"]
    rows.append(("lines: runtime_c (total .c/.h)", sum(c.values())))
    for k, v in c.items():
        rows.append((f"lines: runtime_c/{k}" if k != TOP_LEVEL else "lines: runtime_c top-level files", v))
    rows.append(("TIR statement dispatch sites", len(m["dispatch"]["tir_stmt"]["sites"])))
    rows.append(("graph-IR expression dispatch sites", len(m["dispatch"]["ir_expr"]["sites"])))
    dup = m["duplicates"]
    if dup is None:
        for k in ("relax_edge", "runtime_c", "total"):
            rows.append((f"duplicates: pairs ({k})", "n/a"))
    else:
        for k in ("relax_edge", "runtime_c"):
            v = dup.get(k, {}).get("pairs")
            rows.append((f"duplicates: pairs ({k})", "n/a" if v is None else v))
        vals = [d["pairs"] for d in dup.values()]
        rows.append(("duplicates: pairs (total)", "n/a" if None in vals or not vals else sum(vals)))
    cyc = m["cycles"]
    rows.append(("import cycles, module-level (SCCs > 1 module)", len(cyc["module_level"])))
    rows.append(("modules in module-level cycles", sum(len(c) for c in cyc["module_level"])))
    rows.append(("import cycles, including deferred imports", len(cyc["including_deferred"])))
    rows.append(("modules in cycles, including deferred imports", sum(len(c) for c in cyc["including_deferred"])))
    fn = m["functions"]
    rows.append(("build() length (lines)", "n/a" if fn["build"] is None else fn["build"]))
    if fn["longest"]:
        rows.append(("longest function length (lines)", fn["longest"][0]["length"]))
    rows.append(("functions over 100 lines", fn["over_100"]))
    return rows


def render(m: dict, baseline: dict | None = None) -> str:
    out = []
    rows = summary_rows(m)
    if baseline is not None:
        before = dict(summary_rows(baseline))
        out += ["| metric | before | after | change |", "| --- | ---: | ---: | ---: |"]
        for k, v in rows:
            b = before.get(k, "n/a")
            delta = f"{v - b:+d}" if isinstance(v, int) and isinstance(b, int) else ""
            out.append(f"| {k} | {b} | {v} | {delta} |")
        after = {k for k, _ in rows}
        out += [f"| {k} | {b} | n/a |  |" for k, b in before.items() if k not in after]
    else:
        out += ["| metric | value |", "| --- | ---: |"]
        out += [f"| {k} | {v} |" for k, v in rows]

    for label, title in (("tir_stmt", "TIR statement dispatch sites"),
                         ("ir_expr", "graph-IR expression dispatch sites")):
        d = m["dispatch"][label]
        out += ["", f"### {title} ({len(d['sites'])})", "", f"classes: {', '.join(d['classes'])}", ""]
        out += [f"- {s['file']}:{s['line']} `{s['function']}` ({len(s['classes'])}: {', '.join(s['classes'])})"
                for s in d["sites"]] or ["- none"]

    dup = m["duplicates"]
    out += ["", "### duplicates", ""]
    if dup is None:
        out.append("- n/a (`duplicates` not on PATH, or --no-duplicates)")
    else:
        for k, d in dup.items():
            out.append(f"- {k}/: {d['header']}")
            out += [f"  - {ln}" for ln in d["incomplete"]]

    cyc = m["cycles"]
    for key, title in (("module_level", "import cycles, module-level imports"),
                       ("including_deferred", "import cycles, including deferred imports")):
        out += ["", f"### {title} ({len(cyc[key])})", ""]
        out += [f"- ({len(c)}) " + ", ".join(c) for c in cyc[key]] or ["- none"]
    if cyc["dynamic_imports"]:
        out += ["", "dynamic imports (not followed): " + ", ".join(f"{f}:{ln}" for f, ln in cyc["dynamic_imports"])]

    fn = m["functions"]
    out += ["", f"### longest functions (of {fn['count']})", ""]
    out += [f"{i}. {f['file']}:{f['line']} `{f['function']}`: {f['length']} lines"
            for i, f in enumerate(fn["longest"], 1)]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the numbers and lists as JSON too")
    ap.add_argument("--baseline", type=Path, metavar="JSON", help="an earlier --json output: print before/after")
    ap.add_argument("--no-duplicates", action="store_true", help="skip the `duplicates` command")
    ap.add_argument("--duplicates-seconds", type=int, default=120, help="time limit per folder for `duplicates`")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    if not (root / PACKAGE).is_dir():
        print(f"{root}: no {PACKAGE}/ folder", file=sys.stderr)
        return 2
    m = collect(root, duplicates=not args.no_duplicates, seconds=args.duplicates_seconds)
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    sys.stdout.write(render(m, baseline))
    if args.json:
        args.json.write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
