"""course_lib.viz.architecture: the shapes on the diagram are the shapes a real forward pass
produces (forward hooks on the model's modules), and the parameter table adds up to
MiniGPT.num_params() and to the closed-form counts."""

import matplotlib.pyplot as plt
import pytest
import torch

import course_lib.model as model_module
from course_lib.attention import keep_attention_weights
from course_lib.model import GPTConfig, MiniGPT
from course_lib.viz.architecture import architecture_diagram, parameter_table, tensor_shapes

CONFIGS = {
    "chapter-like": GPTConfig(
        vocab_size=23, block_size=12, n_layer=2, n_head=4, d_model=32, bias=False
    ),
    "gqa-rope-encoder": GPTConfig(
        vocab_size=17,
        block_size=10,
        n_layer=3,
        n_head=4,
        d_model=24,
        n_kv_heads=2,
        pos="rope",
        causal=False,
    ),
    "mqa": GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16, n_kv_heads=1),
}


def observed_shapes(cfg: GPTConfig, batch: int, seq_len: int) -> dict[str, tuple]:
    """Run one forward pass (from-scratch attention, so the weights exist) and record the
    shape of every tensor the diagram labels, from hooks on the first block's modules."""
    torch.manual_seed(0)
    cfg = GPTConfig(**{**cfg.to_dict(), "attention": "course_lib"})
    model = MiniGPT(cfg).eval()
    seen: dict[str, tuple] = {}
    block = model.blocks[0]
    emb_module = model.pos_emb if model.pos_emb is not None else model.tok_emb
    hooks = {
        "embedding": emb_module,
        "ln1": block.ln1,
        "attn_out": block.attn,
        "ln2": block.ln2,
        "mlp_hidden": block.mlp.fc,
        "mlp_out": block.mlp,
        "block_out": block,
        "final_ln": model.ln_f,
        "logits": model.lm_head,
    }

    def recorder(key):
        def hook(module, inputs, output):
            # the first call: block 0 (returns None: output kept)
            seen.setdefault(key, tuple(output.shape))

        return hook

    handles = [m.register_forward_hook(recorder(k)) for k, m in hooks.items()]
    split_calls, attn_calls = [], []
    real_split, real_sdpa = model_module.split_heads, model_module.scaled_dot_product_attention

    def split(x, n):
        out = real_split(x, n)
        split_calls.append(tuple(out.shape))
        return out

    def sdpa(q, k, v, mask=None):
        out, w = real_sdpa(q, k, v, mask)
        attn_calls.append((tuple(out.shape), tuple(w.shape)))
        return out, w

    idx = torch.randint(0, cfg.vocab_size, (batch, seq_len))  # (B, T)
    targets = torch.randint(0, cfg.vocab_size, (batch, seq_len))  # (B, T)
    model_module.split_heads, model_module.scaled_dot_product_attention = split, sdpa
    try:
        with keep_attention_weights(model):
            logits, loss = model(idx, targets)
    finally:
        model_module.split_heads, model_module.scaled_dot_product_attention = real_split, real_sdpa
        for h in handles:
            h.remove()
    seen["ids"] = tuple(idx.shape)
    seen["q"], seen["kv"] = split_calls[0], split_calls[1]  # block 0: q, then k (v has k's shape)
    assert split_calls[1] == split_calls[2]
    seen["heads"], seen["weights"] = attn_calls[0]
    assert tuple(block.attn.attn_weights.shape) == seen["weights"]
    seen["loss"] = tuple(loss.shape)
    assert tuple(logits.shape) == seen["logits"]
    return seen


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("batch, seq_len", [(1, None), (3, 5)])
def test_labelled_shapes_match_a_forward_pass(name, batch, seq_len):
    cfg = CONFIGS[name]
    T = cfg.block_size if seq_len is None else seq_len
    labelled = {k: s.shape for k, s in tensor_shapes(cfg, batch, seq_len).items()}
    assert labelled == observed_shapes(cfg, batch, T)


def test_symbols_name_every_axis():
    shapes = tensor_shapes(CONFIGS["gqa-rope-encoder"], batch=2)
    for key, s in shapes.items():
        assert len(s.symbols) == len(s.shape), key
    assert shapes["kv"].label() == "(B, n_kv_heads, T, head_dim) = (2, 2, 10, 6)"
    assert shapes["loss"].label() == "() scalar"


