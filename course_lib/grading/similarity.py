"""``course-grade --batch ... --similarity``: each answer compared with the course's own code and
with the classmates' answers, so that an instructor sees copied code: the one route no grader
can refuse (a student may paste, or exec, the course's own implementation under another name;
it computes the right values).

Compared with copydetect (Stanford MOSS's winnowing: pygments tokens, names and strings
normalised, k-gram fingerprints), answer by answer (the code cells of one exercise of one
submission, as the grader extracts them):

- **the course's sources**: every module of ``course_lib`` but its grader, ``torch.nn
  .functional`` (where PyTorch's Python code is), and the solutions' answers (a leaked
  solution);
- **the classmates**: every other submission's answer to the same exercise.

Code hidden in a string (``exec("...")``) is compared too: a string literal that parses as
Python is appended to the answer's code before fingerprinting. What every student is given
(the answer cell's template, the setup and check cells) is boilerplate: its fingerprints never
count. An answer is flagged when ``MIN_OVERLAP`` characters or more of its normalised code, and
at least ``FLAG_SHARE`` of it, match one source or one classmate. An answer that mentions
``course_lib`` or reads source at run time (``__file__``, ``getsource``, ``read_text``...) is
marked too: that route copies no text.

The report is ``similarity/report.html`` (each flagged answer beside its match, the copied code
highlighted; everything from a submission escaped), ``similarity/similarity.csv`` (one row per
answer: its best match among the course's sources and among the classmates) and
``similarity/similarity.json``.
"""

from __future__ import annotations

import ast
import csv
import html
import io
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from .notebooks import Unreadable, extract_answers, parse_notebook
from .spec import BEGIN, END, NotebookSpec, meta, parse, role, stub_answer

__all__ = [
    "Match",
    "AnswerSimilarity",
    "reference_sources",
    "compare",
    "write_report",
    "FLAG_SHARE",
    "MIN_OVERLAP",
]

NOISE = 25  # copydetect's noise threshold: the shortest match that counts (normalised chars)
GUARANTEE = 30  # every match this long is found (winnowing window = GUARANTEE - NOISE + 1)
FLAG_SHARE = 0.5  # flagged: at least this share of the answer's code matches one file...
MIN_OVERLAP = 100  # ...and at least this many normalised characters of it
_READS_SOURCE = re.compile(
    r"course_lib|__file__|getsource|getsourcelines|read_text|read_bytes|linecache|__loader__"
)


@dataclass
class Match:
    """The best match of an answer in one group of files: the file, the share of the answer's
    normalised code found in it, and how many characters that is."""

    source: str = ""
    share: float = 0.0
    overlap: int = 0


@dataclass
class AnswerSimilarity:
    submission: str
    notebook: str
    exercise: str
    course: Match = field(default_factory=Match)
    classmate: Match = field(default_factory=Match)
    reads_source: bool = False
    flagged: bool = False


def _fingerprint(name: str, code: str, boilerplate=None):
    from copydetect import CodeFingerprint

    return CodeFingerprint(
        f"{name}.py",
        NOISE,
        GUARANTEE - NOISE + 1,
        boilerplate,
        language="python",
        fp=io.StringIO(code),
    )


def _with_strings(code: str) -> str:
    """The answer's code, and after it every string literal in it that parses as Python (code
    kept in a string to be exec'd)."""
    try:
        tree = parse(code)
    except (SyntaxError, ValueError):
        return code
    hidden = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            try:
                parse(node.value)
            except (SyntaxError, ValueError):
                continue
            hidden.append(node.value)
    return code + "".join(f"\n# string literal run as code?\n{h}\n" for h in hidden)


def _solution_regions(source: str) -> str:
    """The code between the solution markers of an answer cell."""
    out, inside = [], False
    for line in source.split("\n"):
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END:
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out)


