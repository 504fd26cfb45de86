"""``course-grade --batch ... --similarity`` (issue 34, item 6): copied code is flagged, honest
answers are not.

A class of 04_attention submissions answering ``attention`` (every other exercise left as the
stub): two honest students with their own, different code; one who pasted the course's own
``course_lib.attention.scaled_dot_product_attention`` under the exercise's name; one who hid
the same code in a string it execs; one who reads a source file at run time; and two who
handed in the same code with the names changed. Graded by the real CLI with ``--similarity``;
the report is read back.
"""

from __future__ import annotations

import csv
import inspect
import json

import nbformat
import pytest

from course_lib import attention as course_attention
from course_lib.grading.grade import main
from course_lib.grading.sandbox import probe
from course_lib.grading.similarity import _READS_SOURCE, _with_strings
from tools.exercises import SOLUTIONS, make_submission

STEM = "04_attention"
HEAD = "# EXERCISE attention: your answer goes in this cell (add cells below it if you like).\n"

ERIN = '''def attention(q, k, v, mask=None):
    """softmax(q kᵀ / sqrt(d_k)) v, with einsum."""
    d = q.size(-1)
    logits = torch.einsum("...qd,...kd->...qk", q, k) * d ** -0.5
    if mask is not None:
        logits = torch.where(mask, logits, torch.full_like(logits, -math.inf))
    w = logits.exp() / logits.exp().sum(-1, keepdim=True)
    return torch.einsum("...qk,...kv->...qv", w, v), w
'''

FRANK = """def attention(q, k, v, mask=None):
    out_rows, weight_rows = [], []
    for i in range(q.shape[-2]):
        s = (q[..., i : i + 1, :] * k).sum(-1) / math.sqrt(k.shape[-1])  # (..., T_k)
        if mask is not None:
            s = s.masked_fill(~mask[..., i, :], float("-inf"))
        p = torch.softmax(s, dim=-1)
        weight_rows.append(p)
        out_rows.append((p.unsqueeze(-1) * v).sum(-2))
    return torch.stack(out_rows, -2), torch.stack(weight_rows, -2)
"""

CAROL = """def attention(q, k, v, mask=None):  # <script>alert("x")</script>
    scale = 1.0 / math.sqrt(q.shape[-1])
    raw = torch.matmul(q, k.mT) * scale
    if mask is not None:
        raw = raw + torch.zeros_like(raw).masked_fill(mask.logical_not(), float("-inf"))
    raw = raw - raw.amax(dim=-1, keepdim=True)
    e = torch.exp(raw)
    weights = e / e.sum(dim=-1, keepdim=True)
    result = torch.matmul(weights, v)
    return result, weights
"""
DAVE = (  # Carol's code with every name changed
    CAROL.replace("raw", "z")
    .replace("weights", "probs")
    .replace("result", "y")
    .replace("scale", "factor")
    .replace(" e ", " ex ")
    .replace("(e)", "(ex)")
    .replace("e /", "ex /")
    .replace("e.sum", "ex.sum")
)

COURSE = (
    inspect.getsource(course_attention._check_qkv)
    + "\n\n"
    + inspect.getsource(course_attention.scaled_dot_product_attention)
)
BOB = COURSE + "\n\nattention = scaled_dot_product_attention\n"
GRACE = (  # the same code in a string, run with a spelled-out exec
    f"_code = '''\n{COURSE}'''\n_run = getattr(__builtins__, 'ex' + 'ec')\n_run(_code)\n"
    "attention = scaled_dot_product_attention\n"
)
HEIDI = """import sys
_mod = sys.modules["course" + "_lib.attention"]
_text = open(_mod.__file__).read()
def attention(q, k, v, mask=None):
    return None
"""

CLASS = {
    "erin": ERIN,
    "frank": FRANK,
    "bob": BOB,
    "grace": GRACE,
    "heidi": HEIDI,
    "carol": CAROL,
    "dave": DAVE,
}


def test_code_in_strings_and_source_reading_are_seen():
    assert "def scaled_dot_product_attention" in _with_strings(GRACE).split("run as code?")[1]
    assert _with_strings(ERIN) == ERIN  # a docstring is not code
    assert _READS_SOURCE.search(HEIDI) and not _READS_SOURCE.search(ERIN + FRANK + CAROL)
    assert "<script>" in DAVE and "probs" in DAVE and "raw" not in DAVE


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if probe()[0] is None:
        pytest.skip("no bubblewrap sandbox here")
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    folder = tmp_path_factory.mktemp("similarity")
    for name, code in CLASS.items():
        nb = make_submission(sol, {"attention": {"code": HEAD + code}})
        nbformat.write(nb, folder / f"{name}_{STEM}.ipynb")
    nbformat.write(make_submission(sol), folder / f"untouched_{STEM}.ipynb")
    out = folder / "_grades"
    args = ["--batch", str(folder), "--out", str(out), "--solutions", str(SOLUTIONS)]
    assert main([*args, "--time-limit", "60", "--similarity"]) == 0
    rows = list(csv.DictReader(open(out / "similarity" / "similarity.csv", encoding="utf-8")))
    return {r["submission"].split("_")[0]: r for r in rows}, out / "similarity"


@pytest.mark.slow
def test_copied_and_shared_code_is_flagged_and_honest_code_is_not(report):
    rows, _ = report
    assert set(rows) == set(CLASS), rows.keys()  # the untouched notebook answered nothing
    flagged = {name for name, r in rows.items() if r["flagged"] == "True"}
    assert flagged == {"bob", "grace", "heidi", "carol", "dave"}, {
        n: (r["course_source"], r["course_share"], r["classmate"], r["classmate_share"])
        for n, r in rows.items()
    }
    for name in ("bob", "grace"):  # Grace's share counts her wrapper too
        assert rows[name]["course_source"] == "course_lib/attention.py", rows[name]
        assert float(rows[name]["course_share"]) > (0.9 if name == "bob" else 0.6)
    assert rows["heidi"]["reads_source"] == "True"
    assert (
        rows["carol"]["classmate"].startswith("dave_")
        and float(rows["carol"]["classmate_share"]) > 0.9
    )
    assert rows["dave"]["classmate"].startswith("carol_")
    for name in ("erin", "frank"):
        assert (
            float(rows[name]["course_share"]) < 0.5 and float(rows[name]["classmate_share"]) < 0.5
        )


@pytest.mark.slow
def test_the_report_shows_the_copies_and_escapes_what_students_wrote(report):
    rows, folder = report
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page  # Carol's, escaped
    assert "scaled_dot_product_attention" in page and "class='hl'" in page  # Bob's copy, marked
    data = json.loads((folder / "similarity.json").read_text())
    assert data["rule"]["flag_share"] > 0 and len(data["answers"]) == len(CLASS)