@pytest.mark.parametrize("name", CONFIGS)
def test_parameter_table_adds_up_to_num_params(name):
    cfg = CONFIGS[name]
    model = MiniGPT(cfg)
    table = parameter_table(model)
    assert sum(n for _, n in table) == model.num_params()
    # an independent count: every distinct tensor of the state dict (the tied head once)
    distinct = {p.data_ptr(): p.numel() for p in model.state_dict(keep_vars=True).values()}
    assert sum(distinct.values()) == sum(n for _, n in table)
    assert all(n > 0 for _, n in table)
    assert any("position" in row for row, _ in table) == (cfg.pos == "learned")


def test_parameter_table_matches_closed_form():
    cfg = CONFIGS["chapter-like"]  # no biases: LayerNorms have only their scale
    V, T, d, L = cfg.vocab_size, cfg.block_size, cfg.d_model, cfg.n_layer
    got = [n for _, n in parameter_table(MiniGPT(cfg))]
    assert got == [V * d, T * d, L * 2 * d, L * 4 * d * d, L * 8 * d * d, d]


def test_diagram_draws_the_config():
    cfg = CONFIGS["gqa-rope-encoder"]
    fig = architecture_diagram(cfg, batch=2)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for s in tensor_shapes(cfg, batch=2).values():
        assert s.label("\n      = ") in texts or s.label() in texts
    assert "bidirectional" in texts and "RoPE" in texts and "2 key/value heads" in texts
    assert f"× {cfg.n_layer} blocks" in texts and "position embedding" not in texts
    plt.close(fig)


def test_bad_input_raises_readable_errors():
    with pytest.raises(ValueError, match="vocab_size"):
        tensor_shapes(GPTConfig())
    with pytest.raises(ValueError, match="seq_len"):
        tensor_shapes(CONFIGS["mqa"], seq_len=100)


def _extents(fig):
    """Each visible text of the figure -> its drawn box (display units)."""
    renderer = fig.canvas.get_renderer()
    return [
        (t.get_text(), t.get_window_extent(renderer))
        for t in fig.axes[0].texts
        if t.get_visible() and t.get_text().strip()
    ]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_phone_drawing_reads_on_a_phone(name):
    """The site shows a phone the diagram's own narrow drawing (issue 29: the wide one's
    shapes came out 3.9 px there): every text at least MIN_PHONE_PX on a phone, the same
    shapes, inside the figure, and no two texts on top of each other; boxes hold their text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patches import FancyBboxPatch

    from course_lib.viz import plotting as P

    cfg = CONFIGS[name]
    fig = architecture_diagram(cfg, batch=2)
    tall = P.narrow_layout(fig)
    assert tall is not None and tall is not fig
    assert tall.get_size_inches()[0] == pytest.approx(P.NARROW_WIDTH)
    assert P.phone_text_px(fig) < P.MIN_PHONE_PX <= P.phone_text_px(tall)
    texts = " ".join(t.get_text() for t in tall.axes[0].texts)
    for s in tensor_shapes(cfg, batch=2).values():
        sizes = s.label().split(" = ")[-1]
        assert sizes in texts and (s.label("\n= ") in texts or s.symbols[0] in texts)
    FigureCanvasAgg(tall).draw()  # a closed figure has no canvas that draws
    extents = _extents(tall)
    frame = tall.bbox
    for text, box in extents:
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, f"{text!r} runs off the figure"
    for i, (a, box_a) in enumerate(extents):
        for b, box_b in extents[i + 1 :]:
            assert not box_a.shrunk(0.98, 0.9).overlaps(box_b), f"{a!r} overlaps {b!r}"
    boxes = [p.get_window_extent() for p in tall.axes[0].patches if isinstance(p, FancyBboxPatch)]
    for text, box in extents:  # a text inside a box is no wider than the box
        around = [b for b in boxes if b.contains(*box.get_points().mean(0))]
        if around:
            assert box.width < min(b.width for b in around), f"{text!r} is wider than its box"
    plt.close(fig)
    plt.close(tall)