def _course_sources() -> dict[str, str]:
    """{label: code} of course_lib's modules (not its grader) and torch.nn.functional."""
    import torch.nn.functional

    root = Path(__file__).resolve().parents[1]  # course_lib/
    out = {
        f"course_lib/{p.relative_to(root).as_posix()}": p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.py"))
        if "grading" not in p.relative_to(root).parts
    }
    out["torch/nn/functional.py"] = Path(torch.nn.functional.__file__).read_text(encoding="utf-8")
    return out


def reference_sources(solutions: dict[str, object]) -> tuple[dict[str, str], list[str]]:
    """({label: code} of the course's sources and of ``solutions``' answers ({stem: solution
    notebook}), [what every student is given: the answer cells' templates, the setup and check
    cells])."""
    sources = _course_sources()
    given = []
    for stem, sol in solutions.items():
        for cell in sol.cells:
            if cell.cell_type != "code":
                continue
            if role(cell) == "answer":
                ex = meta(cell)["exercise"]
                sources[f"solutions/{stem}.ipynb: {ex}"] = _solution_regions(cell.source)
                given.append(stub_answer(cell.source, ex))
            else:
                given.append(cell.source)
    return sources, given


def compare(
    answers: dict[tuple[str, str, str], str],
    sources: dict[str, str],
    given: list[str],
) -> list[AnswerSimilarity]:
    """One AnswerSimilarity per (submission, notebook stem, exercise) of ``answers`` (the
    answer's code), against ``sources`` ({label: code}) and the classmates' answers to the same
    exercise, the code every student is given (``given``) not counting."""
    import numpy as np
    from copydetect import CodeFingerprint, compare_files

    boiler = np.unique(
        np.array(
            [
                h
                for c in given
                for h in CodeFingerprint(
                    "given.py", NOISE, 1, language="python", fp=io.StringIO(c)
                ).hashes
            ],
            dtype=np.int64,
        )
    )
    refs = {k: _fingerprint(k, v, boiler) for k, v in sources.items()}
    prints = {
        key: _fingerprint(key[0], _with_strings(code), boiler) for key, code in answers.items()
    }
    out = []
    for key, fp in prints.items():
        sub, stem, ex = key
        res = AnswerSimilarity(sub, stem, ex, reads_source=bool(_READS_SOURCE.search(answers[key])))
        for group, candidates in (
            ("course", refs.items()),
            ("classmate", ((o[0], p) for o, p in prints.items() if o != key and o[1:] == key[1:])),
        ):
            best = Match()
            for label, other in candidates:
                overlap, (share, _), _ = compare_files(fp, other)
                if (share, overlap) > (best.share, best.overlap):
                    best = Match(label, round(float(share), 3), int(overlap))
            setattr(res, group, best)
        res.flagged = res.reads_source or any(
            m.share >= FLAG_SHARE and m.overlap >= MIN_OVERLAP for m in (res.course, res.classmate)
        )
        out.append(res)
    return sorted(out, key=lambda r: (not r.flagged, r.submission, r.notebook, r.exercise))


def _answers_of(name: str, data: bytes, sol, spec: NotebookSpec) -> dict[str, str]:
    """{exercise: the submission's answer code} for every exercise it answered (not the stub)."""
    nb = parse_notebook(data, name)
    found, _ = extract_answers(nb, spec, sol)
    stubs = {
        meta(c)["exercise"]: stub_answer(c.source, meta(c)["exercise"]).strip()
        for c in sol.cells
        if role(c) == "answer"
    }
    return {
        ex: "\n\n".join(cells)
        for ex, cells in found.items()
        if cells and "\n\n".join(cells).strip() != stubs.get(ex)
    }


