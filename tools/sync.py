"""The registry of generated files: one list, two commands.

Every file the repository derives from another is listed in :data:`KINDS`, each kind with the
function that computes what its files should hold. ``./course sync`` writes them all (in the
order below: a later kind reads what an earlier one wrote); ``./course check`` writes nothing
and exits 1, naming each stale file and the command that fixes it; ``tests/tools/test_sync.py`` runs
the check in the fast tier. Kinds:

1. ``format``: chapter code cells formatted by ruff (``tools.format_code``);
2. ``colab``: each chapter's Colab set-up cell and paired ``book/**/*.ipynb``, the set-up cell
   of every exercise and solution notebook (``tools.colab``);
3. ``exercises``: ``exercises/*.ipynb`` from ``solutions/`` and their check metadata
   (``tools.exercises``);
4. ``worksheets``: Chapter 5's printable worksheets, ``book/worked/worksheets/``
   (``course_lib.handcalc.sheets``);
5. ``reader``: the reader notebooks ``notebooks/**/*.ipynb`` that Colab and the download button
   open (``tools.reader``), from the sources and ``notebooks/site.json``;
6. ``readme``: the README's table of Colab links (between its ``colab-links`` markers);
7. ``exercise-table``: the table of notebooks in ``exercises/README.md`` (between its
   ``exercise-table`` markers; each exercise's note in parentheses is kept, names, kinds,
   counts, points and the points of the thinking kinds come from the solutions);
8. ``module-map``: CONTRIBUTING.md's module map names every module and folder of the code, and
   only what exists (``tools.module_map``). Checked, not written: its prose is by hand, so a
   stale map fails ``./course sync`` too, saying what to add or remove.

``notebooks/site.json`` (glue values, numbers and anchors of the executed site) is the one
input a build produces: ``./course sync --from-build [BUILD]`` rewrites it from a build folder
(default: ``_build``, else the test build ``test-output/book/_build``) before syncing;
``--compare-build BUILD`` only tells how a build's numbers compare with the published ones
(``./course build`` runs it for its reader: nothing to commit, ``compare_build``).
``--glue-from-run PAGE.md ...`` refreshes only those pages' glue values, by running each page
in a fresh kernel (quicker than a build when a few chapters changed; a new label or figure
number still needs a build).

Adding a kind: write ``def _plan_x(root) -> list[Change]`` and add it to ``KINDS``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from course_lib.grading.spec import THINKING_KINDS

from . import ROOT

__all__ = ["Change", "Kind", "KINDS", "plan", "sync", "check", "main"]


@dataclass
class Change:
    path: Path
    reason: str
    new_text: str | None  # None: the file cannot be generated (the reason says why)


@dataclass
class Kind:
    name: str
    what: str
    plan: Callable[[Path], list[Change]]


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


# --------------------------------------------------------------------------- the kinds
def _plan_format(root: Path) -> list[Change]:
    from .format_code import format_page
    from .toc import page_path, toc_files

    changes = []
    for name in toc_files(root):
        page = page_path(name, root)
        text = _read(page)
        if text is None or "```{code-cell}" not in text:
            continue
        new = format_page(text, root)
        if new != text:
            changes.append(Change(page, "code cells not formatted (ruff)", new))
    return changes


def _plan_colab(root: Path) -> list[Change]:
    from . import colab

    return [Change(c.path, c.reason, c.new_text) for c in colab.sync(root, check=True)]


def _plan_exercises(root: Path) -> list[Change]:
    import copy

    import nbformat

    from .exercises import dumps, make_exercise, sync_checks

    changes = []
    for sol in sorted((root / "solutions").glob("*.ipynb")):
        nb = nbformat.read(sol, as_version=4)
        before = copy.deepcopy(nb)
        if sync_checks(nb) and nb != before:
            changes.append(Change(sol, "check metadata out of date", nbformat.writes(nb) + "\n"))
        out = root / "exercises" / sol.name
        text = dumps(make_exercise(nb))
        if _read(out) != text:
            changes.append(
                Change(out, f"differs from regenerating it from solutions/{sol.name}", text)
            )
    return changes


def _plan_worksheets(root: Path) -> list[Change]:
    import tempfile

    from course_lib.handcalc.sheets import write_worksheets

    changes = []
    folder = root / "book" / "worked" / "worksheets"
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_worksheets(tmp):
            text = path.read_text(encoding="utf-8")
            target = folder / path.name
            if _read(target) != text:
                changes.append(Change(target, "worksheet differs from course_lib.handcalc", text))
    return changes


def _plan_reader(root: Path) -> list[Change]:
    from . import colab, reader

    site = reader.load_site_data(root)
    changes, wanted = [], set()
    for md in colab.chapter_paths(root):
        target = reader.reader_path(md, root)
        wanted.add(target.resolve())
        try:
            text = reader.reader_notebook_text(md, root, site)
        except (ValueError, KeyError) as exc:  # e.g. a glued name the last build did not have
            changes.append(Change(target, f"cannot be generated: {exc}", None))
            continue
        if _read(target) != text:
            why = (
                "missing"
                if not target.exists()
                else f"out of date with {md.relative_to(root).as_posix()} or {reader.SITE_DATA}"
            )
            changes.append(Change(target, f"reader notebook {why}", text))
    folder = root / reader.READER_DIR
    for extra in sorted(folder.rglob("*.ipynb")) if folder.is_dir() else []:
        if extra.resolve() not in wanted and ".ipynb_checkpoints" not in extra.parts:
            changes.append(Change(extra, "reader notebook of no page in _toc.yml (delete it)", ""))
    return changes


def _between(text: str, start: str, end: str, body: str, path: Path) -> str:
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path} lost its markers {start} ... {end}")
    return pattern.sub(lambda _m: f"{start}\n{body}\n{end}", text, count=1)


def _plan_readme(root: Path) -> list[Change]:
    from .reader import links_markdown

    path = root / "README.md"
    text = path.read_text(encoding="utf-8")
    new = _between(
        text, "<!-- colab-links:start -->", "<!-- colab-links:end -->", links_markdown(root), path
    )
    return [Change(path, "the Colab links table is stale", new)] if new != text else []


TABLE_START, TABLE_END = "<!-- exercise-table:start -->", "<!-- exercise-table:end -->"
TABLE_HEAD = "| notebook | exercises | count | points | thinking |\n|---|---|---|---|---|"
# a row: `stem` | names | count | points | thinking points (share)
TABLE_ROW = re.compile(
    r"^\| `(\w+)` \| (.*?) \| (\d+) \| ([\d.]+) \|(?: ([\d.]+) \((\d+) %\) \|)?$", re.M
)
# a name in a row: `name` [kind] (note); rows written before kinds existed had no [kind]
TABLE_NAME = re.compile(r"`(\w+)`(?: \[(\w+)\])?( \([^()]*(?:\([^()]*\)[^()]*)*\))?")


def exercise_table(root: Path, current: str = "") -> str:
    """The table of exercise notebooks: names with their kinds, counts, points and the points
    of the kinds that make the student think (``spec.THINKING_KINDS``), from ``solutions/``;
    the note after an exercise's name (``(vs nn.RNN)``) is kept from ``current``."""
    notes: dict[tuple[str, str], str] = {}
    for row in TABLE_ROW.finditer(current):
        for name, _kind, note in TABLE_NAME.findall(row.group(2)):
            notes[(row.group(1), name)] = note
    rows, count, total, think_total = [TABLE_HEAD], 0, 0.0, 0.0
    from .exercises import exercise_kinds

    for stem, answers in exercise_kinds(root).items():
        names = ", ".join(f"`{n}` [{k}]{notes.get((stem, n), '')}" for n, k, _ in answers)
        points = sum(p for *_, p in answers)
        think = sum(p for _, k, p in answers if k in THINKING_KINDS)
        count, total, think_total = count + len(answers), total + points, think_total + think
        share = round(100 * think / points) if points else 0
        rows.append(f"| `{stem}` | {names} | {len(answers)} | {points:g} | {think:g} ({share} %) |")
    share = round(100 * think_total / total) if total else 0
    rows.append(f"| all | | {count} | {total:g} | {think_total:g} ({share} %) |")
    return "\n".join(rows)


