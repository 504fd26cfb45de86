"""The chapters' sentences that state a computed fact agree with their numbers, on any machine
(``tools/claims.py``).

Fast: every claim quotes a sentence its page still has; every claim holds on the published
numbers (``notebooks/site.json``) and on every run of the CPU-spread measurement
(``course_lib/results/isa_spread.json``: simulated instruction sets and other seeds); every
check fails when the numbers it reads are changed to contradict its sentence; and the class is
closed: a sentence that quotes a value a training run measures, next to a word of comparison
("most", "worse", "none"...), has a claim or says its comparison through a glued phrase.

Slow: every claim holds on each build the tests make (native, and the simulated AVX2 laptop).
"""

from __future__ import annotations

import copy
import re

import pytest
from build_support import get_build, page_builds

from tools import ROOT, reader
from tools.claims import CLAIMS, Values, check_claims, normalise
from tools.spread import cpu_pages, load_spread, parse_number, tolerances

CLAIM_PAGES = sorted(CLAIMS)


def _source(page: str) -> str:
    return (ROOT / f"{page}.md").read_text(encoding="utf-8")


def _published(page: str) -> dict:
    return reader.load_site_data(ROOT)["pages"][page]["glue"]


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_every_claim_quotes_a_sentence_of_its_page(page):
    text = normalise(_source(page))
    missing = [c.quote for c in CLAIMS[page] if normalise(c.quote) not in text]
    assert not missing, f"{page} no longer says (reword the claim with its sentence): {missing}"


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_claims_hold_on_the_published_numbers(page):
    assert check_claims(page, _published(page)) == []


@pytest.mark.parametrize("page", [p for p in CLAIM_PAGES if p in load_spread()["pages"]])
def test_claims_hold_on_every_simulated_cpu_and_seed(page):
    """A typed sentence must hold wherever the page runs: on every run of the measurement."""
    failures = [
        f"[{run}] {f}"
        for run, out in load_spread()["pages"][page].items()
        for f in check_claims(page, out["glue"])
    ]
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("page, build", page_builds(CLAIM_PAGES))
def test_claims_hold_on_each_build(page, build, request):
    data = reader.site_data_from_build(get_build(request, build).path)
    assert check_claims(page, data["pages"][page]["glue"]) == []


# --------------------------------------------------------------------------- the checks can fail
def _set(glue: dict, key: str, value) -> dict:
    """``glue`` with ``key`` glued as ``value`` would be (a string keeps its quotes)."""
    out = copy.deepcopy(glue)
    old = out[key]["text/plain"]
    if isinstance(value, (int, float)) and old[:1] in "'\"":
        text = repr(f"{value:,}" if isinstance(value, int) else f"{value:.4g}")
    else:
        text = repr(value) if isinstance(value, str) else str(value)
    out[key] = {"text/plain": text}
    return out


def _perturbations(glue: dict, key: str):
    """Other values ``key`` might have had: numbers scaled and shifted, texts swapped for the
    page's other texts or emptied."""
    text = Values(glue).text(key)
    number = parse_number(text)
    if number is not None:
        whole = float(number).is_integer()
        for x in (0, number * 0.5, number * 2, number * 10, number + 1, number - 1, -number - 1):
            yield int(x) if whole else x
        return
    yield ""
    for other in sorted(glue):
        t = Values(glue).text(other)
        if other != key and parse_number(t) is None and t != text:
            yield t


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_each_check_fails_when_its_numbers_contradict_its_sentence(page):
    """For every claim, some change of one value it reads makes the check fail: no check is
    true whatever the numbers say."""
    glue = _published(page)
    vacuous = []
    for claim in CLAIMS[page]:
        v = Values(glue)
        claim.check(v)
        caught = any(
            check_claims_one(claim, _set(glue, key, value))
            for key in sorted(v.read)
            for value in _perturbations(glue, key)
        )
        if not caught:
            vacuous.append(claim.quote)
    assert not vacuous, f"{page}: checks that no change of their values fails: {vacuous}"


def check_claims_one(claim, glue) -> bool:
    """True when ``claim`` fails (or cannot read its values) on ``glue``."""
    try:
        return not claim.check(Values(glue))
    except (KeyError, ValueError, ZeroDivisionError):
        return True


