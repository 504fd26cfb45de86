"""Citing the course and taking it home: ``CITATION.cff`` at the repository's root, the BibTeX
the landing page prints from it, and the zip of every notebook (``book/_ext/course_site.py``).

Fast: the citation file has the fields Citation File Format 1.2.0 requires and agrees with
``_config.yml`` and ``LICENSE``; its BibTeX parses (pybtex, what sphinxcontrib-bibtex reads the
bibliography with) to the same title, author, year and URL; the zip holds every reader notebook
and exercise notebook and is the same bytes when written twice. Slow (the built site): the
landing page prints the BibTeX and links the zip, which is in the site.
"""

from __future__ import annotations

import datetime
import importlib.util
import re
import zipfile

import pytest
import yaml

from tools import ROOT


def _site():
    spec = importlib.util.spec_from_file_location(
        "course_site_cite", ROOT / "book/_ext/course_site.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_file_has_the_required_fields(cff):
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "type"):
        assert cff.get(key), f"CITATION.cff has no {key}"
    assert cff["type"] in ("software", "dataset")
    for author in cff["authors"]:
        assert author.get("name") or author.get("family-names"), author
    datetime.date.fromisoformat(str(cff["date-released"]))
    allowed = {
        "cff-version", "message", "type", "title", "abstract", "authors", "repository-code",
        "url", "license", "date-released", "keywords", "version", "doi", "identifiers",
        "preferred-citation", "references", "contact", "commit", "repository",
        "repository-artifact",
    }  # fmt: skip
    assert set(cff) <= allowed, f"keys CFF 1.2.0 does not define: {set(cff) - allowed}"


def test_citation_file_agrees_with_the_config_and_licence(cff):
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert cff["title"] == config["title"]
    assert cff["repository-code"] == config["repository"]["url"]
    assert cff["url"] == config["html"]["baseurl"]
    assert [a.get("name") for a in cff["authors"]] == [config["author"]]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith(f"{cff['license']} License")


def test_bibtex_parses_to_the_same_fields(cff):
    from pybtex.database import parse_string

    entry = next(iter(parse_string(_site().bibtex(cff), "bibtex").entries.values()))
    assert entry.type == "misc"
    assert entry.fields["title"].strip("{}") == cff["title"]
    assert entry.fields["year"] == str(cff["date-released"])[:4]
    assert cff["url"] in entry.fields["howpublished"]
    assert str(entry.persons["author"][0]).strip("{}") == cff["authors"][0]["name"]


def test_the_notebooks_zip_holds_every_notebook_and_is_reproducible(tmp_path):
    site = _site()
    a, b = tmp_path / "a.zip", tmp_path / "b.zip"
    n = site.write_notebooks_zip(ROOT, a)
    site.write_notebooks_zip(ROOT, b)
    assert a.read_bytes() == b.read_bytes(), "the zip differs between two writes"
    names = zipfile.ZipFile(a).namelist()
    assert len(names) == n
    top = site.NOTEBOOKS_ZIP.removesuffix(".zip")
    want = {
        f"{top}/chapters/{p.relative_to(ROOT / 'notebooks').as_posix()}"
        for p in (ROOT / "notebooks").rglob("*.ipynb")
    } | {f"{top}/exercises/{p.name}" for p in (ROOT / "exercises").glob("*.ipynb")}
    assert want <= set(names), f"missing from the zip: {sorted(want - set(names))[:5]}"
    assert f"{top}/exercises/README.md" in names
    assert len(want) >= 30


@pytest.mark.slow
def test_the_landing_page_cites_and_links_the_zip(built_book):
    site = _site()
    html_dir = built_book / "html"
    intro = (html_dir / "book" / "intro.html").read_text(encoding="utf-8")
    assert 'id="cite-this-course"' in intro
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert re.sub(r"\s+", " ", site.bibtex(cff).replace("&", "&amp;")) in re.sub(r"\s+", " ", intro)
    href = re.search(r'<a href="([^"]*' + re.escape(site.NOTEBOOKS_ZIP) + ')"', intro)
    assert href, "the landing page does not link the notebooks' zip"
    target = (html_dir / "book" / href.group(1)).resolve()
    assert target == (html_dir / site.NOTEBOOKS_ZIP).resolve() and target.is_file()
    assert zipfile.ZipFile(target).testzip() is None
