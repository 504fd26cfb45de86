"""Colab support: the set-up cell, the paired chapter notebooks and Colab URLs.

Every MyST chapter ``book/NN.md`` in ``_toc.yml`` gets a paired ``book/NN.ipynb`` (jupytext,
``ipynb,md:myst``), the source's cells as a notebook. (What a reader opens, on Colab or from
the page's download button, is the chapter's *reader notebook* ``notebooks/NN.ipynb``,
generated from this pair by ``tools/reader.py`` with the site's numbers and links written
in.) The ``.md`` is the source; the ``.ipynb`` is regenerated from it with ``--update``
semantics: cells keep the ids they had in the previous ``.ipynb`` (matched with jupytext's
own matcher), new cells get ids derived from their content, outputs are dropped. Regenerating twice
gives the same bytes.

Colab shows Markdown cells as plain Markdown, where a sphinx-design tab set (``{tab-set}`` with
``{tab-item}`` children, e.g. the "idea at five levels") would be raw fences. The paired
notebook therefore gets each tab set rewritten as plain paragraphs: the fences and options go,
each tab's label becomes a bold lead-in (``**Child.**``). Every other directive is kept as is.

Every chapter and every exercise/solution notebook starts with the same short set-up cell
(tag ``remove-cell``, id ``colab-setup``): on Colab it pip-installs ``course_lib`` from the
repository URL and branch in ``_config.yml``; elsewhere it does nothing. With the environment
variable ``COURSE_LIB_SOURCE`` set (a path or pip requirement), it installs from there instead,
which is how the fresh-Colab test points it at the local checkout. A plain
``pip install`` leaves Colab's torch, numpy and matplotlib alone: ``course_lib`` only requires
them unpinned, so they are already satisfied.

Command line::

    python -m tools.colab            # update set-up cells and paired notebooks
    python -m tools.colab --check    # exit 1 and list what is out of date (tests, CI)
    python -m tools.colab --links    # Markdown table of Colab links (the README's; ./course sync)
    python -m tools.colab book/04_attention.md   # only these chapters/notebooks
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENV_VAR",
    "SETUP_CELL_ID",
    "chapter_paths",
    "colab_url",
    "ensure_setup_cell",
    "exercise_notebook_paths",
    "install_requirement",
    "paired_ipynb_text",
    "plain_tab_sets",
    "repository",
    "setup_cell_source",
    "update_chapter_md",
    "sync",
]

from . import ROOT

ENV_VAR = "COURSE_LIB_SOURCE"
SETUP_CELL_ID = "colab-setup"
SETUP_TAG = "remove-cell"
MARKER = "# Colab set-up:"  # first line of the set-up cell; how an old version is recognised
PAIRING = "ipynb,md:myst"
COLAB = "https://colab.research.google.com/github"
NOTEBOOK_DIRS = ("exercises", "solutions")


# --------------------------------------------------------------------------- configuration
def repository(root: Path = ROOT) -> tuple[str, str]:
    """(GitHub URL, the branch Colab opens) from ``_config.yml``, the one place that names them:
    ``repository.url`` and ``sphinx.config.course_colab_branch`` (default: ``repository.branch``,
    which the site's edit and source links use)."""
    import yaml

    config_path = Path(root) / "_config.yml"
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    repo = config.get("repository") or {}
    sphinx_config = (config.get("sphinx") or {}).get("config") or {}
    url = str(repo.get("url", "")).rstrip("/")
    branch = str(sphinx_config.get("course_colab_branch") or repo.get("branch") or "main")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise ValueError(
            f"repository.url in {config_path} is {url!r}; Colab needs a GitHub URL of the form "
            "https://github.com/OWNER/REPO. Set it there (it is the only place that names it)."
        )
    return url, branch


def colab_url(path: str, root: Path = ROOT) -> str:
    """Colab URL of ``path`` (relative to the repository root, e.g. ``book/01_x.ipynb``)."""
    url, branch = repository(root)
    if not path.endswith(".ipynb"):
        raise ValueError(f"Colab opens only .ipynb files, got {path!r}: link the paired notebook.")
    return f"{COLAB}/{url.removeprefix('https://github.com/')}/blob/{branch}/{path}"


def install_requirement(root: Path = ROOT) -> str:
    """The pip requirement that installs ``course_lib`` from the configured repository."""
    url, branch = repository(root)
    return f"course_lib @ git+{url}@{branch}"


def setup_cell_source(root: Path = ROOT) -> str:
    """Source of the set-up cell every chapter and exercise notebook starts with."""
    return (
        f"{MARKER} on Google Colab this installs course_lib; elsewhere it does nothing.\n"
        f"# ({ENV_VAR}=<path or pip requirement> installs from there instead, e.g. in tests.)\n"
        "import os, subprocess, sys\n"
        f'if "google.colab" in sys.modules or os.environ.get("{ENV_VAR}"):\n'
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q",\n'
        f'                    os.environ.get("{ENV_VAR}") or "{install_requirement(root)}"],\n'
        "                   check=True)"
    )


# --------------------------------------------------------------------------- what to cover
def _front_matter(text: str) -> dict:
    import yaml

    m = re.match(r"---\n(.*?\n)---\n", text, re.S)
    return (yaml.safe_load(m.group(1)) or {}) if m else {}


def is_notebook_md(path: Path) -> bool:
    """A MyST markdown notebook (jupytext header), as opposed to a plain page."""
    header = _front_matter(path.read_text(encoding="utf-8"))
    return "jupytext" in header or "kernelspec" in header


def chapter_paths(root: Path = ROOT) -> list[Path]:
    """Every MyST notebook ``.md`` in ``_toc.yml``, in table-of-contents order."""
    from .toc import page_path, toc_files

    paths = []
    for name in toc_files(root):
        md = page_path(name, root)
        if md.is_file() and is_notebook_md(md):
            paths.append(md)
    return paths


def exercise_notebook_paths(root: Path = ROOT) -> list[Path]:
    """Every notebook in ``exercises/`` and ``solutions/``."""
    return sorted(p for d in NOTEBOOK_DIRS for p in (Path(root) / d).glob("*.ipynb"))


# --------------------------------------------------------------------------- chapter .md
_CODE_CELL = re.compile(
    r"^(?P<fence>`{3,})\{code-cell\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*\n", re.M | re.S
)


def _md_setup_block(root: Path) -> str:
    return f"```{{code-cell}} ipython3\n:tags: [{SETUP_TAG}]\n\n{setup_cell_source(root)}\n```\n"


def update_chapter_md(text: str, root: Path = ROOT) -> str:
    """The chapter text with the pairing declared in its header and the current set-up cell
    as its first code cell (replacing an older one, or inserted under the title)."""
    m = re.match(r"---\n(.*?\n)---\n", text, re.S)
    if not m or "jupytext:" not in m.group(1):
        raise ValueError(
            "a chapter must start with a jupytext front matter (copy the header of "
            "book/01_why_transformers.md)"
        )
    header = m.group(1)
    if re.search(r"^  formats:.*$", header, re.M):
        header = re.sub(r"^  formats:.*$", f"  formats: {PAIRING}", header, count=1, flags=re.M)
    else:
        header = header.replace("jupytext:\n", f"jupytext:\n  formats: {PAIRING}\n", 1)
    head, body = f"---\n{header}---\n", text[m.end() :]

    block = _md_setup_block(root)
    first = _CODE_CELL.search(body)
    if first and MARKER in first.group("body"):
        body = body[: first.start()] + block + body[first.end() :]
    else:
        title = re.search(r"^# .*\n", body, re.M)
        at = (
            title.end()
            if title and (first is None or title.start() < first.start())
            else (first.start() if first else len(body))
        )
        body = body[:at] + "\n" + block + ("\n" if body[at : at + 1] != "\n" else "") + body[at:]
    return head + body


# --------------------------------------------------------------------------- tab sets
_FENCE = r"(?P<fence>:{3,}|`{3,})"
_TAB_SET = re.compile(_FENCE + r"\{tab-set\}[ \t]*$")
_TAB_ITEM = re.compile(_FENCE + r"\{tab-item\}[ \t]*(?P<label>.*?)[ \t]*$")
_OPTION = re.compile(r":[\w-]+:")
_BLOCK_START = re.compile(r"(\$\$|[-*+>#|`:]|\d+[.)]\s|\{)")  # a line that is not plain prose


def _closes(line: str, fence: str) -> bool:
    """True if ``line`` closes a directive opened with ``fence`` (same character, as long)."""
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _skip_options(lines: list[str], i: int) -> int:
    """Index of the first line after a directive's ``:key: value`` options."""
    while i < len(lines) and _OPTION.match(lines[i]):
        i += 1
    return i


def plain_tab_sets(markdown: str) -> str:
    """``markdown`` with every sphinx-design tab set rewritten as plain Markdown.

    Each ``{tab-item} Label`` becomes its content led by ``**Label.**`` (on the first line of
    prose, or as a paragraph of its own before a list, equation or directive); the tab-set and
    tab-item fences and their options are removed. Text outside tab sets is returned unchanged,
    so a cell without a tab set is untouched and the rewrite is idempotent.
    """
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _TAB_SET.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence, i = m.group("fence"), _skip_options(lines, i + 1)
        items: list[str] = []
        while i < len(lines) and not _closes(lines[i], fence):
            item = _TAB_ITEM.match(lines[i])
            if not item:  # blank lines (or stray text) between the tabs
                if lines[i].strip():
                    items.append(lines[i])
                i += 1
                continue
            label, inner = item.group("label"), item.group("fence")
            i = _skip_options(lines, i + 1)
            body: list[str] = []
            while i < len(lines) and not _closes(lines[i], inner):
                body.append(lines[i])
                i += 1
            i += 1  # the tab-item's closing fence
            while body and not body[0].strip():
                body.pop(0)
            while body and not body[-1].strip():
                body.pop()
            lead = f"**{label.rstrip('.')}.**" if label else ""
            if body and lead and not _BLOCK_START.match(body[0]):
                body[0] = f"{lead} {body[0]}"
            elif lead:
                body = [lead, ""] + body
            items.append("\n".join(body))
        i += 1  # the tab set's closing fence
        out.append("\n\n".join(items))
    return "\n".join(out)


# --------------------------------------------------------------------------- notebooks
def _content_id(source: str, used: set[str]) -> str:
    base = "cell-" + hashlib.sha1(source.encode("utf-8")).hexdigest()[:8]
    cell_id, n = base, 2
    while cell_id in used:
        cell_id, n = f"{base}-{n}", n + 1
    return cell_id


def paired_ipynb_text(md_text: str, previous_ipynb: str | None = None) -> str:
    """The paired notebook for a chapter's MyST text, as the exact file content.

    ``previous_ipynb`` (the current file, if any) supplies the ids of unchanged cells, the
    ``--update`` semantics of jupytext, so an edit changes only the cells it touches. Tab sets
    in Markdown cells are rewritten as plain Markdown (:func:`plain_tab_sets`) for Colab.
    (Memoised: ``./course check`` asks for each pair twice, for itself and its reader notebook.)
    """
    return _paired_ipynb_text(md_text, previous_ipynb)


@functools.lru_cache(maxsize=64)
def _paired_ipynb_text(md_text: str, previous_ipynb: str | None) -> str:
    import jupytext
    import nbformat
    from jupytext.combine import map_outputs_to_inputs

    nb = jupytext.reads(md_text, fmt="md:myst")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = plain_tab_sets(cell.source)
    old = nbformat.reads(previous_ipynb, as_version=4) if previous_ipynb else None
    mapping = map_outputs_to_inputs(nb.cells, old.cells) if old else [None] * len(nb.cells)

    used: set[str] = set()
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    cells = []
    for i, (cell, j) in enumerate(zip(nb.cells, mapping)):
        cell = copy.deepcopy(cell)
        if i == first_code and MARKER in cell.source:
            cell_id = SETUP_CELL_ID
        elif (
            j is not None
            and old.cells[j].get("id")
            and old.cells[j]["id"] not in used
            and old.cells[j]["id"] != SETUP_CELL_ID
        ):
            cell_id = old.cells[j]["id"]
        else:
            cell_id = _content_id(cell.source, used | {SETUP_CELL_ID})
        used.add(cell_id)
        cell["id"] = cell_id
        if cell.cell_type == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)

    meta = {
        "jupytext": {"formats": PAIRING},
        "kernelspec": nb.metadata.get(
            "kernelspec", {"display_name": "Python 3", "language": "python", "name": "python3"}
        ),
        "language_info": {"name": "python"},
    }
    out = nbformat.v4.new_notebook(cells=cells, metadata=meta)
    out.nbformat_minor = 5
    nbformat.validate(out)
    return nbformat.writes(out, version=4) + "\n"


