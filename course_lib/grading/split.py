"""Check cells as the student's process runs them: only what calls the student's code.

A check cell of a solution holds both sides of each check: the student's callable (``lambda:
attention(_q, _k, _v)``, or a helper the cell defines that calls the student's functions) and
what it is judged against (a reference, predicate or measurement, tolerances, a hint). The
checker (``checker``) runs the cell as written. The student's process never does: it runs the
cell's *student program* (``student_cells``), written here from the cell's AST (``spec.parse``):

- each ``check_*(name, student, reference, ..., hint=...)`` becomes
  ``_course_check("check_*", name, student)`` (``checks.student_check``): the check's kind, its
  name and the student's callable; the reference, predicate, measurement, exception class,
  tolerances and hint are dropped unevaluated;
- every other top-level statement is kept only if something kept needs what it binds: a
  student callable, a kept statement after it, a later cell's kept statement, or the solution's
  later answer and setup cells (a backward slice over the notebook's statements, by the names
  each binds and reads). A name bound to a function the notebook defines stands for what that
  function reads: where the name is read, so are the function's free names (it may be called
  there). Compound statements (``for``, ``with``, ``if``, ``try``) are kept or dropped whole; what
  they bind is a may-bind, which does not hide an earlier binding of the name.

A statement also counts as binding every name whose object it may change in place: the target
of an item or attribute assignment (``x[0] = 1``), the receiver of an in-place method
(``x.copy_(...)``, ``d.update(...)``, ``m.eval()``; ``loss.backward()`` changes every name in its
receiver), the first argument of an in-place function (``nn.init.zeros_(w)``), the arguments of
a bare call of a function the notebook defines, the globals the functions it calls change, and
every name that may share its object (``for p in m.parameters(): p.copy_(...)`` changes ``m``).
A call that sets global state (``torch.manual_seed(0)``, ``torch.random.set_rng_state(s)``,
``torch.set_num_threads(1)``) is always kept.

So a value computed only for a reference never exists in the student's process: nothing up the
stack, in a traceback or in ``gc`` for the student's code to find. A check cell this cannot
split is a bug of the course, reported as ``SplitError`` (a ``check_*`` call that is not a
statement of its own at the top of the cell, a name or hint that is not a literal, ``global``
in a check cell's function). ``tests/grading/test_split.py`` proves the programs of every
solution keep no reference computation and bind the values the full cells bind.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from .checks import CHECK_FUNCS
from .spec import meta, parse, role

__all__ = ["SplitError", "SplitCell", "split_notebook", "student_cells", "RECORDER"]

RECORDER = "_course_check"  # the name the student programs call (checks.student_check)
_PRELUDE = f"from course_lib.grading.checks import student_check as {RECORDER}\n"

# methods that change their receiver in place (torch's trailing underscore aside)
_MUTATING_METHODS = frozenset(
    {
        "append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear",
        "remove", "discard", "add", "sort", "reverse", "backward", "step", "zero_grad",
        "load_state_dict", "train", "eval", "apply", "register_buffer", "register_parameter",
        "register_module", "add_module", "retain_grad", "to", "cuda", "cpu", "float", "double",
        "half", "bfloat16", "type", "manual_seed", "seed", "set_state", "setstate", "fill",
    }
)  # fmt: skip
# methods whose result shares its receiver's object or storage (for aliasing)
_SHARING_METHODS = frozenset(
    {
        "parameters", "named_parameters", "buffers", "named_buffers", "children",
        "named_children", "modules", "named_modules", "state_dict", "values", "items", "keys",
        "view", "view_as", "reshape", "detach", "expand", "expand_as", "t", "T", "transpose",
        "permute", "squeeze", "unsqueeze", "flatten", "unflatten", "narrow", "select", "split",
        "chunk", "unbind", "as_strided", "diagonal", "real", "imag", "get", "data",
    }
)  # fmt: skip
_SHARING_CALLS = frozenset({"list", "tuple", "iter", "zip", "enumerate", "reversed", "dict", "set"})
# calls that set process-wide state: always kept (cheap, and later statements may depend on it)
_GLOBAL_SETTERS = frozenset(
    {
        "manual_seed", "seed", "set_rng_state", "set_num_threads", "set_num_interop_threads",
        "set_default_dtype", "set_default_device", "set_grad_enabled",
        "use_deterministic_algorithms", "set_flush_denormal", "setstate", "filterwarnings",
        "simplefilter",
    }
)  # fmt: skip
_RNG_SETTERS = frozenset({"manual_seed", "seed", "set_rng_state", "setstate"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class SplitError(ValueError):
    """A check cell that cannot be split into a student program (a bug of the course)."""


@dataclass
class SplitCell:
    """One check cell split: the student program's source, and which of the cell's top-level
    statements it keeps (indices into the parsed cell's body), for tests and debugging."""

    id: str
    source: str
    kept: list[int]
    dropped: list[int]
    checks: list[tuple[str, str]]  # (kind, name) of each check, in order


# --------------------------------------------------------------------------- names
def _stored(node) -> set[str]:
    """Names a target binds (x, (a, b), *rest); not attributes or items."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_stored(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.Starred):
        return _stored(node.value)
    return set()


def _root(node) -> str | None:
    """The name an attribute or item chain starts from (``m.w[0]`` -> ``m``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted_root(node) -> str | None:
    """The name of a pure dotted chain (``torch.random.manual_seed`` -> ``torch``), else None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _scope_locals(body: list[ast.stmt], args: ast.arguments | None) -> set[str]:
    """Names local to a function body: its parameters and what the body binds (not inside
    nested scopes), less ``global`` declarations."""
    names: set[str] = set()
    if args is not None:
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None:
                names.add(a.arg)
    declared: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return names - declared


def _reads(node: ast.AST, local: frozenset[str] = frozenset()) -> set[str]:
    """Names ``node`` reads from the module's namespace: its own loads, and the free names of
    the functions, lambdas, classes and comprehensions inside it (read when they run)."""
    out: set[str] = set()

    def visit(n: ast.AST, local: frozenset[str]) -> None:
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Load) and n.id not in local:
                out.add(n.id)
            return
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = n.args
            for d in (*args.defaults, *[d for d in args.kw_defaults if d is not None]):
                visit(d, local)
            if not isinstance(n, ast.Lambda):
                for d in n.decorator_list:
                    visit(d, local)
            body = [n.body] if isinstance(n, ast.Lambda) else n.body
            inner = local | _scope_locals(
                body if not isinstance(n, ast.Lambda) else [ast.Expr(n.body)], args
            )
            for b in body:
                visit(b, frozenset(inner))
            return
        if isinstance(n, ast.ClassDef):
            for d in (*n.bases, *[k.value for k in n.keywords], *n.decorator_list):
                visit(d, local)
            inner = frozenset(local | _scope_locals(n.body, None))
            for b in n.body:
                visit(b, inner)
            return
        if isinstance(n, _COMPREHENSIONS):
            first, *rest = n.generators
            visit(first.iter, local)
            bound = set()
            for g in n.generators:
                bound |= _stored(g.target)
            inner = frozenset(local | bound)
            for g in n.generators:
                visit(g.target, inner)
                for cond in g.ifs:
                    visit(cond, inner)
            for g in rest:
                visit(g.iter, inner)
            for part in (n.key, n.value) if isinstance(n, ast.DictComp) else (n.elt,):
                visit(part, inner)
            return
        for child in ast.iter_child_nodes(n):
            visit(child, local)

    visit(node, local)
    return out


def _sharing_roots(expr: ast.AST | None) -> set[str]:
    """Names whose objects the value of ``expr`` may share (for aliasing): ``m.weight``,
    ``m.parameters()``, ``x.view(...)``, ``list(a)``, ``(a, b)`` share; ``x.clone()``, ``f(x)``
    and arithmetic make new objects."""
    if expr is None:
        return set()
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
        return _sharing_roots(expr.value)
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_sharing_roots(e) for e in expr.elts)) if expr.elts else set()
    if isinstance(expr, ast.Dict):
        return set().union(*(_sharing_roots(v) for v in expr.values)) if expr.values else set()
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and (
            f.attr in _SHARING_METHODS or _in_place(f.attr) or f.attr in _MUTATING_METHODS
        ):
            return _sharing_roots(f.value)  # a view, or the receiver itself (in-place methods)
        if isinstance(f, ast.Name) and f.id in _SHARING_CALLS:
            return set().union(*(_sharing_roots(a) for a in expr.args)) if expr.args else set()
    if isinstance(expr, ast.IfExp):
        return _sharing_roots(expr.body) | _sharing_roots(expr.orelse)
    return set()


def _in_place(attr: str) -> bool:
    return attr.endswith("_") and not attr.endswith("__") and len(attr) > 1


# --------------------------------------------------------------------------- one statement
@dataclass
class _Stmt:
    node: ast.stmt
    must: set[str]  # names it surely rebinds
    may: set[str]  # names it may bind or whose objects it may change (before aliasing)
    reads: set[str]
    check: tuple[str, str] | None = None  # (kind, name) for a check call
    global_effect: bool = False


def _check_call(node: ast.stmt) -> ast.Call | None:
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id in CHECK_FUNCS
    ):
        return node.value
    return None


def _mutated(node: ast.AST, modules: set[str], functions: set[str], bare: bool) -> set[str]:
    """Names whose objects ``node`` may change in place (see the module docstring). ``bare``:
    the statement is a call on its own, so a notebook function it calls may change its
    arguments."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            if isinstance(n, ast.ClassDef):
                stack.extend([*n.bases, *n.decorator_list])
            else:
                stack.extend(n.args.defaults)
            continue  # a body runs when called, not here
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(
                        sub.ctx, (ast.Store, ast.Del)
                    ):
                        r = _root(sub)
                        if r:
                            out.add(r)
                if isinstance(n, ast.AugAssign):
                    out |= _stored(n.target)
        elif isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute):
                if f.attr == "backward":
                    out |= _reads(f.value)  # every leaf that flows into the loss
                elif f.attr in _MUTATING_METHODS or _in_place(f.attr):
                    r = _root(f.value)
                    if r is not None and r not in modules:
                        out.add(r)
                    if _in_place(f.attr) and _dotted_root(f.value) in modules and n.args:
                        out |= _sharing_roots(n.args[0])  # nn.init.zeros_(w)
            elif (
                isinstance(f, ast.Name)
                and f.id in functions
                and bare
                and n is getattr(node, "value", None)
            ):
                for a in (*n.args, *[k.value for k in n.keywords]):
                    out |= _sharing_roots(a)
        stack.extend(ast.iter_child_nodes(n))
    return out - modules


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _rewrite_check(call: ast.Call, cell_id: str) -> tuple[ast.stmt, tuple[str, str], ast.AST]:
    kind = call.func.id
    if len(call.args) < 2 or any(isinstance(a, ast.Starred) for a in call.args[:2]):
        raise SplitError(
            f"check cell {cell_id}, line {call.lineno}: {kind}(...) needs its name and the "
            "student's callable as its first two positional arguments."
        )
    name, student = call.args[0], call.args[1]
    if _literal(name) is None:
        raise SplitError(
            f"check cell {cell_id}, line {call.lineno}: {kind}(...) needs a string-literal name."
        )
    new = ast.Expr(
        ast.Call(
            func=ast.Name(RECORDER, ast.Load()),
            args=[ast.Constant(kind), name, student],
            keywords=[],
        )
    )
    ast.copy_location(new, call)
    ast.copy_location(new.value, call)
    ast.fix_missing_locations(new)
    return new, (kind, _literal(name) or ""), student


def _analyse(
    node: ast.stmt, cell_id: str, modules: set[str], functions: set[str]
) -> tuple[_Stmt, ast.stmt]:
    """What one top-level statement of a check cell binds and reads; the statement to keep
    (a check call rewritten)."""
    call = _check_call(node)
    if call is not None:
        new, check, student = _rewrite_check(call, cell_id)
        return _Stmt(new, set(), set(), _reads(student), check=check), new
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            called = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            if called in CHECK_FUNCS:
                raise SplitError(
                    f"check cell {cell_id}, line {sub.lineno}: {called}(...) must be a "
                    "statement of its own at the top level of the cell, called by its bare name "
                    "(not inside a loop, a function, a condition or an expression), so that the "
                    "student's process can run it without its reference."
                )
        if isinstance(sub, (ast.Global, ast.Nonlocal)):
            raise SplitError(
                f"check cell {cell_id}, line {sub.lineno}: a check cell's function may not "
                "rebind a module-level name (global/nonlocal); keep state in a dict instead."
            )
    must: set[str] = set()
    may: set[str] = set()
    if isinstance(node, ast.Assign):
        for t in node.targets:
            must |= _stored(t)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        must |= _stored(node.target)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        must |= {(a.asname or a.name).split(".")[0] for a in node.names}
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        must.add(node.name)
    elif not isinstance(node, ast.Expr):  # compound: may-binds
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                may.add(sub.id)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                may |= {(a.asname or a.name).split(".")[0] for a in sub.names}
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                may.add(sub.name)
    value = getattr(node, "value", None)
    throwaway = isinstance(node, ast.Expr) or (
        isinstance(node, ast.Assign) and must <= {"_"} and isinstance(value, ast.Call)
    )
    bare = throwaway and isinstance(value, ast.Call)
    may |= _mutated(node, modules, functions, bare)
    if isinstance(node, (ast.Delete,)):
        may |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return _Stmt(node, must, may, _reads(node), global_effect=_sets_globals(node, modules)), node


def _sets_globals(node: ast.AST, modules: set[str], rng_restored: bool = False) -> bool:
    """Whether running ``node`` sets process-wide state: a setter of a module
    (``torch.manual_seed``, ``torch.set_num_threads``...) or an attribute of a module
    (``torch.x = ...``). Function bodies run when called, not here; inside ``with
    torch.random.fork_rng():`` the random state is restored at the end, so its seeds do not
    count."""
    if isinstance(node, _SCOPES):
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        attr = node.func.attr
        if attr in _GLOBAL_SETTERS and _dotted_root(node.func) in modules:
            if not (rng_restored and attr in _RNG_SETTERS):
                return True
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
        if _root(node) in modules:
            return True
    if isinstance(node, (ast.With, ast.AsyncWith)):
        restores = any(
            isinstance(i.context_expr, ast.Call)
            and isinstance(i.context_expr.func, ast.Attribute)
            and i.context_expr.func.attr == "fork_rng"
            for i in node.items
        )
        return any(_sets_globals(i, modules, rng_restored) for i in node.items) or any(
            _sets_globals(b, modules, rng_restored or restores) for b in node.body
        )
    return any(_sets_globals(c, modules, rng_restored) for c in ast.iter_child_nodes(node))


# --------------------------------------------------------------------------- the notebook
def _function_facts(
    trees: list[tuple[str, ast.Module]], modules: set[str]
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """For each name the notebook binds to a function, class or lambda: the module names it
    reads when called, and the module names it changes in place (both transitive over the
    notebook's other functions)."""
    reads: dict[str, set[str]] = {}
    changes: dict[str, set[str]] = {}
    for _role, tree in trees:
        for node in _toplevel_stmts(tree.body):
            fn: ast.AST | None = None
            name = None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                fn, name = node, node.name
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Lambda)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                fn, name = node.value, node.targets[0].id
            if fn is None or name is None:
                continue
            reads.setdefault(name, set()).update(_reads(fn))
            changed: set[str] = set()
            body = fn.body if not isinstance(fn, ast.Lambda) else [ast.Expr(fn.body)]
            local = _scope_locals(body, getattr(fn, "args", None))
            for stmt in body:
                changed |= _mutated(stmt, modules, set(), False)
            changes.setdefault(name, set()).update(changed - local)
    functions = set(reads)
    changed_any = True
    while changed_any:  # close over calls between the notebook's functions
        changed_any = False
        for name in functions:
            more_r = set().union(*(reads[f] for f in reads[name] & functions if f != name))
            more_c = set().union(*(changes[f] for f in reads[name] & functions if f != name))
            if not more_r <= reads[name] or not more_c <= changes[name]:
                reads[name] |= more_r
                changes[name] |= more_c
                changed_any = True
    return reads, changes


def _toplevel_stmts(body: list[ast.stmt]):
    """Statements at module level, looking inside compound statements (not def/class)."""
    for node in body:
        yield node
        if isinstance(node, _SCOPES):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _toplevel_stmts(getattr(node, name, []) or [])
        for h in getattr(node, "handlers", []) or []:
            yield from _toplevel_stmts(h.body)


def _imported(trees: list[tuple[str, ast.Module]]) -> set[str]:
    names: set[str] = set()
    for _role, tree in trees:
        for node in _toplevel_stmts(tree.body):
            if isinstance(node, ast.Import):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names |= {a.asname or a.name for a in node.names}
    return names


def _aliases(analysed: list[list[_Stmt]]) -> dict[str, set[str]]:
    """name -> the names whose objects it may share, closed transitively (symmetric)."""
    edges: dict[str, set[str]] = {}

    def link(a: str, b: str) -> None:
        if a != b:
            edges.setdefault(a, set()).add(b)
            edges.setdefault(b, set()).add(a)

    for cell in analysed:
        for st in cell:
            for node in _toplevel_stmts([st.node]):
                pairs: list[tuple[set[str], set[str]]] = []
                if isinstance(node, ast.Assign):
                    pairs = [(_stored(t), _sharing_roots(node.value)) for t in node.targets]
                elif isinstance(node, (ast.For, ast.AsyncFor)):
                    pairs = [(_stored(node.target), _sharing_roots(node.iter))]
                elif isinstance(node, (ast.With, ast.AsyncWith)):
                    pairs = [
                        (_stored(i.optional_vars), _sharing_roots(i.context_expr))
                        for i in node.items
                        if i.optional_vars is not None
                    ]
                for names, roots in pairs:
                    for a in names:
                        for b in roots:
                            link(a, b)
    closed: dict[str, set[str]] = {}
    for start in edges:
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        closed[start] = seen - {start}
    return closed


def split_notebook(cells: list[tuple[str, str, str]]) -> dict[str, SplitCell]:
    """Split every check cell of a notebook given as (id, role, source) code cells in order
    (roles ``setup``, ``answer``, ``check``; answers as the solution has them). Returns
    {check cell id: SplitCell}. Raises SplitError for a cell that cannot be split."""
    trees = [(r, parse(src)) for _, r, src in cells]
    modules = _imported([(r, t) for r, t in trees if r != "answer"])
    fn_reads, fn_changes = _function_facts([(r, t) for r, t in trees if r != "answer"], modules)
    functions = set(fn_reads)

    def expand(names: set[str]) -> set[str]:
        out = set(names)
        for n in names & functions:
            out |= fn_reads[n]
        return out

    analysed: list[list[_Stmt]] = []
    rewritten: list[list[ast.stmt]] = []
    for (cid, r, _), (_, tree) in zip(cells, trees):
        if r != "check":
            analysed.append([])
            rewritten.append([])
            continue
        pairs = [_analyse(node, cid, modules, functions) for node in tree.body]
        analysed.append([p[0] for p in pairs])
        rewritten.append([p[1] for p in pairs])
    alias = _aliases(analysed)
    for cell in analysed:
        for st in cell:
            called = expand(st.reads) & functions
            for f in called:
                st.may |= fn_changes.get(f, set())
            for n in list(st.may):
                st.may |= alias.get(n, set())
            st.may -= modules

    live: set[str] = set()
    out: dict[str, SplitCell] = {}
    for i in reversed(range(len(cells))):
        cid, r, _src = cells[i]
        tree = trees[i][1]
        if r != "check":
            live |= expand(_reads(tree))  # setup cells run whole; answers read what they read
            continue
        keep: list[int] = []
        for j in reversed(range(len(analysed[i]))):
            st = analysed[i][j]
            if st.check is not None or st.global_effect:
                keep.append(j)
                live |= expand(st.reads)
            elif (st.must | st.may) & live:
                keep.append(j)
                live = (live - st.must) | expand(st.reads)
        keep.sort()
        body = [rewritten[i][j] for j in keep]
        checks = [analysed[i][j].check for j in keep if analysed[i][j].check is not None]
        program = ast.unparse(ast.Module(body=body, type_ignores=[])) if body else "pass"
        out[cid] = SplitCell(
            cid,
            (_PRELUDE if checks else "") + program + "\n",
            keep,
            [j for j in range(len(analysed[i])) if j not in keep],
            [c for c in checks if c is not None],
        )
    return out


@functools.lru_cache(maxsize=64)
def _split_cached(cells: tuple[tuple[str, str, str], ...]) -> dict[str, SplitCell]:
    return split_notebook(list(cells))


def student_cells(sol) -> list[dict]:
    """The cells the student's process runs, in notebook order, as ``runner`` plans them (id,
    role, exercise, source): setup cells as they are, answers empty (the student's answers go
    separately), check cells as their student programs. Cached per solution content."""
    code = [
        (c.get("id"), role(c), c.source, meta(c).get("exercise"))
        for c in sol.cells
        if c.cell_type == "code" and role(c) in ("setup", "answer", "check")
    ]
    split = _split_cached(tuple((cid, r, src) for cid, r, src, _ in code))
    return [
        {
            "id": cid,
            "role": r,
            "exercise": ex,
            "source": split[cid].source if r == "check" else ("" if r == "answer" else src),
        }
        for cid, r, src, ex in code
        if cid != "colab-setup"  # installs course_lib on Colab only: nothing to run here
    ]
