"""The architecture of a MiniGPT, drawn from its ``GPTConfig``.

``tensor_shapes(cfg, batch)`` lists the shape of every tensor the forward pass produces, in
order (the labels on the diagram's arrows); ``parameter_table(model)`` counts the parameters
of each component of a built model; ``architecture_diagram(cfg, batch)`` draws the boxes
(embedding, the n_layer pre-norm blocks, final LayerNorm, tied head, loss) with those shapes
on the arrows. ``tests/test_architecture.py`` checks the shapes against hooks on a real forward
pass and the table against ``MiniGPT.num_params()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from ..model import GPTConfig, MiniGPT
from .plotting import COLORS, finish_figure, new_figure

__all__ = ["TensorShape", "tensor_shapes", "parameter_table", "architecture_diagram"]


@dataclass(frozen=True)
class TensorShape:
    """One tensor of the forward pass: ``symbols`` names its axes (``("B", "T", "d_model")``),
    ``shape`` gives their sizes for a given config and batch."""

    symbols: tuple[str, ...]
    shape: tuple[int, ...]

    def label(self, sep: str = " = ") -> str:
        """``(B, T, d_model) = (1, 64, 96)``; a scalar is ``() scalar``."""
        if not self.shape:
            return "() scalar"
        return f"({', '.join(self.symbols)}){sep}({', '.join(str(s) for s in self.shape)})"


def tensor_shapes(
    cfg: GPTConfig, batch: int = 1, seq_len: int | None = None
) -> dict[str, TensorShape]:
    """The shapes of the tensors a MiniGPT forward pass produces, keyed by stage, in order.

    ``seq_len`` defaults to ``cfg.block_size`` (T). Stages: ids (B, T); embedding (B, T, d)
    (token + position vectors, or token vectors only with RoPE); ln1 (B, T, d); q
    (B, n_head, T, head_dim); kv (B, n_kv_heads, T, head_dim), the keys and values before they
    are shared across query-head groups; weights (B, n_head, T, T); heads
    (B, n_head, T, head_dim), the weighted values; attn_out (B, T, d) after concatenation and
    W_O; ln2 (B, T, d); mlp_hidden (B, T, 4d); mlp_out (B, T, d); block_out (B, T, d);
    final_ln (B, T, d); logits (B, T, V); loss () when targets are given.
    """
    if cfg.vocab_size is None:
        raise ValueError(
            "tensor_shapes: cfg.vocab_size is not set; use cfg.with_vocab(tokenizer.vocab_size)."
        )
    T = cfg.block_size if seq_len is None else int(seq_len)
    if batch < 1 or not 1 <= T <= cfg.block_size:
        raise ValueError(
            f"tensor_shapes: need batch >= 1 and 1 <= seq_len <= block_size={cfg.block_size}; "
            f"got batch={batch}, seq_len={T}."
        )
    B, d, H, hd, V = batch, cfg.d_model, cfg.n_head, cfg.head_dim, cfg.vocab_size
    S = TensorShape
    stream = S(("B", "T", "d_model"), (B, T, d))  # the residual stream keeps one shape throughout
    return {
        "ids": S(("B", "T"), (B, T)),
        "embedding": stream,
        "ln1": stream,
        "q": S(("B", "n_head", "T", "head_dim"), (B, H, T, hd)),
        "kv": S(("B", "n_kv_heads", "T", "head_dim"), (B, cfg.kv_heads, T, hd)),
        "weights": S(("B", "n_head", "T", "T"), (B, H, T, T)),
        "heads": S(("B", "n_head", "T", "head_dim"), (B, H, T, hd)),
        "attn_out": stream,
        "ln2": stream,
        "mlp_hidden": S(("B", "T", "4·d_model"), (B, T, 4 * d)),
        "mlp_out": stream,
        "block_out": stream,
        "final_ln": stream,
        "logits": S(("B", "T", "V"), (B, T, V)),
        "loss": S((), ()),
    }


def parameter_table(model: MiniGPT) -> list[tuple[str, int]]:
    """(component, number of parameters) of a MiniGPT, in the order of the forward pass.

    Counts come from the model's own modules (``p.numel()`` over each component's parameters,
    every distinct tensor once, so the head tied to the token embedding is not counted twice).
    Block components are summed over the n_layer blocks. The counts add up to
    ``model.num_params()``.
    """
    blocks = model.blocks
    rows = [("token embedding (= LM head, tied)", model.tok_emb)]
    if model.pos_emb is not None:
        rows.append(("position embedding", model.pos_emb))
    rows += [
        (f"LayerNorms in blocks (2 × {len(blocks)})", [m for b in blocks for m in (b.ln1, b.ln2)]),
        (f"attention W_QKV, W_O (× {len(blocks)})", [b.attn for b in blocks]),
        (f"MLP d→4d→d (× {len(blocks)})", [b.mlp for b in blocks]),
        ("final LayerNorm", model.ln_f),
    ]
    seen: set[int] = set()
    table = []
    for name, modules in rows:
        modules = modules if isinstance(modules, list) else [modules]
        n = 0
        for m in modules:
            for p in m.parameters():
                if id(p) not in seen:  # a tied tensor belongs to the first component that has it
                    seen.add(id(p))
                    n += p.numel()
        table.append((name, n))
    return table


def _box(ax, x, y, w, h, text, color, fontsize=9):
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=color,
            edgecolor="#333333",
            linewidth=1.0,
            alpha=0.95,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, x0, y0, x1, y1, label=None, label_side=1):
    ax.add_patch(
        FancyArrowPatch(
            (x0, y0),
            (x1, y1),
            arrowstyle="-|>",
            mutation_scale=11,
            color="#333333",
            linewidth=1.0,
            shrinkA=0,
            shrinkB=0,
        )
    )
    if label:
        ax.text(
            (x0 + x1) / 2 + 0.15 * label_side,
            (y0 + y1) / 2,
            label,
            ha="left" if label_side > 0 else "right",
            va="center",
            fontsize=7.5,
            color="#444444",
            family="monospace",
        )


def _add(ax, x, y, r=0.22):
    """The residual addition: a circled plus."""
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor="#333333", linewidth=1.0))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11)


def architecture_diagram(cfg: GPTConfig, batch: int = 1):
    """Draw a MiniGPT's architecture from its config: token ids -> embedding -> n_layer × (LN,
    attention, add, LN, MLP, add) -> final LN -> tied LM head -> softmax and cross-entropy.
    Arrows carry the tensor shapes of ``tensor_shapes(cfg, batch)`` (symbols and sizes); the
    boxes name the options of the config (causal or bidirectional attention, grouped-query
    heads, learned positions or RoPE, biases). Returns the closed matplotlib Figure."""
    s = tensor_shapes(cfg, batch)
    d, H, hd, V, L = cfg.d_model, cfg.n_head, cfg.head_dim, cfg.vocab_size, cfg.n_layer
    bias = "with biases" if cfg.bias else "no biases"
    if cfg.kv_heads == cfg.n_head:
        heads = f"{H} heads, head_dim {hd}"
    elif cfg.kv_heads == 1:
        heads = f"{H} query heads, 1 key/value head (MQA)"
    else:
        heads = f"{H} query heads, {cfg.kv_heads} key/value heads (GQA)"
    kind = "causal" if cfg.causal else "bidirectional (no mask)"
    rope = "; RoPE on q, k" if cfg.pos == "rope" else ""
    if cfg.pos == "learned":
        embed = f"token embedding ({V}×{d}) + position embedding ({cfg.block_size}×{d})"
    else:
        embed = f"token embedding ({V}×{d}); positions by RoPE in attention"

    fig, ax = new_figure(figsize=(8.6, 10.4))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.4, 15.2)
    ax.axis("off")
    cx, w = 3.4, 5.2  # the main column: centre and box width
    blue, orange, green, grey, pink = "#cfe3f3", "#fbe3b8", "#c7eadb", "#e6e6e6", "#f2d4e6"

    y_ids, y_emb = 14.7, 13.5
    ax.text(cx, y_ids, "token ids", ha="center", va="center", fontsize=10, weight="bold")
    _box(ax, cx, y_emb, w, 0.7, embed, grey, fontsize=8.5)
    _arrow(ax, cx, y_ids - 0.2, cx, y_emb + 0.35, s["ids"].label())

    # the repeated block, inside a dashed frame
    top, bottom = 12.6, 4.3
    ax.add_patch(
        Rectangle(
            (cx - w / 2 - 0.6, bottom),
            9.9 - (cx - w / 2 - 0.6),
            top - bottom,
            fill=False,
            linestyle="--",
            edgecolor="#777777",
            linewidth=1.0,
        )
    )
    ax.text(9.75, top - 0.25, f"× {L} blocks", ha="right", va="top", fontsize=10, weight="bold")
    y_ln1, y_att, y_add1, y_ln2, y_mlp, y_add2 = 11.5, 9.9, 8.45, 7.5, 5.9, 4.75
    _arrow(ax, cx, y_emb - 0.35, cx, y_ln1 + 0.3, s["embedding"].label())
    _box(ax, cx, y_ln1, 2.6, 0.6, f"LayerNorm ({bias})", blue)
    _arrow(ax, cx, y_ln1 - 0.3, cx, y_att + 0.6, s["ln1"].label())
    _box(
        ax,
        cx,
        y_att,
        w,
        1.2,
        f"{kind} multi-head attention\n{heads}{rope}\nsoftmax(QKᵀ/√{hd}) V, concat, W_O",
        orange,
    )
    # what happens inside the attention box, to its right
    nl = "\n      = "  # symbols on one line, sizes on the next: the column stays narrow
    inside = (
        f"q:    {s['q'].label(nl)}\nk, v: {s['kv'].label(nl)}\nweights: {s['weights'].label(nl)}"
    )
    ax.text(
        cx + w / 2 + 0.2,
        y_att,
        inside,
        ha="left",
        va="center",
        fontsize=7,
        family="monospace",
        color="#444444",
    )
    _arrow(ax, cx, y_att - 0.6, cx, y_add1 + 0.22, s["attn_out"].label())
    _add(ax, cx, y_add1)
    _arrow(ax, cx, y_add1 - 0.22, cx, y_ln2 + 0.3)
    _box(ax, cx, y_ln2, 2.6, 0.6, f"LayerNorm ({bias})", blue)
    _arrow(ax, cx, y_ln2 - 0.3, cx, y_mlp + 0.6, s["ln2"].label())
    _box(ax, cx, y_mlp, w, 1.2, f"MLP: Linear {d}→{4 * d}, GELU, Linear {4 * d}→{d}", green)
    ax.text(
        cx + w / 2 + 0.2,
        y_mlp,
        f"hidden: {s['mlp_hidden'].label(nl)}",
        ha="left",
        va="center",
        fontsize=7,
        family="monospace",
        color="#444444",
    )
    _arrow(ax, cx, y_mlp - 0.6, cx, y_add2 + 0.22, s["mlp_out"].label())
    _add(ax, cx, y_add2)
    # residual paths: the stream goes around each sub-layer and is added back
    xr = cx - w / 2 - 0.15
    for y_from, y_to in ((12.15, y_add1), (8.1, y_add2)):
        ax.plot([cx, xr, xr], [y_from, y_from, y_to], color=COLORS[0], linewidth=1.2)
        _arrow(ax, xr, y_to, cx - 0.22, y_to)
    for y_mid in ((12.15 + y_add1) / 2, (8.1 + y_add2) / 2):
        ax.text(
            xr - 0.08,
            y_mid,
            "residual",
            rotation=90,
            ha="right",
            va="center",
            fontsize=8,
            color=COLORS[0],
        )

    y_lnf, y_head, y_loss = 3.5, 2.2, 0.6
    _arrow(ax, cx, y_add2 - 0.22, cx, y_lnf + 0.3, s["block_out"].label())
    _box(ax, cx, y_lnf, 2.6, 0.6, "final LayerNorm", blue)
    _arrow(ax, cx, y_lnf - 0.3, cx, y_head + 0.35, s["final_ln"].label())
    _box(
        ax,
        cx,
        y_head,
        w,
        0.7,
        f"LM head: Linear {d}→{V}, tied to the token embedding",
        pink,
        fontsize=8.5,
    )
    _arrow(ax, cx, y_head - 0.35, cx, y_loss + 0.35, s["logits"].label())
    _box(ax, cx, y_loss, w, 0.7, "softmax + cross-entropy with the next tokens", grey, fontsize=8.5)
    ax.text(
        cx + w / 2 + 0.2,
        y_loss,
        f"loss: {s['loss'].label()}",
        ha="left",
        va="center",
        fontsize=7.5,
        family="monospace",
        color="#444444",
    )
    return finish_figure(fig)
