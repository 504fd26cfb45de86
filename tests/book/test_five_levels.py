"""Every chapter 1-8 explains its central idea at five levels (issue 18), in one tab set; a
later chapter that has the section (Chapter 14) is held to the same shape.

The section is a sphinx-design tab set with class ``five-levels`` and the tabs Child,
Teenager, Undergraduate, Graduate and Researcher, in that order, each short and non-empty;
the two first levels use no mathematics, and the Researcher tab cites a work of
``book/references.bib``. The paired notebook (what Colab opens) shows the tabs as plain
paragraphs, never as raw ``{tab-set}`` fences.
"""

from __future__ import annotations

import re

import pytest

from tools import ROOT

CHAPTERS = sorted((ROOT / "book").glob("0[1-8]_*.md"))
# a later chapter that has the section (Chapter 14 does) is held to the same shape
LATER = sorted(
    p
    for p in (ROOT / "book").glob("[0-9][0-9]_*.md")
    if p not in CHAPTERS and "\n## The idea at five levels\n" in p.read_text(encoding="utf-8")
)
LEVELS = ["Child", "Teenager", "Undergraduate", "Graduate", "Researcher"]
TAB_SET = re.compile(
    r"^(?P<fence>:{4,})\{tab-set\}[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S
)
TAB_ITEM = re.compile(
    r"^(?P<fence>:{3})\{tab-item\}[ \t]*(?P<label>.*?)[ \t]*\n(?P<body>.*?)"
    r"^(?P=fence)[ \t]*$",
    re.M | re.S,
)
CITE = re.compile(r"\{cite:[pt]\}`([^`]+)`")


def _bib_keys() -> set[str]:
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    return set(re.findall(r"^@\w+\{([^,\s]+),", bib, re.M))


def _five_level_sets(text: str) -> list[str]:
    """Bodies of the tab sets with class five-levels."""
    return [
        m.group("body")
        for m in TAB_SET.finditer(text)
        if re.search(r"^:class:.*\bfive-levels\b", m.group("body"), re.M)
    ]


def test_every_chapter_of_parts_one_and_two_is_covered():
    assert [p.name[:2] for p in CHAPTERS] == [f"0{i}" for i in range(1, 9)]


@pytest.mark.parametrize("md", CHAPTERS + LATER, ids=lambda p: p.stem)
def test_chapter_has_one_five_level_tab_set(md):
    text = md.read_text(encoding="utf-8")
    assert text.count("\n## The idea at five levels\n") == 1, f"{md.name}: no (or two) sections"
    sets = _five_level_sets(text)
    assert len(sets) == 1, f"{md.name}: {len(sets)} five-levels tab sets, expected exactly 1"
    section = text.index("\n## The idea at five levels\n")
    assert text.index(sets[0]) > section, f"{md.name}: the tab set is not in its section"
    assert "\n## " not in text[section + 1 : text.index(sets[0])], (
        f"{md.name}: another section starts between the heading and the tab set"
    )

    items = [(m.group("label"), m.group("body").strip()) for m in TAB_ITEM.finditer(sets[0])]
    assert [label for label, _ in items] == LEVELS, (
        f"{md.name}: tabs {items and [label for label, _ in items]}"
    )
    for label, body in items:
        words = len(body.split())
        assert 30 <= words <= 150, f"{md.name}, {label}: {words} words (keep each level short)"
    for label, body in items[:2]:
        assert "$" not in body, f"{md.name}, {label}: mathematics starts at Undergraduate"

    researcher = items[-1][1]
    cited = [key.strip() for group in CITE.findall(researcher) for key in group.split(",")]
    assert cited, f"{md.name}: the Researcher tab cites nothing ({{cite:p}} or {{cite:t}})"
    missing = set(cited) - _bib_keys()
    assert not missing, f"{md.name}: cited keys not in book/references.bib: {sorted(missing)}"


@pytest.mark.parametrize("md", CHAPTERS + LATER, ids=lambda p: p.stem)
def test_paired_notebook_shows_the_levels_as_plain_markdown(md):
    ipynb = md.with_suffix(".ipynb").read_text(encoding="utf-8")
    assert "{tab-set}" not in ipynb and "{tab-item}" not in ipynb, (
        f"{md.with_suffix('.ipynb').name}: raw tab-set fences (run `python -m tools.colab`)"
    )
    for level in LEVELS:
        assert f"**{level}.**" in ipynb, f"{md.with_suffix('.ipynb').name}: no **{level}.**"
