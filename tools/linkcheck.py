"""Broken links of the built site, offline: ``python -m tools.linkcheck _build/html``.

LinkChecker (a maintained link checker, PyPI ``linkchecker``) reads every page of the build,
served on 127.0.0.1 by ``tools/localserver.py`` (run as root, LinkChecker drops to the user
``nobody``, who may not read the build's files directly). It follows every internal link
(pages, images, scripts, style sheets, downloads) and checks that each ``#fragment`` names an
id on its page (its AnchorCheck plugin, switched on in ``tools/linkcheckerrc``). Links to
other sites are not fetched (no network needed). A problem is a link LinkChecker finds invalid
or an anchor it does not find; each is printed with the page and line that holds it, and the
exit status is 1.

Used by the slow tier (``tests/test_linkcheck.py``, on the clean test build) and by the Pages
workflow (``.github/workflows/pages.yml``) on the site it deploys.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

CONFIG = Path(__file__).resolve().with_name("linkcheckerrc")


def _linkchecker() -> str:
    exe = Path(sys.executable).with_name("linkchecker")
    if not exe.exists():
        raise RuntimeError("linkchecker is not installed: pip install -r requirements.txt")
    return str(exe)


def check(html_dir: Path, threads: int = 4, timeout: float = 900) -> list[str]:
    """The broken links of the site in ``html_dir`` (its ``index.html`` and every page, as
    start points), as "page:line: link: what is wrong"; ``[]`` when there are none."""
    from .localserver import serve

    html_dir = Path(html_dir).resolve()
    if not (html_dir / "index.html").is_file():
        raise ValueError(f"no built site in {html_dir} (no index.html): build it first")
    pages = sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if "_static" not in p.parts
    )
    with serve(html_dir) as base:
        proc = subprocess.run(
            [
                _linkchecker(),
                "--config",
                str(CONFIG),
                "--no-status",
                "--threads",
                str(threads),
                "--output",
                "csv",
                *(base + page for page in pages),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    rows = csv.DictReader(
        (line for line in proc.stdout.splitlines() if line and not line.startswith("#")),
        delimiter=";",
    )
    problems = []
    for row in rows:
        page = _rel(row["parentname"].split("#")[0], base)
        where = f"{page}:{row['line']}: {row['urlname']}"
        if row["valid"] != "True":
            problems.append(f"{where}: {row['result']}")
        elif "Anchor `" in row["warningstring"]:
            # "Anchor `x' (decoded: `x') not found. Available anchors: ..." (the list is long)
            problems.append(f"{where}: {row['warningstring'].split('. Available')[0]}")
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not problems):
        # 1 is "found problems"; anything else, or 1 with none parsed, is LinkChecker failing
        raise RuntimeError(f"linkchecker exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return sorted(set(problems))


def _rel(url: str, base: str) -> str:
    return url.removeprefix(base)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.linkcheck", description=__doc__.split("\n")[0]
    )
    parser.add_argument("html", type=Path, help="the built site's folder (_build/html)")
    args = parser.parse_args(argv)
    problems = check(args.html)
    for p in problems:
        print(p)
    n = len(list(args.html.rglob("*.html")))
    print(f"tools.linkcheck: {len(problems)} broken link(s) in {n} pages of {args.html}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
