"""The site builds cleanly, and every page in the table of contents is there, executed."""

import json
import re
from pathlib import Path

import pytest
from build_support import get_build, page_builds

from tools import ROOT
from tools.format_code import code_cells as shown_code_cells
from tools.toc import toc_files

# Tests that take the ``built_book`` fixture (a clean build of the whole site, minutes) are
# marked slow; the others read sources only and belong to the fast tier.


def chapter_files() -> list[str]:
    """Numbered chapters (book/NN_name) from the table of contents."""
    return [f for f in toc_files() if re.match(r"book/\d\d_", f)]


def code_cells(md: Path) -> list[str]:
    """Code cells of a MyST notebook that are not removed from the page."""
    return shown_code_cells(md.read_text())


def test_toc_lists_existing_files():
    missing = [f for f in toc_files() if not (ROOT / f"{f}.md").exists()]
    assert not missing, f"_toc.yml names files that do not exist: {missing}"


@pytest.mark.slow
def test_build_log_is_clean(built_book):
    from book_builds import job

    log = job("native").log.read_text()
    assert "build succeeded" in log
    assert "WARNING" not in log.split("--- stderr ---")[0].replace("[IPKernelApp] WARNING", "")


@pytest.mark.slow
def test_avx2_build_warns_of_nothing_on_the_pages_it_executed(built_book_avx2):
    """The AVX2 build leaves the pages that do not depend on the CPU unexecuted (they warn of
    their missing glue); the pages it executed must build as cleanly as in the native build."""
    from book_builds import SIMULATED_BUILD, job

    log = job(SIMULATED_BUILD).log.read_text().split("--- stderr ---")[0]
    assert "build succeeded" in log
    warned = [
        line
        for line in log.splitlines()
        if "WARNING" in line
        and "[IPKernelApp]" not in line
        and any(f"{page}.md" in line for page in built_book_avx2.pages)
    ]
    assert not warned, "\n".join(warned[:20])


@pytest.mark.slow
@pytest.mark.parametrize("page, build", page_builds(toc_files()))
def test_every_toc_page_is_built(page, build, request):
    html = get_build(request, build).path / "html" / f"{page}.html"
    assert html.exists(), f"{page} produced no HTML page"
    text = html.read_text()
    assert "{glue" not in text, f"{page}: a glue reference was not resolved"
    assert "This chapter is being written" not in text, f"{page} is still a placeholder"


@pytest.mark.slow
@pytest.mark.parametrize(
    "page, build",
    page_builds(
        [f for f in toc_files() if (ROOT / f"{f}.md").exists() and code_cells(ROOT / f"{f}.md")]
    ),
)
def test_executed_outputs_are_on_the_page(page, build, request):
    built_book = get_build(request, build).path
    nb = json.loads((built_book / "jupyter_execute" / f"{page}.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] is not None for c in code), f"{page}: unexecuted cells"
    errors = [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"{page}: cells raised {[e['ename'] for e in errors]}"
    n_outputs = sum(bool(c.get("outputs")) for c in code)
    html = (built_book / "html" / f"{page}.html").read_text()
    assert html.count('class="cell_output') >= min(n_outputs, 1), (
        f"{page}: outputs missing from the HTML"
    )


@pytest.mark.parametrize("chapter", chapter_files())
def test_chapter_links_its_exercise_notebook(chapter):
    stem = Path(chapter).name
    text = (ROOT / f"{chapter}.md").read_text()
    assert f"{{exercise-links}}`{stem}`" in text, f"{chapter} has no exercise-links to its notebook"
    assert (ROOT / "exercises" / f"{stem}.ipynb").exists(), f"exercises/{stem}.ipynb is missing"


def _title(page: str) -> str:
    return next(
        line for line in (ROOT / f"{page}.md").read_text().splitlines() if line.startswith("# ")
    )


def test_chapter_titles_carry_no_typed_number():
    """The site numbers the chapters (numbered parts in _toc.yml); a typed "4." in a chapter's
    title would print as "4. 4. Attention"."""
    typed = [_title(c) for c in chapter_files() if re.match(r"# \d+\.? ", _title(c))]
    assert not typed, f"chapter titles with a typed number (the site numbers them): {typed}"


@pytest.mark.slow
@pytest.mark.parametrize("chapter", chapter_files())
def test_chapters_are_numbered_on_the_site(built_book, chapter):
    """Chapter N's title reads "N." and its figures are numbered N.1, N.2, ..."""
    number = int(re.match(r"book/(\d\d)_", chapter).group(1))
    html = (built_book / "html" / f"{chapter}.html").read_text()
    titles = re.findall(r"<h1>.*?</h1>", html, flags=re.S)
    assert any(f'<span class="section-number">{number}. </span>' in t for t in titles), (
        f"{chapter}: the title is not numbered {number}."
    )
    figures = re.findall(r'<span class="caption-number">Fig\. ([\d.]+) </span>', html)
    assert all(n.startswith(f"{number}.") for n in figures), (
        f"{chapter}: figures numbered {figures}"
    )
