"""course_lib: the code behind the Understanding Transformers course.

Chapters import from here instead of copying helpers from page to page::

    from course_lib import scaled_dot_product_attention, causal_mask, attention_heatmap, glue

Rooms: the core modules, flat like nanoGPT (what two or more chapters use: the math and the
model they train); ``labs`` (what one chapter uses: its models, training loops and
experiments); ``handcalc`` (Chapter 5's hand calculation);
``viz`` (what a chapter shows); ``grading`` (the exercises' checks and the grader). The one
map of modules, and the import rules between rooms, are in CONTRIBUTING.md ("Rooms").

Importing ``course_lib`` (or ``course_lib.model``, ``course_lib.train``) loads torch only:
the plotting names below are resolved on first use, so a training worker or a grading kernel
never loads matplotlib or myst-nb.
"""

from .attention import (
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_positions,
    softmax,
    split_heads,
)

__version__ = "0.1.0"

__all__ = [
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "causal_mask",
    "merge_heads",
    "padding_mask",
    "scaled_dot_product_attention",
    "sinusoidal_positions",
    "softmax",
    "split_heads",
]  # and the lazy names below (not in __all__: a star import would load matplotlib)

# name -> module of the viz room, imported on first use (PEP 562)
_LAZY = {
    "glue": "course_lib.viz.glue",
    "sci": "course_lib.viz.glue",
    "table_column": "course_lib.viz.glue",
    "attention_heatmap": "course_lib.viz.plotting",
    "bar_probs": "course_lib.viz.plotting",
    "loss_curve": "course_lib.viz.plotting",
    "positional_heatmap": "course_lib.viz.plotting",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY])