def _plan_exercise_table(root: Path) -> list[Change]:
    path = root / "exercises" / "README.md"
    text = path.read_text(encoding="utf-8")
    m = re.search(re.escape(TABLE_START) + r"\n(.*?)\n" + re.escape(TABLE_END), text, re.S)
    new = _between(
        text, TABLE_START, TABLE_END, exercise_table(root, m.group(1) if m else ""), path
    )
    return [Change(path, "the table of notebooks is stale", new)] if new != text else []


def _plan_module_map(root: Path) -> list[Change]:
    from .module_map import MAP_FILE, problems

    return [Change(root / MAP_FILE, f"the module map {p}: edit it", None) for p in problems(root)]


KINDS: list[Kind] = [
    Kind("format", "chapter code cells formatted (ruff)", _plan_format),
    Kind("colab", "Colab set-up cells and paired book/**/*.ipynb", _plan_colab),
    Kind("exercises", "exercises/*.ipynb from solutions/", _plan_exercises),
    Kind("worksheets", "book/worked/worksheets/ from course_lib.handcalc", _plan_worksheets),
    Kind("reader", "reader notebooks notebooks/**/*.ipynb", _plan_reader),
    Kind("readme", "README.md's Colab table", _plan_readme),
    Kind("exercise-table", "exercises/README.md's table of notebooks", _plan_exercise_table),
    Kind("module-map", "CONTRIBUTING.md's module map (checked, not written)", _plan_module_map),
]


