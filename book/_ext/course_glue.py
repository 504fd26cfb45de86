"""Hide the ``glue(...)`` bookkeeping from the site's code cells.

Chapters hand every number they quote to the prose with ``glue("name", value)``; on a page
those calls crowd the code a reader came to read. This extension removes them from the
*displayed* input of each executed cell, after parsing and before writing, so

- the notebook itself is untouched: Jupyter, Colab and the execution cache see every call,
  and the glued values still reach the prose;
- only whole statements go (``tools.glue_code.strip_glue``, which the reader notebooks use
  too: what goes and what stays is said there);
- a cell left with no code keeps its outputs and loses its (empty) input box.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))
from tools.glue_code import strip_glue  # noqa: E402

__all__ = ["strip_glue", "hide_glue"]


def hide_glue(app, doctree) -> None:
    """doctree-read: rewrite each code cell's displayed source."""
    for cell_input in list(doctree.findall(nodes.container)):
        if cell_input.get("nb_element") != "cell_code_source":
            continue
        for block in list(cell_input.findall(nodes.literal_block)):
            text = block.astext()
            new = strip_glue(text)
            if new == text:
                continue
            if not new.strip():
                cell_input.parent.remove(cell_input)
                break
            # rawsource must equal the text, or Sphinx stops highlighting the block.
            replacement = nodes.literal_block(new, new, **block.attributes)
            block.replace_self(replacement)


def setup(app):
    app.connect("doctree-read", hide_glue)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
