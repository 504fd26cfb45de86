"""``glue(...)`` bookkeeping taken out of the code a reader sees: on the site's pages
(``book/_ext/course_glue.py``) and in the reader notebooks that Colab opens (``tools/reader.py``).

Chapters compute every number they quote and hand it to the prose with ``glue("name", value)``
(course_lib.viz.glue). Those calls are build plumbing: on a page they crowd the code a reader
came to read (66 of them in Chapter 8), and in a reader notebook the prose already holds the
values (``notebooks/site.json``), so they do nothing a reader needs either.

:func:`strip_glue` removes only whole statements: a ``glue(...)`` call (also inside a loop,
branch or function that does something else), an import of nothing but ``glue``, and a
``for``/``if``/``with`` whose body is nothing but such calls, each with the full-line comments
right above it. A line that does anything else stays, so no computation a reader needs
disappears. :func:`reader_code` does the same for a whole notebook's code cells and goes two
steps further, since a notebook is run, not only read: a block left with nothing but glue
becomes ``pass``, and an imported name that only the glue calls used (``glue``, ``sci``,
``Latex``) leaves its import.

Pure functions, tested in tests/book/test_glue_hide.py.
"""

from __future__ import annotations

import ast

GLUE_NAMES = {"glue"}
WIDTH = 88  # the chapters' code width (tools/format_code.py)


def _is_glue_call(node: ast.AST) -> bool:
    """``glue(...)`` or ``something.glue(...)`` as an expression statement."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    name = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )
    return name in GLUE_NAMES


def _is_bookkeeping(node: ast.stmt) -> bool:
    """True when the statement exists only to glue values (see the module docstring)."""
    if _is_glue_call(node):
        return True
    if isinstance(node, ast.ImportFrom) or isinstance(node, ast.Import):
        return bool(node.names) and all(a.name.split(".")[-1] in GLUE_NAMES for a in node.names)
    if isinstance(node, (ast.For, ast.While, ast.With, ast.If)):
        blocks = [node.body, getattr(node, "orelse", [])]
        return all(_is_bookkeeping(s) for block in blocks for s in block)
    return False


def strip_glue(source: str, empty_blocks: str = "keep") -> str:
    """Return ``source`` without its glue bookkeeping statements.

    A nested block (a loop's, a branch's, a function's body) that holds nothing but glue
    cannot be emptied: ``empty_blocks="keep"`` leaves it as it is (the site: the reader sees
    that the branch only records a value), ``"pass"`` writes ``pass`` in its place (a reader
    notebook: no ``glue(`` left in the code). Source that does not parse (IPython magics, a
    syntax error on purpose) is returned as it is. Blank lines left behind are collapsed to
    one, and leading/trailing blank lines dropped.
    """
    if empty_blocks not in ("keep", "pass"):
        raise ValueError(f"strip_glue: empty_blocks={empty_blocks!r}; give 'keep' or 'pass'.")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    drop: set[int] = set()
    replace: dict[int, str] = {}  # line index -> its new text

    def drop_stmt(stmt: ast.stmt) -> int:
        first = stmt.lineno - 1
        drop.update(range(first, stmt.end_lineno))
        # Full-line comments right above it introduce the glue call: they go with it.
        while first > 0 and lines[first - 1].lstrip().startswith("#"):
            first -= 1
            drop.add(first)
        return first

    def visit(body: list[ast.stmt], top: bool) -> None:
        # Inside a block, glue goes only if something else stays (a block cannot be empty).
        if not top and all(_is_bookkeeping(stmt) for stmt in body):
            if empty_blocks == "pass":
                indent = lines[body[0].lineno - 1][: body[0].col_offset]
                for stmt in body:
                    drop_stmt(stmt)
                replace[body[0].lineno - 1] = f"{indent}pass"
            return
        for stmt in body:
            if _is_bookkeeping(stmt):
                drop_stmt(stmt)
            else:
                for field in ("body", "orelse", "finalbody"):
                    inner = getattr(stmt, field, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                        visit(inner, top=False)
                for handler in getattr(stmt, "handlers", []):
                    visit(handler.body, top=False)

    visit(tree.body, top=True)
    if not drop:
        return source
    return _rejoin(lines, drop, replace)


def _rejoin(lines: list[str], drop: set[int], replace: dict[int, str]) -> str:
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in replace:
            out.append(replace[i])
            continue
        if i in drop:
            continue
        if not line.strip() and (not out or not out[-1].strip()):
            continue  # no leading blank line, no two blank lines in a row
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def _names_used(sources: list[str]) -> set[str]:
    """Every name the code reads (``x``, the ``np`` of ``np.log``), over all the sources."""
    used: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        used.update(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
    return used


def _import_line(node: ast.ImportFrom | ast.Import, names: list[ast.alias], indent: str) -> str:
    """The import ``node`` with only ``names``, laid out as ruff would (one line, or one name
    per line in parentheses when one line is wider than the code box)."""
    shown = [f"{a.name} as {a.asname}" if a.asname else a.name for a in names]
    if isinstance(node, ast.Import):
        return f"{indent}import {', '.join(shown)}"
    head = f"{indent}from {'.' * node.level}{node.module or ''} import "
    one = head + ", ".join(shown)
    if len(one) <= WIDTH:
        return one
    return head + "(\n" + "".join(f"{indent}    {s},\n" for s in shown) + f"{indent})"


def _drop_imports(source: str, unused: set[str]) -> str:
    """``source`` without the imported names in ``unused`` (a statement left with no name
    goes, with a trailing comment of its own)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    drop: set[int] = set()
    replace: dict[int, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        bound = [(a, (a.asname or a.name).split(".")[0]) for a in node.names]
        keep = [a for a, name in bound if name not in unused]
        if len(keep) == len(node.names):
            continue
        first, last = node.lineno - 1, node.end_lineno - 1
        drop.update(range(first, last + 1))
        if keep:
            indent = lines[first][: node.col_offset]
            comment = lines[last][node.end_col_offset :].strip()  # "# why", if any
            text = _import_line(node, keep, indent)
            replace[first] = f"{text}  {comment}" if comment.startswith("#") else text
    return _rejoin(lines, drop, replace) if drop else source


def reader_code(sources: list[str]) -> list[str]:
    """A notebook's code cells (in order) as its reader notebook shows them: the glue
    statements gone (a block of nothing else becomes ``pass``), and every imported name that
    only they used dropped from its import. A cell left empty comes back as ``""``."""
    stripped = [_quiet_end(strip_glue(s, empty_blocks="pass"), s) for s in sources]
    before, after = _names_used(sources), _names_used(stripped)
    unused = (before - after) | GLUE_NAMES
    unused -= after
    return [_drop_imports(s, unused) for s in stripped]


def _quiet_end(new: str, old: str) -> str:
    """``new`` with a ``;`` after its last statement where the glue call it lost was the last
    one and what now ends the cell is an expression Jupyter would show (a cell that ended in
    ``glue(...)``, which returns None, showed nothing; ``print(...)`` shows nothing either)."""
    if new == old or not new.strip():
        return new
    try:
        last_new, last_old = ast.parse(new).body[-1], ast.parse(old).body[-1]
    except (SyntaxError, IndexError):
        return new
    if not isinstance(last_new, ast.Expr) or not _is_glue_call(last_old):
        return new
    value = last_new.value
    if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "print":
        return new
    lines = new.splitlines()
    row, col = last_new.end_lineno - 1, last_new.end_col_offset
    lines[row] = lines[row][:col] + ";" + lines[row][col:]
    return "\n".join(lines)
