"""A value shown with ``{glue:text}`` is plain text on the page: Markdown inside it is not
rendered, so ``*mille*`` would print its asterisks (issue 36: "*mille* reads \\*and\\*").
The class: every ``{glue:text}`` key of every page, against its published value."""

from __future__ import annotations

import ast
import re

from tools import ROOT
from tools.reader import load_site_data

_ROLE = re.compile(r"\{glue:text\}`([^`:]+)(?::[^`]*)?`")
_MARKUP = re.compile(r"(?<![\w*])\*[^*\s][^*]*\*(?![\w*])|(?<!\w)_[^_\s][^_]*_(?!\w)|`")


def markup_in_text_glue(root=ROOT) -> list[str]:
    """``page: key = value`` for each glue:text value that holds Markdown emphasis or code."""
    pages = load_site_data(root)["pages"]
    found = []
    for md in sorted((root / "book").rglob("*.md")):
        page = md.relative_to(root).with_suffix("").as_posix()
        glue = pages.get(page, {}).get("glue", {})
        for key in sorted(set(_ROLE.findall(md.read_text(encoding="utf-8")))):
            text = glue.get(key, {}).get("text/plain")
            if text is None:
                continue
            try:
                value = str(ast.literal_eval(text))
            except (SyntaxError, ValueError):
                value = text
            if _MARKUP.search(value):
                found.append(f"{page}: {key} = {value[:100]}")
    return found


def test_no_text_glue_carries_markdown():
    assert not markup_in_text_glue(), "\n".join(markup_in_text_glue())


def test_the_check_sees_emphasis():
    assert _MARKUP.search("*mille* reads *and* most")
    assert _MARKUP.search("the commonest kind is *after mille* (68)")
    assert not _MARKUP.search("2 * 3 = 6, and x*y")