def ensure_setup_cell(nb, root: Path = ROOT):
    """Make the current set-up cell ``nb``'s first code cell (in place; returns ``nb``).

    An existing set-up cell (id ``colab-setup``, or recognised by its first line) gets the
    current source, id and tag, and keeps its place if it already is the first code cell, and
    its other metadata and execution count (solutions are committed executed). Otherwise the
    cell is inserted just before the first code cell, so a markdown title stays on top.
    """
    import nbformat

    source = setup_cell_source(root)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    existing = next(
        (
            i
            for i in code
            if nb.cells[i].get("id") == SETUP_CELL_ID or nb.cells[i].source.startswith(MARKER)
        ),
        None,
    )
    if existing is not None and existing == code[0]:
        cell = nb.cells[existing]
    else:
        if existing is not None:
            cell = nb.cells.pop(existing)
        else:
            cell = nbformat.v4.new_code_cell()
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        nb.cells.insert(code[0] if code else len(nb.cells), cell)
    cell.source = source
    cell["id"] = SETUP_CELL_ID
    cell["outputs"] = []  # it prints nothing; pip's -q keeps it so on Colab too
    tags = cell.metadata.setdefault("tags", [])
    if SETUP_TAG not in tags:
        tags.append(SETUP_TAG)
    if nb.nbformat_minor < 5:
        nb.nbformat_minor = 5
    return nb


