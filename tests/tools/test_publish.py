"""A published copy names its own repository: ``tools/publish.py`` rewrites the repository, the
branch Colab opens and the site's URL in ``_config.yml`` and ``CITATION.cff`` (what the Pages
workflow runs before it builds, in the repository it runs in, a fork included), and everything
that reads them follows."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tools import ROOT, colab, publish, reader


@pytest.fixture
def checkout(tmp_path):
    for name in ("_config.yml", "CITATION.cff"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_pages_url_of_a_project_and_a_user_site():
    assert publish.pages_url("Alice/my-course") == "https://alice.github.io/my-course/"
    assert publish.pages_url("alice/Alice.github.io") == "https://alice.github.io/"


def test_a_fork_gets_its_repository_branch_and_site(checkout):
    before = {n: (ROOT / n).read_text(encoding="utf-8") for n in ("_config.yml", "CITATION.cff")}
    fork = "octo-fork-of-the-course/ut-fork"  # not the repository this checkout names
    changed = publish.configure(checkout, repository=fork, branch="published")
    url, site = f"https://github.com/{fork}", "https://octo-fork-of-the-course.github.io/ut-fork/"
    assert changed["repository.url"][1] == url and changed["html.baseurl"][1] == site
    assert colab.repository(checkout) == (url, "published")
    assert reader.base_url(checkout) == site
    assert colab.colab_url("notebooks/x.ipynb", checkout) == (
        f"https://colab.research.google.com/github/{fork}/blob/published/notebooks/x.ipynb"
    )
    assert colab.install_requirement(checkout) == f"course_lib @ git+{url}@published"
    cff = yaml.safe_load((checkout / "CITATION.cff").read_text(encoding="utf-8"))
    assert (cff["repository-code"], cff["url"]) == (url, site)
    # the edit and source links keep the branch people edit
    config = yaml.safe_load((checkout / "_config.yml").read_text(encoding="utf-8"))
    assert config["repository"]["branch"] == "main"
    # only the lines holding those values changed: comments and the rest are kept
    for name, lines_changed in (("_config.yml", 3), ("CITATION.cff", 2)):
        old = before[name].splitlines()
        new = (checkout / name).read_text(encoding="utf-8").splitlines()
        assert len(old) == len(new)
        assert sum(a != b for a, b in zip(old, new)) == lines_changed, name


def test_configure_takes_the_pages_url_given_and_is_idempotent(checkout):
    publish.configure(
        checkout, repository="alice/ut", branch="main", baseurl="https://course.example.org"
    )
    assert reader.base_url(checkout) == "https://course.example.org/"
    assert (
        publish.configure(
            checkout, repository="alice/ut", branch="main", baseurl="https://course.example.org/"
        )
        == {}
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"repository": "alice", "branch": "published"}, "OWNER/NAME"),
        ({"repository": "alice/ut; rm -rf /", "branch": "published"}, "OWNER/NAME"),
        ({"repository": "alice/ut", "branch": "two words"}, "branch"),
        ({"repository": "alice/ut", "branch": "a/../b"}, "branch"),
        ({"repository": "alice/ut", "branch": "main", "baseurl": "ftp://x"}, "baseurl"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(checkout, kwargs, message):
    before = (checkout / "_config.yml").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        publish.configure(checkout, **kwargs)
    assert (checkout / "_config.yml").read_text(encoding="utf-8") == before


def test_the_command_reads_github_repository(checkout, monkeypatch, capsys):
    monkeypatch.setattr(publish, "ROOT", checkout)
    monkeypatch.setenv("GITHUB_REPOSITORY", "bob/course")
    assert publish.main(["--branch", "published"]) == 0
    assert colab.repository(checkout) == ("https://github.com/bob/course", "published")
    assert "html.baseurl" in capsys.readouterr().out
    monkeypatch.delenv("GITHUB_REPOSITORY")
    with pytest.raises(SystemExit):
        publish.main(["--branch", "published"])