def write_report(
    submissions: dict[str, tuple[str, bytes]],
    specs: dict[str, NotebookSpec],
    solutions_dir: Path,
    out: Path,
) -> list[AnswerSimilarity]:
    """Compare every answer of ``submissions`` ({shown name: (solution stem, notebook bytes)})
    and write ``out/report.html``, ``out/similarity.csv`` and ``out/similarity.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sols = {
        stem: nbformat.read(Path(solutions_dir) / f"{stem}.ipynb", as_version=4) for stem in specs
    }
    answers: dict[tuple[str, str, str], str] = {}
    for name, (stem, data) in submissions.items():
        try:
            for ex, code in _answers_of(name, data, sols[stem], specs[stem]).items():
                answers[(name, stem, ex)] = code
        except Unreadable:
            continue
    sources, given = reference_sources(sols)
    results = compare(answers, sources, given)
    rows = [
        {
            "submission": r.submission,
            "notebook": r.notebook,
            "exercise": r.exercise,
            "flagged": r.flagged,
            "course_source": r.course.source,
            "course_share": r.course.share,
            "course_overlap": r.course.overlap,
            "classmate": r.classmate.source,
            "classmate_share": r.classmate.share,
            "classmate_overlap": r.classmate.overlap,
            "reads_source": r.reads_source,
        }
        for r in results
    ]
    with open(out / "similarity.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["submission"])
        writer.writeheader()
        writer.writerows(rows)
    (out / "similarity.json").write_text(
        json.dumps(
            {
                "rule": {"flag_share": FLAG_SHARE, "min_overlap": MIN_OVERLAP, "noise": NOISE},
                "answers": [asdict(r) for r in results],
            },
            indent=1,
        )
    )
    (out / "report.html").write_text(_html(results, answers, sources), encoding="utf-8")
    return results


def _highlighted(code: str, other: str, css: str) -> str:
    from copydetect import compare_files
    from copydetect.utils import highlight_overlap

    a, b = _fingerprint("a", code), _fingerprint("b", other)
    _, _, (slices, _) = compare_files(a, b)
    if len(slices) == 0:
        return html.escape(code)
    text, _ = highlight_overlap(
        a.raw_code, slices, f"<span class='{css}'>", "</span>", escape_html=True
    )
    return text


def _html(
    results: list[AnswerSimilarity],
    answers: dict[tuple[str, str, str], str],
    sources: dict[str, str],
) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Similarity report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px}.flag{background:#fee}"
        "pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:30em}"
        ".hl{background:#fbb}</style></head><body>",
        "<h1>Similarity of answers</h1>",
        f"<p>copydetect (winnowing, k = {NOISE}); flagged: {FLAG_SHARE:.0%} or more of an "
        f"answer's normalised code, at least {MIN_OVERLAP} characters, found in one course "
        "source or one classmate's answer, or an answer that reads source at run time.</p>",
        "<table><tr><th>submission</th><th>exercise</th><th>best course source</th>"
        "<th>share</th><th>best classmate</th><th>share</th><th>reads source</th></tr>",
    ]
    for r in results:
        parts.append(
            f"<tr class='{'flag' if r.flagged else ''}'><td>{e(r.submission)}</td>"
            f"<td>{e(r.notebook)}: {e(r.exercise)}</td><td>{e(r.course.source)}</td>"
            f"<td>{r.course.share:.0%}</td><td>{e(r.classmate.source)}</td>"
            f"<td>{r.classmate.share:.0%}</td><td>{'yes' if r.reads_source else ''}</td></tr>"
        )
    parts.append("</table>")
    for r in results:
        if not r.flagged:
            continue
        code = answers[(r.submission, r.notebook, r.exercise)]
        m = max((r.course, r.classmate), key=lambda m: m.share)
        other = sources.get(m.source) or answers.get((m.source, r.notebook, r.exercise), "")
        parts.append(
            f"<h2>{e(r.submission)}: {e(r.notebook)}, {e(r.exercise)}</h2>"
            f"<p>{m.share:.0%} of the answer ({m.overlap} normalised characters) matches "
            f"{e(m.source) or 'nothing'}{'; it reads source at run time' if r.reads_source else ''}"
            f".</p><pre>{_highlighted(code, other, 'hl') if other else e(code)}</pre>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
