"""Format the code cells of the book's MyST notebooks with ruff, for the page.

The site's code box holds about 88 columns (``WIDTH``, over the ruff settings in
``pyproject.toml``, whose line-length is the library code's); wider code scrolls sideways on a
desktop and runs off a phone. This tool runs ``ruff format`` on the code of every
``{code-cell}`` in the table of contents' pages and writes the result back in place, leaving
everything else in the file byte for byte (front matter, markdown, cell options).
Cells removed from the page (tag ``remove-cell``, e.g. the Colab set-up cell, which
``tools.colab`` owns) are left alone, as are cells ruff cannot parse (IPython magics).

Command line::

    python -m tools.format_code            # format in place
    python -m tools.format_code --check    # exit 1 and list the pages that need it (tests)
    python -m tools.format_code book/04_attention.md   # only these pages

After formatting a chapter, run ``python -m tools.colab`` to update its paired notebook.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tempfile
import textwrap
import tokenize
from pathlib import Path

from . import ROOT

__all__ = [
    "CELL",
    "WIDTH",
    "code_cells",
    "format_sources",
    "format_page",
    "pages",
    "place_comments",
    "main",
]

WIDTH = 88  # the site's code box; pyproject.toml's [tool.ruff] line-length is the library's

# A code cell: opening fence with its language, optional options (YAML block or ":key: value"
# lines), the code, the closing fence at the start of a line.
CELL = re.compile(
    r"(?P<open>^```\{code-cell\}[^\n]*\n)"
    r"(?P<opts>(?:---\n.*?\n---\n)|(?:(?::[\w-]+:[^\n]*\n)+))?"
    r"(?P<code>.*?)"
    r"(?P<close>^```[ \t]*$)",
    flags=re.S | re.M,
)


def pages(root: Path = ROOT) -> list[Path]:
    """Every page of the table of contents that has code cells."""
    from .toc import toc_files

    found = [root / f"{f}.md" for f in toc_files()]
    return [p for p in found if p.exists() and "```{code-cell}" in p.read_text()]


def _shown(match: re.Match) -> bool:
    return "remove-cell" not in (match.group("opts") or "")


def code_cells(text: str) -> list[str]:
    """The code of each cell shown on the page (removed cells excluded)."""
    return [m.group("code") for m in CELL.finditer(text) if _shown(m)]


def place_comments(src: str, width: int = WIDTH) -> str:
    """Comments laid out for ``width`` columns, before ruff sees the code.

    A trailing comment that makes its line too long moves onto its own line above (ruff would
    otherwise split the code around it); a full-line comment that is too long is wrapped.
    Comments only: the code tokens are not touched. Unparsable source comes back unchanged.
    """
    if not _parses(src):
        return src
    lines = src.splitlines(keepends=True)
    tokens = tokenize.generate_tokens(io.StringIO(src).readline)
    moves: dict[int, tuple[int, str]] = {}  # line index -> (column of the comment, comment)
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start[0] - 1, tok.start[1]
        if len(lines[row].rstrip("\n")) > width:
            moves[row] = (col, tok.string)
    out = []
    for i, line in enumerate(lines):
        indent = line[: len(line) - len(line.lstrip())]
        if i in moves:
            col, comment = moves[i]
            code = line[:col].rstrip()
            text = comment.lstrip("#").strip()
            wrapped = textwrap.wrap(text, width - len(indent) - 2) or [""]
            out.extend(f"{indent}# {part}\n" for part in wrapped)
            if code.strip():
                out.append(code + "\n")
        else:
            out.append(line)
    return "".join(out)


def format_sources(sources: list[str], root: Path = ROOT) -> list[str | None]:
    """``ruff format`` each source (one ruff call for all); None where ruff cannot parse it."""
    if not sources:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / f"cell_{i:04d}.py" for i in range(len(sources))]
        for f, src in zip(files, sources):
            f.write_text(place_comments(src))
        # --config: the repository's settings, whatever folder the files are in; --line-length:
        # the page's width over them (pyproject's line-length is the library code's).
        ruff = [sys.executable, "-m", "ruff", "format", "--quiet", "--line-length", str(WIDTH)]
        config = ["--config", str(Path(root) / "pyproject.toml")]
        subprocess.run(
            [*ruff, *config, *map(str, files)],
            capture_output=True,
            text=True,
        )  # exit code 2 when some file does not parse: those come back unchanged
        out = []
        for f, src in zip(files, sources):
            new = f.read_text()
            out.append(new if _parses(src) else None)
        return out


def _parses(src: str) -> bool:
    import ast

    try:
        ast.parse(src)
        return True
    except SyntaxError:
        return False


def format_page(text: str, root: Path = ROOT) -> str:
    """The page's text with every shown code cell formatted."""
    matches = [m for m in CELL.finditer(text) if _shown(m)]
    formatted = format_sources([m.group("code") for m in matches], root)
    pieces, last = [], 0
    for m, new in zip(matches, formatted):
        start, end = m.span("code")
        pieces.append(text[last:start])
        code = m.group("code")
        if new is not None:
            code = new if new.endswith("\n") or not new else new + "\n"
        pieces.append(code)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to format (default: all)")
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if any differ")
    args = parser.parse_args(argv)
    targets = [p.resolve() for p in args.pages] or pages()
    stale = []
    for page in targets:
        text = page.read_text()
        new = format_page(text)
        if new != text:
            stale.append(page)
            if not args.check:
                page.write_text(new)
    verb = "need formatting" if args.check else "formatted"
    for page in stale:
        print(f"{verb}: {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}")
    if args.check and stale:
        print("run: python -m tools.format_code && python -m tools.colab", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
