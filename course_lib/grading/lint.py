"""The answer lint: early, friendly feedback on an answer before it runs (AST only).

It rejects an answer (0 points for its exercise, with the reason) that imports kernel or
process internals, reaches into the kernel (``get_ipython``, ``exec``, frames, ``sys.modules``),
monkeypatches a library (``torch.tanh = ...``), redefines a name the trusted cells define, uses
a name a check cell defines, or names the function the exercise asks you to write. The lint is
not the guard: a determined student can spell things so that it does not see them; the run-time
guard (``guard``, in the check helpers) and the OS sandbox (``sandbox``) are what hold then.

The rules are a table of per-node methods of ``_Lint`` (an ``ast.NodeVisitor``): one small
``visit_*`` per kind of node.
"""

from __future__ import annotations

import ast

from .spec import NotebookSpec, parse, role

__all__ = ["lint_answer", "trusted_bindings"]

_BANNED_MODULES = {
    "builtins",
    "ctypes",
    "gc",
    "inspect",
    "IPython",
    "ipykernel",
    "importlib",
    "atexit",
    "signal",
    "threading",
    "multiprocessing",
    "_thread",
    "faulthandler",
    "course_lib",
    "subprocess",
    "pty",
    "asyncio",
    "concurrent",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "glob",
    "fileinput",
    "mmap",
    "socket",
    "pickle",
    "marshal",
}
_BANNED_NAMES = {
    "get_ipython",
    "__builtins__",
    "__import__",
    "exec",
    "eval",
    "compile",
    "globals",
    "locals",
    "vars",
    "breakpoint",
    "setattr",
    "delattr",
    "open",
}
_BANNED_ATTRS = {
    "__globals__",
    "__code__",
    "__closure__",
    "__builtins__",
    "__subclasses__",
    "__dict__",
    "f_globals",
    "f_locals",
    "f_back",
    "f_builtins",
    "_getframe",
    "modules",
    "stdout",
    "stderr",
    "__stdout__",
    "__stderr__",
    "settrace",
    "setprofile",
    "displayhook",
    "excepthook",
    "system",
    "fork",
    "forkpty",
    "popen",
    "posix_spawn",
    "posix_spawnp",
    "execv",
    "execve",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execvp",
    "execvpe",
    "spawnl",
    "spawnle",
    "spawnv",
    "spawnve",
    "spawnlp",
    "spawnlpe",
    "spawnvp",
    "spawnvpe",
    # files: the grading folder holds the graded notebook and the cell records
    "open",
    "fdopen",
    "listdir",
    "scandir",
    "walk",
    "unlink",
    "rename",
    "renames",
    "makedirs",
    "mkdir",
    "rmdir",
    "chdir",
    "dup",
    "dup2",
    "symlink",
    "save",
    "load",
}


def trusted_bindings(sol, spec: NotebookSpec) -> tuple[dict[str, str], set[str]]:
    """(name -> what the trusted setup cells bind it to, names bound only by check cells)."""
    from . import checks

    names: dict[str, str] = {n: "check helper" for n in checks.__all__}
    in_checks: dict[str, str] = {}
    for cell in sol.cells:
        if cell.cell_type == "code" and role(cell) in ("setup", "check"):
            target = names if role(cell) == "setup" else in_checks
            for node in _toplevel(parse(cell.source).body):
                target.update(_bindings(node))
    names.pop("_", None)
    check_only = set(in_checks) - set(names) - {"_"}
    return {**{n: "a check cell" for n in check_only}, **names}, check_only


def _bindings(node) -> dict[str, str]:
    out = {}
    if isinstance(node, ast.Import):
        for a in node.names:
            out[a.asname or a.name.split(".")[0]] = f"import {a.name}" + (
                f" as {a.asname}" if a.asname else ""
            )
    elif isinstance(node, ast.ImportFrom):
        for a in node.names:
            out[a.asname or a.name] = f"from {node.module} import {a.name}" + (
                f" as {a.asname}" if a.asname else ""
            )
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out[node.name] = "def"
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            for n in _target_names(t):
                out[n] = "assignment"
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
        targets = (
            [node.target]
            if isinstance(node, (ast.For, ast.AsyncFor))
            else [i.optional_vars for i in node.items if i.optional_vars is not None]
        )
        for t in targets:
            for n in _target_names(t):
                out[n] = "assignment"
    return out


def _target_names(t) -> list[str]:
    """Names an assignment target binds (x, (a, b), *rest), not attributes or subscripts."""
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    return []


def _toplevel(stmts):
    """Statements at module level, looking inside if/for/while/with/try but not def/class."""
    for node in stmts:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _toplevel(getattr(node, name, []) or [])
        for h in getattr(node, "handlers", []) or []:
            yield from _toplevel(h.body)


