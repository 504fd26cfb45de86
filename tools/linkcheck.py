"""Broken links of the built site, offline: ``python -m tools.linkcheck _build/html``.

LinkChecker (a maintained link checker, PyPI ``linkchecker``) reads every page of the build,
served on 127.0.0.1 by ``tools/localserver.py`` (run as root, LinkChecker drops to the user
``nobody``, who may not read the build's files directly). It follows every internal link
(pages, images, scripts, style sheets, downloads) and, with ``anchors`` (its AnchorCheck
plugin), checks that each ``#fragment`` names an id on its page. Links to other sites are not
fetched (no network needed). A problem is a link LinkChecker finds invalid or an anchor it does
not find; each is printed with the page and line that holds it, and the exit status is 1.

The Pages workflow (``.github/workflows/pages.yml``) checks the site it deploys, anchors
included. The slow tier (``tests/book/test_linkcheck.py``) checks the clean test build without
anchors: LinkChecker fetches and parses a page once per anchor that links into it (about two
minutes of CPU for this site, against seconds without), and the browser tests already check
every internal link's anchor on every page (``tests/book/test_browser.py``).
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from .localserver import QuietHandler, serve

SETTINGS = """[checking]
# LinkChecker paces requests to one host (10 a second) unless the server answers with a
# "LinkChecker" header, as the local server here does (_Handler): it serves only this site
maxrequestspersecond=1000

[filtering]
# offline: links to other sites are only parsed, never fetched
checkextern=0
ignore=
  ^mailto:
"""
ANCHORS = "\n[AnchorCheck]\n"  # the plugin's section switches it on


class Report(NamedTuple):
    problems: list[str]  # "page:line: link: what is wrong", sorted
    checked: int  # links LinkChecker checked and found valid


class _Handler(QuietHandler):
    """The site for LinkChecker: a checker that stops reading a file it does not need (a PDF,
    an image) closes the connection, which is not an error of the site."""

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def end_headers(self):
        self.send_header("LinkChecker", "tools.linkcheck")  # lets it check at full speed
        super().end_headers()


def _linkchecker() -> str:
    exe = Path(sys.executable).with_name("linkchecker")
    if not exe.exists():
        raise RuntimeError("linkchecker is not installed: pip install -r requirements.txt")
    return str(exe)


def check(html_dir: Path, anchors: bool = True, threads: int = 4, timeout: float = 1800) -> Report:
    """Check the site in ``html_dir`` (every page a start point); ``anchors``: also each
    ``#fragment``."""
    html_dir = Path(html_dir).resolve()
    if not (html_dir / "index.html").is_file():
        raise ValueError(f"no built site in {html_dir} (no index.html): build it first")
    pages = sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if "_static" not in p.parts
    )
    with tempfile.TemporaryDirectory() as tmp, serve(html_dir, _Handler) as base:
        config = Path(tmp) / "linkcheckerrc"
        config.write_text(SETTINGS + (ANCHORS if anchors else ""), encoding="utf-8")
        proc = subprocess.run(
            [_linkchecker(), "--config", str(config), "--no-status", "--verbose"]
            + ["--threads", str(threads), "--output", "csv"]
            + [base + page for page in pages],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    rows = csv.DictReader(
        (line for line in proc.stdout.splitlines() if line and not line.startswith("#")),
        delimiter=";",
    )
    problems, checked = [], 0
    for row in rows:
        where = f"{row['parentname'].split('#')[0].removeprefix(base)}:{row['line']}: "
        where += row["urlname"]
        if row["valid"] != "True":
            problems.append(f"{where}: {row['result']}")
        elif "Anchor `" in row["warningstring"]:
            # "Anchor `x' (decoded: `x') not found. Available anchors: ..." (the list is long)
            problems.append(f"{where}: {row['warningstring'].split('. Available')[0]}")
        else:
            checked += 1
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not problems):
        # 1 is "found problems"; anything else, or 1 with none parsed, is LinkChecker failing
        raise RuntimeError(f"linkchecker exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return Report(sorted(set(problems)), checked)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.linkcheck", description=__doc__.split("\n")[0]
    )
    parser.add_argument("html", type=Path, help="the built site's folder (_build/html)")
    parser.add_argument(
        "--no-anchors", action="store_true", help="do not check the #fragments (much faster)"
    )
    args = parser.parse_args(argv)
    report = check(args.html, anchors=not args.no_anchors)
    for p in report.problems:
        print(p)
    n = len(list(args.html.rglob("*.html")))
    print(
        f"tools.linkcheck: {len(report.problems)} broken link(s), {report.checked} good, "
        f"in {n} pages of {args.html}"
    )
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
