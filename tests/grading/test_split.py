"""References exist only in the checker (issue 34, item 1): the student's process runs every
check cell as its student program (``course_lib.grading.split``), never the cell itself.

- every check cell of every solution, as the student's process is sent it
  (``runner.student_plan``): its checks keep their kind, name and student callable and nothing
  else, no reference-side argument survives, and no statement that only the reference side
  needs (found here by a separate, flow-insensitive def-use closure over the whole notebook);
- run as the student's process runs them (earlier cells first, the stubs as answers), no value
  any check's reference holds is reachable (``gc``) when the student's code is called, and the
  programs bind the same values as the full cells for every name they keep;
- the rules of the split, one synthetic cell each (mutation, aliasing, functions, random state,
  cells that cannot be split).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import gc
import io

import nbformat
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

from course_lib.grading import checks
from course_lib.grading.checks import CHECK_FUNCS
from course_lib.grading.runner import student_plan
from course_lib.grading.spec import load_spec, meta, parse, role, stub_answer
from course_lib.grading.split import RECORDER, SplitError, split_notebook
from tools.exercises import SOLUTIONS

STEMS = sorted(p.stem for p in SOLUTIONS.glob("*.ipynb"))


def _sol(stem):
    return nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)


def _stubs(sol):
    return {
        meta(c)["exercise"]: [stub_answer(c.source, meta(c)["exercise"])]
        for c in sol.cells
        if role(c) == "answer"
    }


def _plan(sol, stem) -> list[dict]:
    """The cells the student's process is sent (the real plan of a grading)."""
    spec = load_spec(sol, stem)
    stubs = _stubs(sol)
    names = [ex.name for ex in spec.exercises]
    return student_plan(sol, spec, stubs, stubs, names, set(), 30.0, 0, 1)["cells"]


# --------------------------------------------------------------------------- static
def _check_call(stmt):
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
    ):
        return stmt.value
    return None


def _loads(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _binds(stmt) -> set[str]:
    """Flow-insensitive: every name a statement stores, defines or imports, the root of every
    item or attribute it stores into, and for a bare call the names its receiver reads."""
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, ast.Store):
            root = n
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(root, ast.Name):
                out.add(root.id)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        out |= _loads(f.value) if isinstance(f, ast.Attribute) else set()
    return out


def _reference_only(sol) -> dict[str, list[ast.stmt]]:
    """{check cell id: its top-level statements that only the reference side needs}: a
    def-use closure over every statement of the notebook's check cells, from the reference-side
    arguments (reference, predicate, measurement, exception, keywords) on one side and from the
    student callables, the answer cells and the setup cells on the other."""
    return _sides(sol)[2]


def _sides(sol) -> tuple[set[str], set[str], dict[str, list[ast.stmt]]]:
    """(names the student side reads, names the reference side reads, reference-only
    statements by check cell), see ``_reference_only``."""
    cells = [
        (c.id, role(c), parse(c.source))
        for c in sol.cells
        if c.cell_type == "code" and role(c) in ("setup", "answer", "check")
    ]
    stmts = [s for _, r, t in cells if r == "check" for s in t.body if _check_call(s) is None]
    student: set[str] = set()
    reference: set[str] = set()
    for _, r, tree in cells:
        if r != "check":
            student |= _loads(tree)
            continue
        for s in tree.body:
            call = _check_call(s)
            if call is not None and call.func.id in CHECK_FUNCS:
                student |= _loads(call.args[1])
                for a in [*call.args[2:], *[k.value for k in call.keywords]]:
                    reference |= _loads(a)

    def close(names: set[str]) -> set[str]:
        grew = True
        while grew:
            grew = False
            for s in stmts:
                if _binds(s) & names and not _loads(s) <= names:
                    names |= _loads(s)
                    grew = True
        return names

    student, reference = close(student), close(reference)
    only = reference - student
    return (
        student,
        reference,
        {
            cid: [
                s for s in tree.body if _check_call(s) is None and _binds(s) and _binds(s) <= only
            ]
            for cid, r, tree in cells
            if r == "check"
        },
    )


