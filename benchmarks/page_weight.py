"""Benchmark: how many bytes each page of a built site makes a reader download.

    python benchmarks/page_weight.py /tmp/jb-E/_build/html
    python benchmarks/page_weight.py NEW_HTML --json after.json --before before.json

Every page in ``_toc.yml`` (and the search page) is opened in Chromium (Playwright, as the
browser tests do) from a local server with an empty cache, and every response from the site
is recorded, including what MathJax and the widget manager load on their own (fonts, TeX
extensions). Each response body is compressed with gzip (level 6, as a web server would send
it) and added up; a ``data:`` image inside the page counts as part of the page's HTML.

Prints a table (requests, raw KB, gzip KB per page; with ``--before``, the gzip KB of the
earlier run and the change) and, with ``--json``, writes the numbers for a later comparison.
Needs Debian's ``chromium`` (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path

from _common import ROOT  # run from benchmarks/ (it puts the root on the path)

sys.path.insert(0, str(ROOT / "tests"))
from browser_support import CHROMIUM_ARGS, serve, toc_pages  # noqa: E402


def gz(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=6, mtime=0))


def measure(site: Path, pages: list[str]) -> dict:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("page_weight: needs Debian's chromium (apt-get install chromium)")
    results = {}
    with serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        for path in pages:
            ctx = browser.new_context(viewport={"width": 1366, "height": 900})
            ctx.route(
                "**/*",
                lambda r: (
                    r.continue_()
                    if r.request.url.startswith(base) or r.request.url.startswith("data:")
                    else r.abort()
                ),
            )
            page = ctx.new_page()
            seen: dict[str, bytes] = {}

            def on_response(resp, seen=seen):
                if resp.url.startswith(base) and resp.url not in seen and resp.status < 400:
                    try:
                        seen[resp.url] = resp.body()
                    except Exception:  # a response the page aborted (navigation)
                        pass

            page.on("response", on_response)
            page.goto(base + path, wait_until="load", timeout=180_000)  # a loaded machine
            page.evaluate("""async () => {
              const started = window.MathJax && MathJax.startup && MathJax.startup.promise;
              if (started) await MathJax.startup.promise;
            }""")
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(500)
            kinds: dict[str, int] = {}
            for url, body in seen.items():
                kind = (
                    "mathjax"
                    if "/mathjax/" in url
                    else "widgets"
                    if "jupyter-widgets" in url or "requirejs" in url
                    else "other"
                )
                kinds[kind] = kinds.get(kind, 0) + gz(body)
            results[path] = {
                "requests": len(seen),
                "raw": sum(map(len, seen.values())),
                "gzip": sum(gz(b) for b in seen.values()),
                "by_kind": kinds,
            }
            ctx.close()
        browser.close()
    return results


def table(results: dict, before: dict | None) -> str:
    kb = lambda n: f"{n / 1024:,.0f}"  # noqa: E731
    head = ["page", "requests", "raw KB", "gzip KB", "of which MathJax", "of which widgets"]
    if before:
        head += ["gzip KB before", "change"]
    rows = [head]
    for path, r in results.items():
        row = [
            path.removesuffix(".html"),
            str(r["requests"]),
            kb(r["raw"]),
            kb(r["gzip"]),
            kb(r["by_kind"].get("mathjax", 0)),
            kb(r["by_kind"].get("widgets", 0)),
        ]
        if before:
            b = before.get(path)
            row += [kb(b["gzip"]), f"{(r['gzip'] - b['gzip']) / b['gzip']:+.0%}"] if b else ["", ""]
        rows.append(row)
    total = sum(r["gzip"] for r in results.values())
    foot = ["total (all pages)", "", kb(sum(r["raw"] for r in results.values())), kb(total), "", ""]
    if before:
        tb = sum(before[p]["gzip"] for p in results if p in before)
        foot += [kb(tb), f"{(total - tb) / tb:+.0%}" if tb else ""]
    rows.append(foot)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for n, row in enumerate(rows):
        lines.append(
            "| "
            + " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
            )
            + " |"
        )
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("html", type=Path, help="the built site's HTML folder (…/_build/html)")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    ap.add_argument("--before", type=Path, help="a --json file of an earlier run to compare with")
    ap.add_argument("--pages", nargs="*", help="only these pages (paths relative to the site)")
    args = ap.parse_args(argv)
    if not (args.html / "index.html").exists():
        raise SystemExit(f"page_weight: no built site in {args.html}")
    pages = args.pages or toc_pages() + ["search.html"]
    results = measure(args.html, pages)
    before = json.loads(args.before.read_text()) if args.before else None
    print(table(results, before))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
