"""Hide the ``glue(...)`` bookkeeping from the site's code cells.

Chapters compute every number they quote and hand it to the prose with ``glue("name", value)``
(course_lib.viz.glue). Those calls are build plumbing: on a page they crowd the code a reader
came to read (66 of them in Chapter 8). This extension removes them from the *displayed* input
of each executed cell, after parsing and before writing, so

- the notebook itself is untouched: Jupyter, Colab and the execution cache see every call,
  and the glued values still reach the prose;
- only whole statements go: a ``glue(...)`` call (also inside a loop, branch or function that
  does something else), an import of nothing but ``glue``, and a ``for``/``if``/``with`` whose
  body is nothing but such calls, each with the full-line comments right above it. A line that
  does anything else stays, so no computation a reader needs disappears;
- a cell left with no code keeps its outputs and loses its (empty) input box.

The stripping is a pure function, :func:`strip_glue`, tested in tests/test_glue_hide.py.
"""

from __future__ import annotations

import ast

from docutils import nodes

GLUE_NAMES = {"glue"}


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


def strip_glue(source: str) -> str:
    """Return ``source`` without its glue bookkeeping statements.

    Source that does not parse (IPython magics, a syntax error on purpose) is returned as it
    is. Blank lines left behind are collapsed to one, and leading/trailing blank lines dropped.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    drop: set[int] = set()

    def visit(body: list[ast.stmt], top: bool) -> None:
        # Inside a block, glue goes only if something else stays (a block cannot be empty).
        if not top and all(_is_bookkeeping(stmt) for stmt in body):
            return
        for stmt in body:
            if _is_bookkeeping(stmt):
                first = stmt.lineno - 1
                drop.update(range(first, stmt.end_lineno))
                # Full-line comments right above it introduce the glue call: they go with it.
                while first > 0 and lines[first - 1].lstrip().startswith("#"):
                    first -= 1
                    drop.add(first)
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
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in drop:
            continue
        if not line.strip() and (not out or not out[-1].strip()):
            continue  # no leading blank line, no two blank lines in a row
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def hide_glue(app, doctree) -> None:
    """doctree-read: rewrite each code cell's displayed source."""
    for cell_input in list(doctree.findall(nodes.container)):
        if cell_input.get("nb_element") != "cell_code_source":
            continue
        for block in list(cell_input.findall(nodes.literal_block)):
            text = block.astext()
            new = strip_glue(text)
            if new == text:
                continue
            if not new.strip():
                cell_input.parent.remove(cell_input)
                break
            # rawsource must equal the text, or Sphinx stops highlighting the block.
            replacement = nodes.literal_block(new, new, **block.attributes)
            block.replace_self(replacement)


def setup(app):
    app.connect("doctree-read", hide_glue)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