# --------------------------------------------------------------------------- commands
def plan(root: Path = ROOT, kinds: list[str] | None = None) -> list[tuple[Kind, Change]]:
    """Every stale generated file (nothing is written)."""
    root = Path(root)
    return [(k, c) for k in KINDS if not kinds or k.name in kinds for c in k.plan(root)]


def sync(root: Path = ROOT, kinds: list[str] | None = None) -> list[tuple[Kind, Change]]:
    """Write every stale generated file, kind after kind; returns what was written."""
    root = Path(root)
    done = []
    for kind in KINDS:
        if kinds and kind.name not in kinds:
            continue
        for change in kind.plan(root):
            if change.new_text is None:
                done.append((kind, change))
                continue
            if change.new_text == "" and change.path.suffix == ".ipynb":
                change.path.unlink()
            else:
                change.path.parent.mkdir(parents=True, exist_ok=True)
                change.path.write_text(change.new_text, encoding="utf-8")
            done.append((kind, change))
    return done


check = plan


def write_site_data(build: Path, root: Path = ROOT) -> Path:
    from .reader import SITE_DATA, site_data_from_build, site_data_text

    target = Path(root) / SITE_DATA
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(site_data_text(site_data_from_build(build)), encoding="utf-8")
    return target


def write_page_glue(md: Path, root: Path = ROOT) -> Path:
    """Replace one page's glue values in ``notebooks/site.json`` by those of a run of it."""
    from .reader import SITE_DATA, load_site_data, site_data_text, site_glue_from_run

    md = Path(md).resolve()
    page = md.relative_to(Path(root).resolve()).with_suffix("").as_posix()
    data = load_site_data(root)
    data.setdefault("pages", {})[page] = {"glue": site_glue_from_run(md, root)}
    data["pages"] = dict(sorted(data["pages"].items()))
    target = Path(root) / SITE_DATA
    target.write_text(site_data_text(data), encoding="utf-8")
    return target


