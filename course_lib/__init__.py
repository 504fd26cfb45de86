"""course_lib: the code behind the Understanding Transformers course.

Chapters import from here instead of copying helpers from page to page:

    from course_lib import scaled_dot_product_attention, cross_entropy, attention_heatmap

Modules, one concept each:

- ``attention``: softmax, masks, scaled dot-product and multi-head attention, positions
- ``loss``, ``lm_loss``: cross-entropy, perplexity, their gradient; language-model losses
- ``plotting``, ``widgets``, ``glue``: the course's figures, explorers and glued numbers
- ``rnn`` (Ch. 1), ``matrices`` (Ch. 2), ``embeddings``, ``positions``, ``rope`` (Ch. 3),
  ``attention_scaling``, ``attention_cost`` (Ch. 4), ``handcalc``, ``worksheet``,
  ``worked_sheets`` (Ch. 5), ``backprop``, ``optim``, ``schedule`` (Ch. 7)
- ``corpus``, ``data``, ``model``, ``train`` (Ch. 8: the Shakespeare corpus and MiniGPT)
- ``exercises``, ``checks``, ``grade``: exercise notebooks and their grader
- ``colab``: the Colab set-up cells and paired notebooks; ``bench``: chapter timings
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
from .loss import cross_entropy, cross_entropy_grad, log_softmax, perplexity
from .glue import glue
from .plotting import attention_heatmap, bar_probs, loss_curve, positional_heatmap

__version__ = "0.1.0"
