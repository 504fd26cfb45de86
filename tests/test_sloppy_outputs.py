"""More of the "sloppy outputs" of issue 17 on the built site: object reprs and float noise.

tests/test_browser.py (``test_no_python_reprs_in_outputs``) catches ``np.float64(``, ``tensor(``
and ``[['``; this file adds the other reprs a print of a tensor or array leaves behind
(``torch.Size([2, 4])``, ``array(...)``, ``dtype=``, ``device=``, ``grad_fn=``, an object's
address) and float noise (``0.30000000000000004``), in cell outputs and prose on every page.
Code (inline or in cells) is left out: ``torch.Size`` in code is code.
"""
from __future__ import annotations

import re

import pytest
from browser_support import toc_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPRS = ("torch.Size(", "array(", "dtype=", "device=", "grad_fn=", "Parameter containing",
         "object at 0x")
FLOAT_NOISE = re.compile(r"\d\.\d*(?:0{7,}|9{7,})\d")


def sloppy(text: str) -> bool:
    return any(r in text for r in REPRS) or FLOAT_NOISE.search(text) is not None


def test_the_patterns_catch_what_they_should():
    assert sloppy("causal -> torch.Size([2, 4, 5, 5])") and sloppy("x = 0.30000000000000004")
    assert sloppy("array([0.1, 0.2])") and sloppy("tensor([1.], device='cuda:0')")
    assert not sloppy("causal -> (2, 4, 5, 5)") and not sloppy("loss 1.38378, lr 1.00e-05")


def test_no_object_reprs_or_float_noise(site_dir):
    from test_browser import _output_text  # the same reading of a page as the REPRS check

    found = {}
    for path in toc_pages():
        page = site_dir / path
        if page.exists():
            hits = [t[:100] for t in _output_text(page.read_text(encoding="utf-8")) if sloppy(t)]
            if hits:
                found[path] = hits
    assert not found, "reprs or float noise shown to readers:\n" + "\n".join(
        f"{p}: {h[:3]}" for p, h in found.items())
