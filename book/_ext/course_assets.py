"""Serve MathJax 3 and the Jupyter widget manager from the site itself, so math and widgets
render offline (a classroom, a train, a machine without a CDN).

The files come from the npm registry at build time: ``package.json`` / ``package-lock.json``
at the repository root pin ``mathjax``, ``@jupyter-widgets/html-manager`` and ``requirejs``,
and ``npm ci`` (run by ``./course setup``) puts them in ``node_modules/``. This extension

- points Sphinx's ``mathjax_path`` and myst-nb's ``nb_ipywidgets_js`` at
  ``_static/course-assets/...`` (relative paths, so every page loads them from the site,
  whatever its depth);
- copies exactly those files into the HTML output when the build finishes, with the site's glue
  between MathJax and the widget manager (``assets_static/course-widgets-config.js``); the
  widget manager only when a page shows a live widget (none does now: the explorers are
  Vega-Lite, ``course_vega.py``).

They are deliberately not in a ``_static/`` source folder: Jupyter Book adds every ``.js`` file
found there to every page.

``course_assets_cdn: true`` (``sphinx.config`` in ``_config.yml``) switches back to the
public CDNs (myst-nb's and Sphinx's defaults) and needs no ``node_modules``.
"""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

VENDOR = "course-assets"  # under the output's _static/ (the theme already has a vendor/)
MATHJAX_ENTRY = "tex-mml-chtml.js"  # the component Sphinx loads by default, now local
WIDGET_FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")
WIDGET_CONFIG = f"{VENDOR}/jupyter-widgets/course-widgets-config.js"

# Loaded after require.js and before the widget manager (embed-amd.js); copied into the site.
WIDGET_CONFIG_JS = Path(__file__).resolve().parent / "assets_static" / "course-widgets-config.js"


def _sources(node_modules: Path) -> list[tuple[Path, str]]:
    """(source, destination relative to _static/) for every file the site needs."""
    mathjax = node_modules / "mathjax" / "es5"
    widgets = node_modules / "@jupyter-widgets" / "html-manager" / "dist"
    files: list[tuple[Path, str]] = []
    # MathJax loads fonts and TeX extensions (autoload) relative to its own script: ship the
    # whole es5 tree except the Node.js entry point.
    for f in sorted(mathjax.rglob("*")):
        if f.is_file() and f.name != "node-main.js":
            files.append((f, f"{VENDOR}/mathjax/{f.relative_to(mathjax).as_posix()}"))
    files.append((widgets / "embed-amd.js", f"{VENDOR}/jupyter-widgets/embed-amd.js"))
    for f in sorted(widgets.iterdir()):
        if f.suffix in WIDGET_FONT_SUFFIXES:  # webpack-emitted icon fonts the widgets' CSS names
            files.append((f, f"{VENDOR}/jupyter-widgets/{f.name}"))
    files.append((node_modules / "requirejs" / "require.js", f"{VENDOR}/requirejs/require.js"))
    return files


def _node_modules(app) -> Path:
    return Path(app.srcdir) / "node_modules"


def configure(app, config) -> None:
    if config.course_assets_cdn:
        logger.info("course_assets: MathJax and the widget manager load from public CDNs")
        return
    node_modules = _node_modules(app)
    missing = [str(src) for src, _ in _sources_or_empty(node_modules) if not src.is_file()]
    if not (node_modules / "mathjax").is_dir() or missing:
        raise ExtensionError(
            f"course_assets: the offline MathJax/widget files are missing from {node_modules} "
            f"({', '.join(missing[:3]) or 'no mathjax package'}). Run `npm ci` in the repository "
            "root (./course setup does it), or set `course_assets_cdn: true` under sphinx.config "
            "in _config.yml to load them from CDNs instead."
        )
    config.mathjax_path = f"{VENDOR}/mathjax/{MATHJAX_ENTRY}"
    config.nb_ipywidgets_js = {
        f"{VENDOR}/requirejs/require.js": {},
        WIDGET_CONFIG: {},
        # Widgets outside ipywidgets' own (none in this course) would still come from the CDN.
        f"{VENDOR}/jupyter-widgets/embed-amd.js": {},
    }


def _sources_or_empty(node_modules: Path) -> list[tuple[Path, str]]:
    try:
        return _sources(node_modules)
    except FileNotFoundError as exc:  # a package folder is missing altogether
        return [(Path(exc.filename or node_modules), "")]


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def shows_widgets(outdir: Path) -> bool:
    """Whether a page of the built site shows a live widget (course_site.py loads the
    manager on those pages only)."""
    return any(
        WIDGET_VIEW in page.read_text(encoding="utf-8", errors="replace")
        for page in outdir.rglob("*.html")
        if page.relative_to(outdir).parts[0] not in ("_static", "_downloads")
    )


def copy_assets(app, exception) -> None:
    if exception is not None or app.config.course_assets_cdn or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    widgets = shows_widgets(Path(app.outdir))
    copied = 0
    for src, rel in _sources(_node_modules(app)):
        if not widgets and not rel.startswith(f"{VENDOR}/mathjax/"):
            continue
        dest = static / rel
        if dest.is_file() and filecmp.cmp(src, dest, shallow=False):
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        copied += 1
    if widgets:
        shutil.copyfile(WIDGET_CONFIG_JS, static / WIDGET_CONFIG)
    else:  # no page shows a live widget: the manager (6 MB with its fonts) is not shipped
        for folder in ("jupyter-widgets", "requirejs"):
            shutil.rmtree(static / VENDOR / folder, ignore_errors=True)
    logger.info(f"course_assets: {copied} offline asset file(s) copied to {static / VENDOR}")


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated <script> entries. sphinx-thebe registers its inline configuration
    (``const THEBE_JS_URL = ...``) twice under Jupyter Book (once with filename ``None``, once
    with ``""``, so Sphinx does not see the repeat), and declaring a ``const`` twice is a
    JavaScript error on every page."""
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, unique = set(), []
    for js in scripts:
        # An inline script's filename is None or "" depending on who added it: the same.
        key = (
            getattr(js, "filename", js) or "",
            tuple(sorted((k, str(v)) for k, v in (getattr(js, "attributes", {}) or {}).items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(js)
    scripts[:] = unique


def setup(app):
    app.add_config_value("course_assets_cdn", False, "html", types=[bool])
    app.connect("html-page-context", dedupe_scripts, priority=520)
    # Before myst-nb (builder-inited) and Sphinx's mathjax (html-page-context) read the values.
    app.connect("config-inited", configure, priority=400)
    app.connect("build-finished", copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