def test_a_contradicted_commonest_kind_is_caught():
    """Chapter 14 on another machine: the early model's errors are mostly agreement errors,
    but the sentence (from a stale build) still names another kind: the check says which."""
    page = "book/14_translation"
    glue = _published(page)
    counts = {k: int(Values(glue).num(f"early_n_{k}")) for k in ("agreement", "hundreds")}
    bumped = max(counts.values()) + 5
    changed = _set(glue, "early_n_agreement", bumped)
    changed = _set(changed, "early_agree", bumped)
    total = int(Values(glue).num("early_wrong")) + bumped - counts["agreement"]
    changed = _set(changed, "early_wrong", total)
    failures = check_claims(page, changed)
    assert len(failures) == 1 and "top_kind_phrase" in failures[0], failures
    # and a glued value contradicting a typed sentence: a model that changed a third of its
    # outputs under beam search is not "so confident"
    n_test = int(Values(glue).num("n_test"))
    failures = check_claims(page, _set(glue, "beam_changed", n_test // 3))
    assert any("so confident" in f for f in failures), failures


def test_a_claim_that_reads_a_missing_value_fails():
    page = "book/14_translation"
    glue = {k: v for k, v in _published(page).items() if k != "n_wrong"}
    assert any("n_wrong" in f for f in check_claims(page, glue))


# --------------------------------------------------------------------------- the class
# Words that compare or quantify: a sentence with one of them next to a measured value states
# a computed fact that another machine's numbers could contradict.
COMPARISON = re.compile(
    r"\b(most|mostly|commonest|least|none|no more|every time|always|never|almost|few|"
    r"fewer|more than|less than|better|worse|best|worst|beats?|wins?|won|loses|higher|"
    r"lower|above|below|close|closer|small|smaller|large|larger|only|all but|exceeds?|"
    r"falls?|rises?|drops?|grows?|nearly|barely|hardly|same|equal|twice|half)\b",
    re.I,
)
# sentences with such a word that state no computed comparison, each with its reason
NOT_A_CLAIM: dict[str, str] = {}


def _sentences(md: str) -> list[str]:
    """The prose of a MyST page (code cells and their options removed; figure captions and
    alt texts kept), one sentence at a time, whitespace normalised."""
    prose = re.sub(
        r"```\{code-cell\}[^\n]*\n(---\n.*?\n---\n)?.*?```", r"\n\n\1\n\n", md, flags=re.S
    )
    return [
        s
        for paragraph in re.split(r"\n\s*\n", prose)
        for s in re.split(r"(?<=[.;:!?])\s+(?=[A-Z*({])", normalise(paragraph))
        if s
    ]


def _measured_keys(page: str) -> set[str]:
    return {key for (p, key), t in tolerances().items() if p == page and t.kind != "timing"}


@pytest.mark.parametrize("page", cpu_pages())
def test_every_comparison_next_to_a_measured_value_is_checked(page):
    """A sentence that quotes a value a training run measures and compares or quantifies
    ("most", "worse", "none", "falls") is covered by a claim, unless its comparison is itself
    a glued phrase (the only words of comparison sit inside glue) or it is in NOT_A_CLAIM."""
    measured = _measured_keys(page)
    quotes = [normalise(c.quote) for c in CLAIMS.get(page, ())]
    unchecked = []
    for sentence in _sentences(_source(page)):
        keys = set(re.findall(r"\{glue:text\}`([^`:]+)", sentence))
        if not keys & measured:
            continue
        typed = re.sub(r"\{glue:text\}`[^`]+`", " ", sentence)
        if not COMPARISON.search(typed):
            continue
        if any(q in sentence or sentence in q for q in quotes):
            continue
        if sentence in NOT_A_CLAIM:
            continue
        unchecked.append(sentence)
    assert not unchecked, (
        f"{page}: sentences that compare measured values with typed words and have no claim in"
        " tools/claims.py (glue the comparison, add a claim, or say in NOT_A_CLAIM why it is"
        " none):\n  " + "\n  ".join(unchecked)
    )