# --------------------------------------------------------------------------- sync / check
@dataclass
class Change:
    path: Path
    reason: str
    new_text: str


def _planned(root: Path, only: set[Path] | None) -> list[Change]:
    import nbformat

    changes: list[Change] = []
    for md in chapter_paths(root):
        if only is not None and md.resolve() not in only:
            continue
        text = md.read_text(encoding="utf-8")
        new_md = update_chapter_md(text, root)
        if new_md != text:
            changes.append(Change(md, "set-up cell or pairing header out of date", new_md))
        ipynb = md.with_suffix(".ipynb")
        prev = ipynb.read_text(encoding="utf-8") if ipynb.exists() else None
        new_nb = paired_ipynb_text(new_md, prev)
        if new_nb != prev:
            why = "missing" if prev is None else f"out of sync with {md.name}"
            changes.append(Change(ipynb, f"paired notebook {why}", new_nb))
    for path in exercise_notebook_paths(root):
        if only is not None and path.resolve() not in only:
            continue
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        before = copy.deepcopy(nb)
        ensure_setup_cell(nb, root)
        if nb != before:  # compare content, not formatting: other tools write these files
            changes.append(
                Change(
                    path,
                    "set-up cell missing or out of date",
                    nbformat.writes(nb, version=4) + "\n",
                )
            )
    return changes


