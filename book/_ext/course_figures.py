"""Multi-panel figures that read on a phone: the narrow layout on narrow screens.

A figure with panels side by side (four bar charts in a row) shrinks to the width of a phone
screen with everything in it, tick labels included, down to 3-4 px. When the site is built,
``course_lib.viz`` displays such a figure with two outputs: the usual SVG, and (output type
``NARROW_MIME``, set up by :func:`setup` through an environment variable the executing kernels
inherit) the same figure with its panels stacked, about 5 inches wide
(``course_lib.viz.plotting.narrow_layout``). Jupyter and Colab show the usual SVG only.

This extension

- renders the narrow output as an image next to the wide one (myst-nb renders every output
  type of a bundle when it parses a notebook, and chooses one per builder afterwards; it has
  no renderer for ours, so :func:`_render_mime_type` supplies it);
- before myst-nb's choice (the ``SelectMimeType`` post-transform), joins the two images into one
  :class:`course_picture` node, which the HTML writer writes as ``<picture><source
  media="screen and (max-width: 640px)" srcset="narrow.svg"><img src="wide.svg"></picture>``:
  the browser fetches only the one it shows, so a page gets no heavier on a desktop. Print
  (the PDF, tools/pdf.py) keeps the wide layout, as a desktop does. The
  ``<img>`` keeps the cell's alt text and the figure its caption, name and number (the picture
  sits where the image was, inside myst-nb's figure). A tap opens the wide figure full size,
  as for every other figure of the site (the link ``course_site.zoomable_images`` adds to
  images that are not in one);
- for builders other than HTML, drops the narrow output (the wide figure is the figure).

The ``<picture>`` carries ``data-panels``, ``data-grid`` (the narrow rows x columns) and
``data-tick-pt`` (the smallest tick-label size in points; a diagram's smallest text) for
tests/book/test_figures_browser.py.

A diagram (one axes of boxes and labels) has no panels to stack; its phone layout is a second
drawing of it, narrower and taller, which the chapter hands over with
``finish_figure(fig, narrow=phone_figure)`` and which travels the same way.
"""

from __future__ import annotations

import html
import json
import os
import posixpath
import urllib.parse

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

NARROW_MIME = "application/vnd.course.narrow-figure+json"  # = course_lib.viz.plotting.NARROW_MIME
NARROW_ENV = "COURSE_NARROW_FIGURES"  # = course_lib.viz.NARROW_ENV
WIDE_MIME = "image/svg+xml"
#: Screens at most this wide (CSS px) get the narrow layout: phones in either orientation and
#: small tablets in portrait. Wider screens and print get the wide one.
BREAKPOINT = 640


class course_picture(nodes.General, nodes.Element):
    """A wide and a narrow image (children 0 and 1) of one figure."""


def _render_mime_type(original):
    def render_mime_type(self, data):
        if data.mime_type != NARROW_MIME:
            return original(self, data)
        from myst_nb.core.render import MimeData

        content = data.content if isinstance(data.content, dict) else json.loads(data.string)
        images = self.render_image(
            MimeData(
                WIDE_MIME,
                content["svg"],
                cell_metadata=data.cell_metadata,
                output_metadata={},
                cell_index=data.cell_index,
                output_index=data.output_index,
                line=data.line,
            )
        )
        for image in images:
            image["course_narrow"] = {k: content[k] for k in ("panels", "grid", "tick_pt")}
        return images

    render_mime_type.course_figures = True
    return render_mime_type


def _patch_myst_nb() -> None:
    from myst_nb.core.render import NbElementRenderer

    if not getattr(NbElementRenderer.render_mime_type, "course_figures", False):
        NbElementRenderer.render_mime_type = _render_mime_type(NbElementRenderer.render_mime_type)


class JoinNarrowFigures(SphinxPostTransform):
    """Join each bundle's wide and narrow images into one ``course_picture`` (HTML), or drop
    the narrow one (other builders); before myst-nb picks one output type per bundle."""

    default_priority = 3  # myst_nb.sphinx_.SelectMimeType runs at 4

    def run(self, **kwargs) -> None:
        html_builder = self.app.builder.format == "html"
        for bundle in list(self.document.findall(nodes.container)):
            if bundle.get("nb_element") != "mime_bundle":
                continue
            by_type = {child.get("mime_type"): child for child in bundle.children}
            narrow = by_type.get(NARROW_MIME)
            if narrow is None:
                continue
            wide = by_type.get(WIDE_MIME)
            bundle.remove(narrow)
            if not html_builder or wide is None:
                continue
            wide_images = [n for n in wide.children if isinstance(n, nodes.image)]
            narrow_images = [n for n in narrow.children if isinstance(n, nodes.image)]
            if len(wide_images) != 1 or len(narrow_images) != 1:
                continue
            picture = course_picture("", wide_images[0].deepcopy(), narrow_images[0].deepcopy())
            picture["narrow"] = narrow_images[0]["course_narrow"]
            wide.children = []
            wide += picture


def _final_uri(translator, image) -> str:
    """The image's address in the written page (as Sphinx's HTML writer rewrites it)."""
    uri = image["uri"]
    if uri in translator.builder.images:
        uri = posixpath.join(
            translator.builder.imgpath, urllib.parse.quote(translator.builder.images[uri])
        )
    return uri


def visit_course_picture(self, node) -> None:
    wide, narrow = node.children
    info = node["narrow"]
    wide_src, narrow_src = _final_uri(self, wide), _final_uri(self, narrow)
    grid = "x".join(str(n) for n in info["grid"])
    self.body.append(
        f'<a class="course-zoom" href="{html.escape(wide_src)}" title="Open the figure full size">'
        f'<picture class="course-narrow-figure" data-panels="{info["panels"]}" data-grid="{grid}" '
        f'data-tick-pt="{info["tick_pt"]:g}">'
        f'<source media="screen and (max-width: {BREAKPOINT}px)" '
        f'srcset="{html.escape(narrow_src)}" '
        f'type="image/svg+xml">'
    )
    wide.walkabout(self)  # Sphinx's own <img>: alt text, classes
    self.body.append("</picture></a>")
    raise nodes.SkipNode


def visit_skip(self, node) -> None:
    raise nodes.SkipNode


def setup(app):
    # The kernels that execute the chapters inherit this; course_lib.viz reads it.
    os.environ[NARROW_ENV] = "1"
    _patch_myst_nb()
    app.add_node(course_picture, html=(visit_course_picture, None))
    app.add_post_transform(JoinNarrowFigures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
