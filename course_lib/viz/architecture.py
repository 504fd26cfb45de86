"""The architecture of a MiniGPT, drawn from its ``GPTConfig``.

``tensor_shapes(cfg, batch)`` lists the shape of every tensor the forward pass produces, in
order (the labels on the diagram's arrows); ``parameter_table(model)`` counts the parameters
of each component of a built model; ``architecture_diagram(cfg, batch)`` draws the boxes
(embedding, the n_layer pre-norm blocks, final LayerNorm, tied head, loss) with those shapes
on the arrows. ``tests/viz/test_architecture.py`` checks the shapes against hooks on a real forward
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


def _note(ax, x, y, text, fontsize, ha="left", va="center"):
    """A shape beside (or inside) a box: grey monospace."""
    ax.text(
        x,
        y,
        text,
        ha=ha,
        va=va,
        fontsize=fontsize,
        family="monospace",
        color="#444444",
        multialignment="left",
    )


def _arrow(ax, x0, y0, x1, y1, label=None, fontsize=7.5):
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
        _note(ax, (x0 + x1) / 2 + 0.15, (y0 + y1) / 2, label, fontsize)


def _add(ax, x, y, r=0.22):
    """The residual addition: a circled plus."""
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor="#333333", linewidth=1.0))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11)


@dataclass(frozen=True)
class _Layout:
    """Where the diagram's parts sit (data units: x from 0 to 10, y as ``ylim``) and how big
    its texts are (points). ``inside``: the shapes inside the attention and MLP boxes, under
    their names (a phone: no room beside them), rather than beside the boxes."""

    figsize: tuple[float, float]
    ylim: tuple[float, float]
    cx: float  # the main column's centre
    w: float  # and the width of its wide boxes
    y: dict  # stage -> height of its box (or label)
    h: dict  # stage -> the box's height
    top: float  # the dashed frame of the repeated block
    bottom: float
    font: float  # box texts
    small: float  # texts in the smaller boxes (embedding, head, loss)
    shape: float  # shapes on the arrows and beside the boxes
    inside: bool
    add_r: float = 0.22  # the circled plus
    ln_w: float = 2.6  # the LayerNorm boxes' width
    sep: str = " = "  # between a shape's symbols and its sizes on the arrows


_WIDE = _Layout(
    figsize=(8.6, 10.4),
    ylim=(-0.4, 15.2),
    cx=3.4,
    w=5.2,
    y=dict(
        ids=14.7,
        emb=13.5,
        ln1=11.5,
        att=9.9,
        add1=8.45,
        ln2=7.5,
        mlp=5.9,
        add2=4.75,
        lnf=3.5,
        head=2.2,
        loss=0.6,
    ),
    h=dict(emb=0.7, ln=0.6, att=1.2, mlp=1.2, head=0.7, loss=0.7),
    top=12.6,
    bottom=4.3,
    font=9,
    small=8.5,
    shape=7.5,
    inside=False,
)
#: A phone's drawing: 5 inches wide (a phone shows it about 1 CSS px per point), every text
#: at least 9 points, the shapes inside the boxes they belong to and on two lines (symbols,
#: then sizes). Half an inch per unit both ways.
_TALL = _Layout(
    figsize=(5.0, 12.2),
    ylim=(3.4, 27.8),
    cx=4.6,
    w=7.4,
    y=dict(
        ids=27.4,
        emb=25.6,
        ln1=23.15,
        att=19.6,
        add1=16.5,
        ln2=15.25,
        mlp=12.95,
        add2=10.7,
        lnf=8.45,
        head=6.5,
        loss=4.5,
    ),
    h=dict(emb=1.0, ln=0.7, att=4.0, mlp=1.5, head=0.8, loss=0.8),
    top=24.85,
    bottom=10.2,
    font=9.5,
    small=9,
    shape=9,
    inside=True,
    add_r=0.3,
    ln_w=4.6,
    sep="\n= ",
)


def architecture_diagram(cfg: GPTConfig, batch: int = 1):
    """Draw a MiniGPT's architecture from its config: token ids -> embedding -> n_layer × (LN,
    attention, add, LN, MLP, add) -> final LN -> tied LM head -> softmax and cross-entropy.
    Arrows carry the tensor shapes of ``tensor_shapes(cfg, batch)`` (symbols and sizes); the
    boxes name the options of the config (causal or bidirectional attention, grouped-query
    heads, learned positions or RoPE, biases). Returns the closed matplotlib Figure, whose
    phone layout (what the site shows on a narrow screen, ``finish_figure(narrow=...)``) is the
    same diagram drawn narrower and taller, with the shapes inside the boxes and every text at
    least 8 CSS px on a phone."""
    tall = finish_figure(_draw(cfg, batch, _TALL))
    return finish_figure(_draw(cfg, batch, _WIDE), narrow=tall)


def _draw(cfg: GPTConfig, batch: int, lay: _Layout):
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
    # RoPE on a line of its own on a phone (the box is narrow)
    rope = ("\n" if lay.inside else "; ") + "RoPE on q, k" if cfg.pos == "rope" else ""
    sep = "\n" if lay.inside else " "  # a phone's box is narrow: the embedding on two lines
    if cfg.pos == "learned":
        embed = f"token embedding ({V}×{d}){sep}+ position embedding ({cfg.block_size}×{d})"
    else:
        embed = f"token embedding ({V}×{d});{sep}positions by RoPE in attention"

    fig, ax = new_figure(figsize=lay.figsize)
    ax.set_xlim(0, 10)
    ax.set_ylim(*lay.ylim)
    ax.axis("off")
    cx, w, y, h, r = lay.cx, lay.w, lay.y, lay.h, lay.add_r
    blue, orange, green, grey, pink = "#cfe3f3", "#fbe3b8", "#c7eadb", "#e6e6e6", "#f2d4e6"

    def arrow(y0, y1, stage=None):  # down the main column, with the tensor's shape beside it
        _arrow(ax, cx, y0, cx, y1, s[stage].label(lay.sep) if stage else None, lay.shape)

    ax.text(cx, y["ids"], "token ids", ha="center", va="center", fontsize=10, weight="bold")
    _box(ax, cx, y["emb"], w, h["emb"], embed, grey, fontsize=lay.small)
    arrow(y["ids"] - 0.2, y["emb"] + h["emb"] / 2, "ids")

    # the repeated block, inside a dashed frame
    left = cx - w / 2 - 0.6
    ax.add_patch(
        Rectangle(
            (left, lay.bottom),
            9.9 - left,
            lay.top - lay.bottom,
            fill=False,
            linestyle="--",
            edgecolor="#777777",
            linewidth=1.0,
        )
    )
    blocks = f"× {L} blocks"
    ax.text(9.75, lay.top - 0.25, blocks, ha="right", va="top", fontsize=10, weight="bold")
    ln, att, mlp = h["ln"] / 2, h["att"] / 2, h["mlp"] / 2
    arrow(y["emb"] - h["emb"] / 2, y["ln1"] + ln, "embedding")
    _box(ax, cx, y["ln1"], lay.ln_w, h["ln"], f"LayerNorm ({bias})", blue, lay.font)
    arrow(y["ln1"] - ln, y["att"] + att, "ln1")
    what = f"{kind} multi-head attention\n{heads}{rope}\nsoftmax(QKᵀ/√{hd}) V, concat, W_O"
    if lay.inside:  # the shapes under the box's name, symbols and sizes on two lines each
        pad = "\n" + " " * 9 + "= "
        shapes = "\n".join(
            f"{k:<9}{s[stage].label(pad)}"
            for k, stage in (("q:", "q"), ("k, v:", "kv"), ("weights:", "weights"))
        )
        _box(ax, cx, y["att"], w, h["att"], "", orange)
        ax.text(cx, y["att"] + att - 0.15, what, ha="center", va="top", fontsize=lay.font)
        _note(ax, cx, y["att"] - att + 0.2, shapes, lay.shape, ha="center", va="bottom")
    else:  # beside the box, symbols on one line, sizes on the next: the column stays narrow
        _box(ax, cx, y["att"], w, h["att"], what, orange, lay.font)
        nl = "\n      = "
        inside = (
            f"q:    {s['q'].label(nl)}\nk, v: {s['kv'].label(nl)}\n"
            f"weights: {s['weights'].label(nl)}"
        )
        _note(ax, cx + w / 2 + 0.2, y["att"], inside, 7)
    arrow(y["att"] - att, y["add1"] + r, "attn_out")
    _add(ax, cx, y["add1"], r)
    arrow(y["add1"] - r, y["ln2"] + ln)
    _box(ax, cx, y["ln2"], lay.ln_w, h["ln"], f"LayerNorm ({bias})", blue, lay.font)
    arrow(y["ln2"] - ln, y["mlp"] + mlp, "ln2")
    what = f"MLP: Linear {d}→{4 * d}, GELU, Linear {4 * d}→{d}"
    if lay.inside:
        _box(ax, cx, y["mlp"], w, h["mlp"], "", green)
        ax.text(cx, y["mlp"] + mlp - 0.15, what, ha="center", va="top", fontsize=lay.font)
        hidden = f"{'hidden:':<9}{s['mlp_hidden'].label(pad)}"
        _note(ax, cx, y["mlp"] - mlp + 0.15, hidden, lay.shape, ha="center", va="bottom")
    else:
        _box(ax, cx, y["mlp"], w, h["mlp"], what, green, lay.font)
        _note(ax, cx + w / 2 + 0.2, y["mlp"], f"hidden: {s['mlp_hidden'].label(nl)}", 7)
    arrow(y["mlp"] - mlp, y["add2"] + r, "mlp_out")
    _add(ax, cx, y["add2"], r)
    # residual paths: the stream goes around each sub-layer and is added back
    xr = cx - w / 2 - 0.15
    starts = (y["ln1"] + ln + 0.35, y["add1"] - r - 0.13)  # on the arrows in
    for y_from, y_to in zip(starts, (y["add1"], y["add2"])):
        ax.plot([cx, xr, xr], [y_from, y_from, y_to], color=COLORS[0], linewidth=1.2)
        _arrow(ax, xr, y_to, cx - r, y_to)
        ax.text(
            xr - 0.08,
            (y_from + y_to) / 2,
            "residual",
            rotation=90,
            ha="right",
            va="center",
            fontsize=max(8, lay.shape),
            color=COLORS[0],
        )

    arrow(y["add2"] - r, y["lnf"] + ln, "block_out")
    _box(ax, cx, y["lnf"], lay.ln_w, h["ln"], "final LayerNorm", blue, lay.font)
    arrow(y["lnf"] - ln, y["head"] + h["head"] / 2, "final_ln")
    head = f"LM head: Linear {d}→{V}, tied to the token embedding"
    _box(ax, cx, y["head"], w, h["head"], head, pink, fontsize=lay.small)
    arrow(y["head"] - h["head"] / 2, y["loss"] + h["loss"] / 2, "logits")
    loss = "softmax + cross-entropy with the next tokens"
    _box(ax, cx, y["loss"], w, h["loss"], loss, grey, fontsize=lay.small)
    if lay.inside:
        _note(
            ax,
            cx,
            y["loss"] - h["loss"] / 2 - 0.15,
            f"loss: {s['loss'].label()}",
            lay.shape,
            ha="center",
            va="top",
        )
    else:
        _note(ax, cx + w / 2 + 0.2, y["loss"], f"loss: {s['loss'].label()}", lay.shape)
    return fig
