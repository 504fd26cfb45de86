"""Serve Vega, Vega-Lite and vega-embed from the site, on the pages that show an explorer.

The chapters' explorers (``course_lib.viz.explorers``) are Vega-Lite charts whose sliders are
bound parameters: the browser recomputes the figure, with no kernel. Their HTML output calls
``vegaEmbed``; this extension

- copies the three libraries' browser builds from ``node_modules/`` (``package.json`` pins
  them; ``npm ci`` installs them) into ``_static/course-assets/vega/`` when the build finishes;
- adds their ``<script>`` tags only to pages whose body contains an explorer (the marker
  class ``course-vega-explorer``), before any other script: on a page that also loads
  RequireJS (the widget manager), the libraries' UMD wrappers would otherwise register as
  AMD modules instead of setting ``window.vegaEmbed``.

With ``course_assets_cdn: true`` (see ``course_assets.py``) the tags point at jsDelivr instead.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

MARKER = 'class="course-vega-explorer"'
VENDOR = "course-assets/vega"  # under the output's _static/
#: npm package -> its browser build (a UMD bundle setting a global)
BUNDLES = {
    "vega": "build/vega.min.js",
    "vega-lite": "build/vega-lite.min.js",
    "vega-embed": "build/vega-embed.min.js",
}
PRIORITY = 150  # before Sphinx's defaults (500) and myst-nb's RequireJS


def _node_modules(app) -> Path:
    return Path(app.srcdir) / "node_modules"


def _version(node_modules: Path, package: str) -> str:
    return json.loads((node_modules / package / "package.json").read_text())["version"]


def check(app, config) -> None:
    if config.course_assets_cdn:
        return
    missing = [f"{p}/{b}" for p, b in BUNDLES.items() if not (_node_modules(app) / p / b).is_file()]
    if missing:
        raise ExtensionError(
            f"course_vega: {', '.join(missing)} missing from {_node_modules(app)}. Run `npm ci` "
            "in the repository root (./course setup does it), or set `course_assets_cdn: true`."
        )


def add_scripts(app, pagename, templatename, context, doctree) -> None:
    """Load the libraries on pages whose body contains an explorer (and only there)."""
    if MARKER not in (context.get("body") or ""):
        return
    for package, bundle in BUNDLES.items():
        if app.config.course_assets_cdn:
            version = (
                _version(_node_modules(app), package)
                if (_node_modules(app) / package).is_dir()
                else ""
            )
            src = (
                f"https://cdn.jsdelivr.net/npm/{package}{'@' + version if version else ''}/{bundle}"
            )
        else:
            src = f"{VENDOR}/{Path(bundle).name}"  # Sphinx prefixes _static/
        # Added during html-page-context, so Sphinx adds it to this page only.
        app.add_js_file(src, priority=PRIORITY)


def copy_bundles(app, exception) -> None:
    if exception is not None or app.config.course_assets_cdn or app.builder.format != "html":
        return
    dest_dir = Path(app.outdir) / "_static" / VENDOR
    dest_dir.mkdir(parents=True, exist_ok=True)
    for package, bundle in BUNDLES.items():
        src = _node_modules(app) / package / bundle
        dest = dest_dir / src.name
        if not (dest.is_file() and filecmp.cmp(src, dest, shallow=False)):
            shutil.copyfile(src, dest)
    logger.info(f"course_vega: Vega, Vega-Lite and vega-embed in {dest_dir}")


def setup(app):
    # course_assets_cdn is declared by course_assets (listed before this extension).
    if "course_assets_cdn" not in app.config.values:
        app.add_config_value("course_assets_cdn", False, "html", types=[bool])
    app.connect("config-inited", check)
    app.connect("html-page-context", add_scripts)
    app.connect("build-finished", copy_bundles)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
