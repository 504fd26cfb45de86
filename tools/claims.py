"""The chapters' sentences that state a computed fact, checked against the numbers beside them.

A training run's numbers differ from one CPU to the next (``tools.spread``), so a sentence
such as "the commonest kind is *after mille*" or "fusing the two rankings is worse than BM25
alone" can be true on the machine that built the site and false on a reader's. Every such
sentence says its fact in one of two ways:

- through a **glued phrase** the chapter computes from its own numbers (``glue("top_kind",
  ...)``, "within a point of", "none of the 1,000 outputs"): it reads right on any machine,
  and a claim here checks that the phrase agrees with the glued numbers it summarises;
- in **typed words** whose truth holds with a margin wider than any CPU moves the numbers
  (the validation loss "falls" over a run): a claim here states it as a test of the glued
  numbers, and holds on every run of the CPU-spread measurement
  (``course_lib/results/isa_spread.json``), not only on the published build.

``CLAIMS`` lists them per page: each ``Claim`` quotes its sentence as the source has it (so
the sentence cannot change without its claim) and checks the page's glued values.
``tests/test_claims.py`` runs every claim on the published numbers, on every run of the
measurement and on every build the tests make (native and simulated AVX2), shows that each
check fails when the numbers it reads contradict its sentence, and enumerates the class: a
sentence that quotes a measured value next to a comparison must have a claim.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable

from .spread import glue_text, parse_number

__all__ = ["Claim", "Values", "CLAIMS", "check_claims", "normalise"]


class Values:
    """A page's glued values, read as the prose shows them: ``v.num("val_loss")`` (a number),
    ``v.text("top_kind")`` (the text without quotes); records which keys a check read."""

    def __init__(self, glue: dict[str, dict]):
        self.glue = glue
        self.read: set[str] = set()

    def text(self, key: str) -> str:
        self.read.add(key)
        if key not in self.glue:
            raise KeyError(key)
        raw = glue_text(self.glue[key])
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw
        return value if isinstance(value, str) else raw

    def num(self, key: str) -> float:
        value = parse_number(self.text(key))
        if value is None:
            raise ValueError(f"glued {key} is {self.text(key)!r}, not a number")
        return value


@dataclass(frozen=True)
class Claim:
    """One sentence's fact: ``quote``, words of the sentence as in the page's source (glue
    roles included; whitespace is normalised); ``check``, true when the glued values agree
    with it."""

    quote: str
    check: Callable[[Values], bool]


def normalise(text: str) -> str:
    return " ".join(text.split())


def check_claims(page: str, glue: dict[str, dict]) -> list[str]:
    """The claims of ``page`` that its glued values (key -> {mime: text}) contradict, each
    as a line naming the sentence and the values it read."""
    failures = []
    for claim in CLAIMS.get(page, ()):
        v = Values(glue)
        try:
            ok = bool(claim.check(v))
        except KeyError as e:
            failures.append(f"{page}: {claim.quote!r} reads {e}, which the page does not glue")
            continue
        if not ok:
            shown = ", ".join(f"{k}={glue_text(glue[k])}" for k in sorted(v.read) if k in glue)
            failures.append(f"{page}: {claim.quote!r} is contradicted by {shown}")
    return failures


def _first_number(text: str) -> float | None:
    m = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    return float(m.group().replace(",", "")) if m else None


def _signed_gap(phrase: str, more: str, fewer: str, same: str) -> float | None:
    """The signed gap a phrase such as "2.4 points more than greedy" states (``same``: zero)."""
    if phrase.startswith(same):
        return 0.0
    gap = _first_number(phrase)
    if gap is None:
        return None
    return gap if more in phrase else (-gap if fewer in phrase else None)


# --------------------------------------------------------------------------- Chapter 14
_KINDS = {
    "agreement": "agreement",
    "et": "et",
    "mille": "mille",
    "thousands": "before mille",
    "hundreds": "after mille",
    "both": "both sides",
}


def _commonest_kind(v: Values) -> bool:
    counts = {label: int(v.num(f"early_n_{k}")) for k, label in _KINDS.items()}
    top = max(counts.values())
    named = re.findall(r"\*([^*]+)\*", v.text("top_kind_phrase"))
    return (
        sum(counts.values()) == v.num("early_wrong")
        and counts["agreement"] == v.num("early_agree")
        and counts["et"] == v.num("early_et")
        and set(named) == {label for label, n in counts.items() if n == top}
        and _first_number(v.text("top_kind_phrase")) == top
    )


def _beam_gain(v: Values) -> bool:
    gap = _signed_gap(v.text("beam_gain"), "more than", "fewer than", "no more than")
    return gap is not None and abs(gap - (v.num("early_beam") - v.num("early_greedy"))) < 0.15


def _a0_phrase(v: Values) -> bool:
    gap = v.num("early_a0") - v.num("early_beam")
    phrase = v.text("a0_phrase")
    if phrase.startswith("within a point"):
        return abs(gap) < 1.05
    stated = _signed_gap(phrase, "above", "below", "within")
    return stated is not None and abs(stated - gap) < 0.15


def _beam_changed(v: Values) -> bool:
    changed, phrase = int(v.num("beam_changed")), v.text("beam_changed_phrase")
    return phrase.startswith("none of") if changed == 0 else phrase.startswith(f"{changed:,} of")


def _digits(v: Values) -> bool:
    own, sentence = int(v.num("digits_own")), v.text("digit_sentence")
    sept = f"*sept* reads *{v.text('sept_top')}*" in sentence
    if own == 9:
        return sept and sentence.startswith("Every digit word")
    lead = "Most" if own > 4.5 else "Only"
    return sept and sentence.startswith(f"{lead} {own} of the nine")


def _mille(v: Values) -> bool:
    top, sentence = v.text("mille_top"), v.text("mille_sentence")
    if top == "thousand":
        return "*mille* reads *thousand* most" in sentence and "another matter" not in sentence
    return f"*mille* reads *{top}* most, not *thousand*" in sentence


CLAIMS: dict[str, tuple[Claim, ...]] = {
    "book/14_translation": (
        Claim(
            "the validation loss falls from {glue:text}`val_first` after",
            lambda v: v.num("val_loss") < v.num("val_first"),
        ),
        Claim(
            "the validation loss drops by more than two orders of magnitude over the run",
            lambda v: v.num("val_first") / v.num("val_loss") > 100,
        ),
        Claim(
            "a beam of one for {glue:text}`found_1`",  # a beam of one keeps greedy's path
            lambda v: v.num("found_1") >= v.num("found_greedy"),
        ),
        Claim(
            "finds the best output every time ({glue:text}`found_27`)",
            lambda v: v.num("found_27") == v.num("n_models"),
        ),
        Claim(
            "with $\\alpha = 2$, {glue:text}`len_a2`. Every extra word multiplies",
            lambda v: v.num("len_a2") > v.num("len_a0"),
        ),
        Claim("and it changes {glue:text}`beam_changed_phrase`", _beam_changed),
        Claim(
            "is so confident that {glue:text}`beam_confident`",
            lambda v: (
                v.num("beam_changed") <= 0.02 * v.num("n_test")
                and (v.num("beam_changed") == 0) == v.text("beam_confident").startswith("the most")
            ),
        ),
        Claim(
            "BLEU is high even where exact match is not",
            lambda v: v.num("bleu_greedy") > 90,
        ),
        Claim("{glue:text}`digit_sentence`", _digits),
        Claim(
            "so the model tells the two apart by reading different English words",
            lambda v: v.num("quatre_four") >= 10 and v.num("quatre_tens") >= 10,
        ),
        Claim(
            "in French the English tens word decides it",
            lambda v: v.num("vingt_tens") >= 10,
        ),
        Claim("{glue:text}`mille_sentence`", _mille),
        Claim(
            "The trained model makes few mistakes",
            lambda v: v.num("n_wrong") <= 0.05 * v.num("n_test"),
        ),
        Claim("{glue:text}`beam_gain`", _beam_gain),
        Claim("{glue:text}`top_kind_phrase`", _commonest_kind),
        Claim("{glue:text}`a0_phrase`", _a0_phrase),
        Claim(
            "a model this sure of itself seldom prefers a shorter wrong output",
            lambda v: abs(v.num("early_a0") - v.num("early_beam")) < 2,
        ),
        Claim(
            "Our translator gets most held-out numbers exactly right",
            lambda v: v.num("em_greedy") > 50,
        ),
    ),
}