@pytest.mark.parametrize("stem", STEMS)
def test_student_programs_hold_no_reference_computation(stem):
    sol = _sol(stem)
    plan = {c["id"]: c for c in _plan(sol, stem)}
    ref_only = _reference_only(sol)
    for cell in sol.cells:
        if role(cell) != "check":
            continue
        original = parse(cell.source)
        program = parse(plan[cell.id]["source"])
        kept = {ast.dump(s) for s in program.body}
        everything = {ast.dump(n) for n in ast.walk(program)}
        calls = [c for c in map(_check_call, original.body) if c and c.func.id in CHECK_FUNCS]
        # each check: its kind, its name and the student's callable, nothing else
        recorded = [c for c in map(_check_call, program.body) if c and c.func.id == RECORDER]
        assert [(r.args[0].value, ast.dump(r.args[1]), ast.dump(r.args[2])) for r in recorded] == [
            (c.func.id, ast.dump(c.args[0]), ast.dump(c.args[1])) for c in calls
        ], cell.id
        assert all(len(r.args) == 3 and not r.keywords for r in recorded), cell.id
        assert not any(
            c.func.id in CHECK_FUNCS for c in filter(None, map(_check_call, program.body))
        )
        # no reference-side argument, and no statement only the reference side needs
        for c in calls:
            for arg in [*c.args[2:], *[k.value for k in c.keywords]]:
                if not isinstance(arg, (ast.Name, ast.Constant)):
                    assert ast.dump(arg) not in everything, (cell.id, ast.unparse(arg))
        for s in ref_only[cell.id]:
            assert ast.dump(s) not in kept, (cell.id, ast.unparse(s)[:200])


def test_the_reference_side_is_found_in_every_notebook():
    """The closure above finds reference-only statements (the test can fail): at least one in
    most notebooks, among them the ones the issue names."""
    found = {stem: sum(map(len, _reference_only(_sol(stem)).values())) for stem in STEMS}
    assert sum(n > 0 for n in found.values()) >= len(STEMS) // 2, found
    mha = _reference_only(_sol("04_attention"))["multi-head-attention-check-1"]
    assert any("_want" in ast.unparse(s) for s in mha)


# --------------------------------------------------------------------------- dynamic
class _Refused:
    """A student-defined name while a check cell runs in full: exists, refuses to run."""

    def __call__(self, *a, **k):
        raise RuntimeError("student code")

    def __getattr__(self, name):
        raise RuntimeError("student code")


