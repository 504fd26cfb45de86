"""A code cell that names a figure (``mystnb: figure: name:``) must end with an expression:
myst-nb labels the cell's *result*, so a cell whose figure is finished mid-cell shows no
figure, and the build stops on "undefined label" at the first {numref} to it (Chapter 15's
``fig-ablation-horizon``, found by CI's clean build). Fast: read every chapter's cells, no
execution."""

from __future__ import annotations

import ast

import yaml

from tools import ROOT
from tools.format_code import CELL


def figure_cells(root=ROOT) -> list[tuple[str, str, str]]:
    """(page, figure name, code) for every chapter cell that names a figure."""
    out = []
    for md in sorted((root / "book").rglob("*.md")):
        for m in CELL.finditer(md.read_text(encoding="utf-8")):
            opts = m.group("opts") or ""
            meta = yaml.safe_load(opts.strip().strip("-")) if opts.startswith("---") else {}
            name = (meta.get("mystnb") or {}).get("figure", {}).get("name")
            if name:
                out.append((md.relative_to(root).as_posix(), name, m.group("code")))
    return out


def ends_without_a_result(code: str) -> bool:
    body = ast.parse("\n".join(ln for ln in code.splitlines() if not ln.startswith("%"))).body
    return not body or not isinstance(body[-1], ast.Expr) or _is_call_of(body[-1], "glue", "print")


def _is_call_of(stmt: ast.Expr, *names: str) -> bool:
    f = stmt.value.func if isinstance(stmt.value, ast.Call) else None
    return isinstance(f, ast.Name) and f.id in names


def test_every_figure_cell_ends_with_its_figure():
    cells = figure_cells()
    assert len(cells) > 40, "the figure cells were found"
    bad = [f"{page}: {name}" for page, name, code in cells if ends_without_a_result(code)]
    assert not bad, "figure cells whose last statement shows nothing:\n" + "\n".join(bad)


def test_the_check_sees_a_figure_finished_mid_cell():
    assert ends_without_a_result("finish_figure(fig)\nglue('x', 1)\n")
    assert ends_without_a_result("fig = finish_figure(fig)\n")
    assert not ends_without_a_result("glue('x', 1)\nfinish_figure(fig)\n")