def _root(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _assigned(targets):
    """The single targets of an assignment, with tuples, lists and starred targets unpacked."""
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            yield from _assigned(t.elts)
        elif isinstance(t, ast.Starred):
            yield from _assigned([t.value])
        else:
            yield t


class _Lint(ast.NodeVisitor):
    """One method per kind of node; each reports what is wrong with that node and visits on."""

    def __init__(
        self, trusted: dict[str, str], forbid: list[str], check_only: set[str], modules: set[str]
    ):
        self.trusted, self.forbid, self.check_only, self.modules = (
            trusted,
            set(forbid),
            check_only,
            modules,
        )
        self.problems: list[str] = []
        # (test on a name, message): the first that matches is reported
        self.name_rules = (
            (lambda n: n in _BANNED_NAMES, "{} is not allowed in an answer."),
            (
                lambda n: n in self.check_only,
                "{} belongs to a check cell; an answer may not use or change it.",
            ),
            (
                lambda n: n.startswith("_course"),
                "names starting with _course belong to the grader.",
            ),
        )

    def bad(self, node, msg: str) -> None:
        self.problems.append(f"line {getattr(node, 'lineno', '?')}: {msg}")

    def _modules(self, node, names: list[str]) -> None:
        for m in names:
            if m.split(".")[0] in _BANNED_MODULES:
                self.bad(node, f"importing {m} is not allowed in an answer.")

    def visit_Import(self, node):
        self._modules(node, [a.name for a in node.names])
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        self._modules(node, [node.module or ""])
        for a in node.names:
            if a.name in self.forbid:
                self.bad(
                    node, f"this exercise asks you to write {a.name} yourself; do not import it."
                )
        self.generic_visit(node)

    def visit_Name(self, node):
        rule = next((msg for test, msg in self.name_rules if test(node.id)), None)
        if rule:
            self.bad(node, rule.format(node.id))
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr in _BANNED_ATTRS:
            self.bad(node, f"accessing .{node.attr} is not allowed in an answer.")
        if node.attr in self.forbid:
            self.bad(
                node,
                f"this exercise asks you to implement {node.attr} yourself, so calling "
                f"{ast.unparse(node)} is not allowed (use more basic tensor operations).",
            )
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult) and "@" in self.forbid:
            self.bad(
                node,
                "this exercise asks you to multiply matrices yourself, so the @ operator is not "
                "allowed.",
            )
        self.generic_visit(node)

    def visit_Call(self, node):
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and any(
                isinstance(a, ast.Constant) and a.value in self.forbid | _BANNED_ATTRS
                for a in node.args[1:2]
            )
        ):
            self.bad(node, "getattr with that name is not allowed in an answer.")
        self.generic_visit(node)

    def visit_Global(self, node):
        for n in node.names:
            if n in self.trusted:
                self.bad(node, f"{n} is defined by the notebook's trusted cells; do not rebind it.")

    def _targets(self, node, targets) -> None:
        """Assigning to (or deleting) an attribute or item of a module changes it for the checks."""
        for t in _assigned(targets):
            # Only what is assigned to counts: in ``Y[torch.arange(N), t] = 1`` the module is
            # read inside the index, and Y is what changes.
            hit = (
                t
                if isinstance(t, (ast.Attribute, ast.Subscript)) and _root(t) in self.modules
                else None
            )
            if hit is not None:
                self.bad(
                    node,
                    f"changing {ast.unparse(hit)} would change a library for the checks too; "
                    "compute your answer without modifying modules.",
                )
        self.generic_visit(node)

    def visit_Assign(self, node):
        self._targets(node, node.targets)

    def visit_Delete(self, node):
        self._targets(node, node.targets)

    def visit_AugAssign(self, node):
        self._targets(node, [node.target])

    def visit_AnnAssign(self, node):
        self._targets(node, [node.target])


def _python(code: str) -> str:
    """The cell as Python (IPython magics and shell escapes become get_ipython() calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(code)
    except Exception:
        return code


def lint_answer(
    code: str,
    trusted: dict[str, str],
    forbid: list[str],
    exercise: str,
    check_only: set[str] = frozenset(),
) -> list[str]:
    """Problems that get an answer rejected (empty list: accepted). Syntax errors are not lint
    problems: the code runs and the error shows up in the feedback."""
    py = _python(code)
    try:
        tree = parse(py)
    except SyntaxError:
        return []
    if py.strip() != code.strip() and "get_ipython()" in py and "get_ipython" not in code:
        return ["IPython magics and shell commands (%..., !...) are not allowed in answers."]
    modules = {n for n, how in trusted.items() if how.startswith(("import", "from"))}
    modules |= {
        n
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for n in _bindings(node)
    }
    lint = _Lint(trusted, forbid, set(check_only), modules)
    lint.visit(tree)
    for node in _toplevel(tree.body):
        for name, how in _bindings(node).items():
            if name in trusted and how != trusted[name]:
                lint.bad(
                    node,
                    f"{name} is defined by the notebook's trusted cells ({trusted[name]}); "
                    "do not redefine it (the checks rely on it). Pick another name.",
                )
    return list(dict.fromkeys(lint.problems))