def default_build(root: Path = ROOT) -> Path:
    from .reader import SITE_BUILD_FILE

    for candidate in (root / "_build", root / "test-output" / "book" / "_build"):
        if (candidate / SITE_BUILD_FILE).is_file():
            return candidate
    raise FileNotFoundError(
        "no build found (_build or test-output/book/_build): run `./course build` first"
    )


def compare_build(build: Path, root: Path = ROOT) -> int:
    """What ``./course build`` tells its reader about the numbers it computed: whether they
    are the published ones (``notebooks/site.json``), differ only as another CPU's do (within
    the spread ``tools.spread`` measured), or differ beyond that (a changed chapter). Asks
    nothing of the reader; exit 1 only in the last case."""
    from .reader import SITE_BUILD_FILE, load_site_data, site_data_from_build, site_data_report
    from .spread import SPREAD_FILE

    if not (build / SITE_BUILD_FILE).is_file():
        print(f"no build in {build} to compare with the published numbers")
        return 0
    problems, within = site_data_report(load_site_data(root), site_data_from_build(build))
    if problems:
        print(
            f"course: this build differs from the published numbers (notebooks/site.json) in "
            f"{len(problems)} place(s) beyond what another CPU changes, e.g. {problems[0]}. "
            "Expected if you edited a chapter; the site you built shows your build's numbers. "
            "(Maintainers publish a build's numbers with `./course sync --from-build`.)"
        )
        return 1
    if within:
        print(
            f"course: your build computed {len(within)} value(s) that a training run measures "
            "a little differently from the published site (your CPU rounds floats its own "
            f"way), each within the spread measured over CPUs and seeds ({SPREAD_FILE}), e.g. "
            f"{within[0]}. The pages you built show your numbers, and their sentences are "
            "computed from them: nothing to do."
        )
        return 0
    print("course: this build computed exactly the published numbers (notebooks/site.json)")
    return 0


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./course sync|check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    parser.add_argument(
        "--from-build",
        nargs="?",
        const="",
        default=None,
        metavar="BUILD",
        help="first rewrite notebooks/site.json from a build folder",
    )
    parser.add_argument(
        "--glue-from-run",
        nargs="+",
        type=Path,
        metavar="PAGE.md",
        help="first refresh these pages' glue values in notebooks/site.json by running them",
    )
    parser.add_argument(
        "--compare-build",
        type=Path,
        metavar="BUILD",
        help="only say how BUILD's numbers compare with the published notebooks/site.json",
    )
    parser.add_argument(
        "--kind",
        action="append",
        choices=[k.name for k in KINDS],
        help="only this kind (repeatable)",
    )
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = args.root
    if args.compare_build is not None:
        return compare_build(args.compare_build, root)
    if args.from_build is not None and not args.check:
        build = Path(args.from_build) if args.from_build else default_build(root)
        print(f"sync: wrote {_rel(write_site_data(build, root), root)} from {build}")
    if args.glue_from_run and not args.check:
        for md in args.glue_from_run:
            print(f"sync: {_rel(write_page_glue(md, root), root)}: glue of {md} from a run")
    if args.check:
        stale = plan(root, args.kind)
        for kind, c in stale:
            print(f"stale [{kind.name}]: {_rel(c.path, root)} ({c.reason})")
        if stale:
            print("Run `./course sync` (or `python -m tools.sync`) and commit the result.")
            return 1
        print(f"check: every generated file is current ({', '.join(k.name for k in KINDS)})")
        return 0
    done = sync(root, args.kind)
    failed = [(kind, c) for kind, c in done if c.new_text is None]
    for kind, c in done:
        verb = "FAILED" if c.new_text is None else "wrote"
        print(f"{verb} [{kind.name}]: {_rel(c.path, root)} ({c.reason})")
    if failed:
        print("sync: some files could not be generated (above, each saying why)")
        if any(kind.name == "reader" for kind, _ in failed):
            print(
                "sync: a new glued value, label or figure needs a build first: "
                "`./course build`, then `./course sync --from-build`"
            )
        return 1
    if not done:
        print("sync: every generated file was already current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