def sync(root: Path = ROOT, check: bool = False, only: list[Path] | None = None) -> list[Change]:
    """Update (or with ``check=True`` only report) every file that is out of date."""
    only_set = {Path(p).resolve() for p in only} if only else None
    if only_set:
        # Naming a chapter's .ipynb means its .md (the source).
        only_set |= {p.with_suffix(".md") for p in only_set if p.parent.name == "book"}
    changes = _planned(Path(root), only_set)
    if not check:
        for c in changes:
            c.path.write_text(c.new_text, encoding="utf-8")
    return changes


def links_markdown(root: Path = ROOT) -> str:
    """A Markdown table: each chapter with Colab links to its reader notebook
    (``notebooks/``, ``tools/reader.py``) and its exercises."""
    from .reader import reader_rel
    from .toc import toc_files

    rows = ["| Chapter | Notebook | Exercises |", "| --- | --- | --- |"]
    landing = Path(root) / f"{toc_files(root)[0]}.md"  # the site's front page: not a chapter
    for md in chapter_paths(root):
        if md == landing:
            continue
        title = next(
            (
                line[2:].strip()
                for line in md.read_text(encoding="utf-8").splitlines()
                if line.startswith("# ")
            ),
            md.stem,
        )
        number = re.match(r"(\d\d)_", md.name)  # the site numbers chapters; titles carry none
        if number and md.parent.name == "book":
            title = f"{int(number.group(1))}. {title}"
        rel = reader_rel(md, root)  # the reader notebook: numbers and links written in
        ex = Path(root) / "exercises" / f"{md.stem}.ipynb"
        ex_cell = (
            f"[Open in Colab]({colab_url(f'exercises/{ex.name}', root)})" if ex.exists() else "—"
        )
        rows.append(f"| {title} | [Open in Colab]({colab_url(rel, root)}) | {ex_cell} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.colab",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", type=Path, help="limit to these files")
    parser.add_argument(
        "--check",
        action="store_true",
        help="report, change nothing; exit 1 if anything is out of date",
    )
    parser.add_argument("--links", action="store_true", help="print Colab links as Markdown")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.links:
        print(links_markdown(args.root))
        return 0
    changes = sync(args.root, check=args.check, only=args.paths or None)
    for c in changes:
        print(
            f"{'out of date' if args.check else 'updated'}: "
            f"{c.path.relative_to(args.root.resolve()) if c.path.is_absolute() else c.path}"
            f" ({c.reason})"
        )
    if args.check and changes:
        print("Run `python -m tools.colab` to regenerate them, then commit the result.")
        return 1
    if not changes:
        print("colab: every set-up cell and paired notebook is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