def _reference_values(value) -> list[torch.Tensor]:
    """The tensors a reference holds (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _reference_values(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _reference_values(v)]
    return []


@contextlib.contextmanager
def _quiet():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _run(source: str, name: str, ns: dict) -> None:
    exec(compile(source, name, "exec"), ns)  # noqa: S102 - the course's own cells


def _references(sol, monkeypatch) -> dict[tuple[str, int], list[torch.Tensor]]:
    """{(check cell id, index): the tensors its reference holds}, from the full cells run as
    the checker runs them (student names refuse), with the check helpers recording."""
    refs: dict[tuple[str, int], list[torch.Tensor]] = {}
    student_side = _sides(sol)[0]
    where = {"cell": None, "index": 0}
    ns: dict = {"__name__": "__main__", "__builtins__": builtins}

    def recorder(kind):
        def rec(name, student, *args, **kwargs):
            want = args[0] if args else None
            if kind in ("check_close", "check_equal"):
                inputs = {
                    v.untyped_storage().data_ptr()
                    for n, v in ns.items()
                    if n in student_side and isinstance(v, torch.Tensor)
                }
                # a part of the reference that is a value the student's side reads, or a view
                # of one, is given to the student anyway (the cache it must return): no secret
                refs[(where["cell"], where["index"])] = [
                    t
                    for t in _reference_values(want)
                    if (t.numel() >= 2 or t.is_floating_point())
                    and t.untyped_storage().data_ptr() not in inputs
                ]
            where["index"] += 1

        return rec

    for kind in CHECK_FUNCS:
        monkeypatch.setattr(checks, kind, recorder(kind))
    answers = {meta(c)["exercise"]: c.source for c in sol.cells if role(c) == "answer"}
    for cell in sol.cells:
        r = role(cell)
        if cell.cell_type != "code" or cell.get("id") == "colab-setup":
            continue
        if r == "answer":
            for name in _defined(answers[meta(cell)["exercise"]]):
                ns.setdefault(name, _Refused())
            continue
        where.update(cell=cell.id, index=0)
        with _quiet():
            _run(cell.source, cell.id, ns)
    monkeypatch.undo()
    ns.clear()  # nothing of this run may be found by the scan but the references themselves
    refs = {k: [t.detach().clone() for t in v] for k, v in refs.items()}
    gc.collect()
    return refs


def _defined(source: str) -> set[str]:
    out = set()
    for node in parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _reachable_equal(tensors: list[torch.Tensor]) -> list[tuple]:
    """The live tensors (``gc``) equal to one of ``tensors`` (same dtype, shape and values)."""
    found = []
    want = {(t.dtype, tuple(t.shape)): t for t in tensors}
    # One subclass test per type, not per object: isinstance(o, torch.Tensor) runs torch's
    # Python-level __instancecheck__ on each of the worker's million live objects, and this
    # scan runs before every check call (most of this test's time).
    tensor_type = functools.cache(lambda kind: issubclass(kind, torch.Tensor))
    live = [o for o in gc.get_objects() if tensor_type(type(o))]
    for o in live:
        # A fake tensor (left by an earlier torch.compile in this process) holds no values.
        if not o.is_meta and not isinstance(o, FakeTensor):
            t = want.get((o.dtype, tuple(o.shape)))
            if t is not None and o is not t and torch.equal(o.detach(), t.detach()):
                found.append((tuple(o.shape), o.dtype))
    return found


@pytest.fixture
def restore_checks():
    threads = torch.get_num_threads()
    yield
    checks.set_mode("live")
    checks.take_results()
    checks.begin_cell(None, [])
    torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_no_reference_is_reachable_when_the_students_code_runs(stem, monkeypatch, restore_checks):
    """The student's process, as a grading runs it: the plan's cells in order, the stubs as
    answers, every check cell's program in student mode. Each time a check is about to call the
    student's code, no live object in the process (``gc``: frames, closures, globals, containers)
    equals a tensor of that check's reference. Before issue 34 the reference was an argument of
    the running check_close, and every check with a tensor reference failed here."""
    sol = _sol(stem)
    refs = _references(sol, monkeypatch)
    assert refs, "the notebook has tensor references"
    stolen: list = []
    run_student = checks._run_student

    def scan_then_run(student, expect_raise=False):
        key = (checks._state.cell, checks._state.index)
        hits = _reachable_equal(refs.get(key, []))
        if hits:
            stolen.append((key, hits))
        return run_student(student, expect_raise)

    monkeypatch.setattr(checks, "_run_student", scan_then_run)
    torch.set_num_threads(1)
    stubs = _stubs(sol)
    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    checks.set_mode("student")
    with _quiet():
        for cell in _plan(sol, stem):
            if cell["role"] == "answer":
                for src in stubs[cell["exercise"]]:
                    _run(src, "answer", ns)
                continue
            checks.begin_cell(cell["id"])
            _run(cell["source"], cell["id"], ns)
    results = checks.take_results()
    assert len(results) == sum(len(ex.checks) for ex in load_spec(sol, stem).exercises)
    assert all("not implemented" in (r["error"] or "") for r in results), results[:3]
    assert not stolen, stolen


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_student_programs_bind_what_the_full_cells_bind(stem, restore_checks):
    """Run twice in skip mode (the solution's answers defined): the full cells, and the plan's
    programs. After each check cell, every name its program binds holds what the full cell
    bound (tensors and state dicts equal): a statement the split dropped wrongly, a mutation it
    missed, or a random state it changed shows here."""
    sol = _sol(stem)
    torch.set_num_threads(1)
    checks.set_mode("skip")
    full: dict = {"__name__": "__main__", "__builtins__": builtins}
    split: dict = {"__name__": "__main__", "__builtins__": builtins}
    programs = {c["id"]: c["source"] for c in _plan(sol, stem)}
    compared = 0
    for cell in sol.cells:
        if cell.cell_type != "code" or cell.get("id") == "colab-setup":
            continue
        with _quiet():
            if role(cell) in ("setup", "answer"):
                for ns in (full, split):
                    _run(cell.source, cell.id, ns)
                continue
            _run(cell.source, cell.id, full)
            _run(programs[cell.id], cell.id, split)
        for name in _stored(parse(programs[cell.id])):
            assert name in full, (cell.id, name)
            assert _same(full[name], split[name]), (cell.id, name)
            compared += 1
    assert compared > 0


def _stored(tree) -> set[str]:
    """Names a module binds at its top level (not inside functions, lambdas, comprehensions)."""
    out, todo = set(), list(tree.body)
    scopes = (ast.FunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        if not isinstance(n, (*scopes, ast.GeneratorExp)):
            todo.extend(ast.iter_child_nodes(n))
    return out - {"_"}


def _same(a, b, depth: int = 0) -> bool:
    if depth > 6:
        return True
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, torch.nn.Module):
        return _same(a.state_dict(), b.state_dict(), depth + 1)
    if isinstance(a, torch.Generator):
        return torch.equal(a.get_state(), b.get_state())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, (int, float, str, bool, type(None))):
        return a == b or (a != a and b != b)
    return type(a) is type(b)


# --------------------------------------------------------------------------- the rules
def _program(*cells: tuple[str, str]) -> str:
    """The last check cell's program, for cells given as (role, source)."""
    numbered = [(f"c{i}", r, src) for i, (r, src) in enumerate(cells)]
    last = next(cid for cid, r, _ in reversed(numbered) if r == "check")
    return split_notebook(numbered)[last].source


SETUP = ("setup", "import torch\nfrom torch import nn\nfrom course_lib.grading.checks import *")


def test_a_check_keeps_its_kind_name_and_student_callable_only():
    src = _program(
        SETUP,
        ("answer", "def f(x):\n    return x"),
        (
            "check",
            "_x = randn(3, seed=1)\n_want = torch.softmax(_x, 0)\n"
            "check_close('softmax', lambda: f(_x), _want, hint='h', atol=1e-3)",
        ),
    )
    assert "_want" not in src and "hint" not in src and "atol" not in src
    assert f"{RECORDER}('check_close', 'softmax', lambda: f(_x))" in src
    assert "_x = randn(3, seed=1)" in src


@pytest.mark.parametrize(
    "cell, kept, dropped",
    [
        # an item assignment changes the object the student gets
        ("_t = _a.clone()\n_t[0] = 5\n", ["_t[0] = 5"], []),
        # an in-place method on a name the student reads, and on a name only the reference reads
        ("_t = _a.clone()\n_t.mul_(2)\n_r = _a * 3\n_r.add_(1)\n", ["_t.mul_(2)"], ["_r.add_(1)"]),
        # aliasing: a loop over a module's parameters changes the module
        (
            "_m = nn.Linear(2, 2)\nwith torch.no_grad():\n    for _p in _m.parameters():\n"
            "        _p.fill_(1.0)\n_t = _m.weight\n",
            ["_p.fill_(1.0)"],
            [],
        ),
        # backward changes the grads of every leaf in the loss: only the reference's here
        (
            "_t = _a.clone()\n_g = _a.clone().requires_grad_()\n(_g * 2).sum().backward()\n",
            [],
            ["backward"],
        ),
        # a seed is kept; a seed inside fork_rng restores the state, so it goes with its block
        ("torch.manual_seed(3)\n_t = torch.randn(2)\n", ["manual_seed(3)"], []),
        (
            "with torch.random.fork_rng():\n    torch.manual_seed(0)\n    _r = torch.randn(2)\n"
            "_t = _a\n",
            [],
            ["fork_rng"],
        ),
        # a helper's free names are read where it is called, not where it is defined
        ("def _h():\n    return _z\n_z = _a + 1\n_t = _a\n", ["_z = _a + 1"], []),
        # a function the notebook defines that changes a global: a bare call keeps its argument
        ("def _fill(d):\n    d['k'] = 1\n_t = {}\n_fill(_t)\n", ["_fill(_t)"], []),
    ],
)
def test_the_slice_keeps_what_the_student_side_needs(cell, kept, dropped):
    student = "_t" if "def _h" not in cell else "_h()"
    src = _program(
        SETUP,
        ("check", "_a = torch.ones(2)"),
        ("answer", "def f(x):\n    return x"),
        ("check", cell + f"check_close('c', lambda: f({student}), _a, hint='h')"),
    )
    for text in kept:
        assert text in src, (text, src)
    for text in dropped:
        assert text not in src, (text, src)


def test_later_cells_keep_what_they_need_and_nothing_else():
    cells = [
        SETUP,
        ("answer", "def f(x):\n    return x"),
        (
            "check",
            "_a = torch.ones(2)\n_b = _a * 2\n_ref = _a * 9\n"
            "check_close('c', lambda: f(_a), _ref, hint='h')",
        ),
        ("answer", "def g(x):\n    return x"),
        ("check", "check_close('d', lambda: g(_b), _b * 3, hint='h')"),
    ]
    numbered = [(f"c{i}", r, s) for i, (r, s) in enumerate(cells)]
    first = split_notebook(numbered)["c2"].source
    assert "_b = _a * 2" in first and "_ref" not in first


@pytest.mark.parametrize(
    "cell, why",
    [
        (
            "for _i in range(2):\n    check_true('c', lambda: f(1), bool, hint='h')",
            "statement of its own",
        ),
        (
            "def _g():\n    global _n\n    _n = 1\ncheck_true('c', lambda: f(1), bool, hint='h')",
            "global",
        ),
        ("_n = 'c'\ncheck_true(_n, lambda: f(1), bool, hint='h')", "string-literal"),
        ("check_true('c', hint='h', student=lambda: f(1))", "positional"),
        (
            "import course_lib.grading.checks as _c\n"
            "_c.check_true('c', lambda: f(1), bool, hint='h')",
            "bare name",
        ),
    ],
)
def test_a_cell_that_cannot_be_split_is_an_error(cell, why):
    with pytest.raises(SplitError, match=why):
        _program(SETUP, ("answer", "def f(x):\n    return x"), ("check", cell))
