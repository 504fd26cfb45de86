"""Point a checkout at the repository and branch its published site comes from.

    python -m tools.publish --branch published      # repository from $GITHUB_REPOSITORY
    python -m tools.publish --repository OWNER/NAME --branch published --baseurl URL

The Pages workflow (``.github/workflows/pages.yml``) runs this before it builds: the site it
deploys and the reader notebooks its "Open in Colab" buttons open must name the repository the
workflow runs in (a fork publishes its own copy) and the branch the workflow pushes the
notebooks to, which hold the numbers of the very build it deploys. It rewrites the values that
name them, and only those: ``repository.url``, ``html.baseurl`` and the Colab branch
``sphinx.config.course_colab_branch`` in ``_config.yml`` (the one place the build and
``tools/colab.py`` read them; ``repository.branch``, which the edit and source links name,
stays) and the two fields of ``CITATION.cff`` that repeat them (``tests/book/test_citation.py``
keeps them equal). ``./course sync`` then writes the set-up cells, the Colab links and the
reader notebooks from them.

The site's URL: ``--baseurl`` (the workflow passes what ``actions/configure-pages`` reports,
custom domains included), else GitHub Pages' address for the repository (``pages_url``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from . import ROOT

REPO_RE = re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+")


def pages_url(repository: str) -> str:
    """GitHub Pages' address of ``OWNER/NAME``: ``https://owner.github.io/NAME/``, or
    ``https://owner.github.io/`` for the user site ``OWNER/owner.github.io``."""
    owner, name = _split(repository)
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def _split(repository: str) -> tuple[str, str]:
    if not REPO_RE.fullmatch(repository or ""):
        raise ValueError(
            f"repository {repository!r} is not OWNER/NAME (as GitHub's $GITHUB_REPOSITORY)"
        )
    owner, name = repository.split("/")
    return owner, name


def _replace_value(text: str, key: str, old: str, new: str, where: str) -> str:
    """``text`` with the one line ``<indent>key: old`` (``old`` bare or quoted) set to ``new``,
    comments and the rest unchanged."""
    pattern = re.compile(
        rf"(?m)^(?P<head>[ \t]*{re.escape(key)}:[ \t]*)(?P<q>[\"']?){re.escape(old)}(?P=q)[ \t]*$"
    )
    found = pattern.findall(text)
    if len(found) != 1:
        raise ValueError(f"{where}: expected one line `{key}: {old}`, found {len(found)}")
    return pattern.sub(lambda m: f"{m['head']}{m['q']}{new}{m['q']}", text)


def _colab_branch(config: dict) -> str | None:
    key = "course_colab_branch"
    value = ((config.get("sphinx") or {}).get("config") or {}).get(key)
    if value is None:
        raise ValueError(f"_config.yml has no sphinx.config.{key} (the branch Colab opens)")
    return value


def configure(
    root: Path = ROOT, *, repository: str, branch: str, baseurl: str | None = None
) -> dict[str, tuple[str, str]]:
    """Rewrite ``_config.yml`` and ``CITATION.cff`` under ``root`` for ``repository``
    (``OWNER/NAME``), ``branch`` and ``baseurl``; returns ``{field: (old, new)}`` of what
    changed. Raises ``ValueError`` on a bad name, branch or URL, or a file it cannot edit."""
    import yaml

    owner, name = _split(repository)
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", branch or "") or ".." in branch:
        raise ValueError(f"branch {branch!r} is not a plain git branch name")
    baseurl = baseurl or pages_url(repository)
    if not re.fullmatch(r"https?://[^\s\"']+", baseurl):
        raise ValueError(f"baseurl {baseurl!r} is not an http(s) URL")
    baseurl = baseurl.rstrip("/") + "/"
    url = f"https://github.com/{owner}/{name}"

    config_path, cff_path = root / "_config.yml", root / "CITATION.cff"
    config_text = config_path.read_text(encoding="utf-8")
    config = yaml.safe_load(config_text)
    old = {
        "repository.url": str(config["repository"]["url"]),
        "sphinx.config.course_colab_branch": str(_colab_branch(config)),
        "html.baseurl": str(config["html"]["baseurl"]),
    }
    new = {
        "repository.url": url,
        "sphinx.config.course_colab_branch": branch,
        "html.baseurl": baseurl,
    }
    for field in old:
        key = field.split(".")[-1]
        if old[field] != new[field]:
            config_text = _replace_value(config_text, key, old[field], new[field], str(config_path))
    written = yaml.safe_load(config_text)
    got = {
        "repository.url": written["repository"]["url"],
        "sphinx.config.course_colab_branch": _colab_branch(written),
        "html.baseurl": written["html"]["baseurl"],
    }
    if got != new:  # a key of the same name elsewhere in the file took the change
        raise ValueError(f"{config_path}: rewriting gave {got}, not {new}")

    cff_text = cff_path.read_text(encoding="utf-8") if cff_path.is_file() else None
    if cff_text is not None:
        cff = yaml.safe_load(cff_text)
        for key, value in (("repository-code", url), ("url", baseurl)):
            if str(cff.get(key)) != value:
                cff_text = _replace_value(cff_text, key, str(cff[key]), value, str(cff_path))
    config_path.write_text(config_text, encoding="utf-8")
    if cff_text is not None:
        cff_path.write_text(cff_text, encoding="utf-8")
    return {f: (old[f], new[f]) for f in old if old[f] != new[f]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.publish", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--repository",
        default=os.environ.get("GITHUB_REPOSITORY"),
        help="OWNER/NAME (default: $GITHUB_REPOSITORY, set in GitHub Actions)",
    )
    parser.add_argument("--branch", required=True, help="the branch Colab opens the notebooks of")
    parser.add_argument(
        "--baseurl", help="the published site's URL (default: GitHub Pages' for the repository)"
    )
    args = parser.parse_args(argv)
    if not args.repository:
        parser.error("no --repository and no $GITHUB_REPOSITORY")
    try:
        changed = configure(
            ROOT, repository=args.repository, branch=args.branch, baseurl=args.baseurl
        )
    except ValueError as exc:
        print(f"tools.publish: {exc}", file=sys.stderr)
        return 2
    for field, (before, after) in changed.items():
        print(f"tools.publish: {field}: {before} -> {after}")
    if not changed:
        print("tools.publish: _config.yml already names this repository, branch and site")
    return 0


if __name__ == "__main__":
    sys.exit(main())
