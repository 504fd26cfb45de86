"""Facts the chapters state in prose, each glued from code: the chapter's own cells are run
(import cell, then the cells that glue the names) and every glued value is compared with an
independent computation here, so a number cannot drift from what it describes.

The trained model's copying behaviour (Chapter 8) needs the chapter's training run, so that
one is read from the built book (slow tier).
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from course_lib.viz.glue import sci
from tools import ROOT

BOOK = ROOT / "book"


def _code_cells(page: str) -> list[str]:
    import jupytext

    nb = jupytext.read(BOOK / f"{page}.md")
    return [c.source for c in nb.cells if c.cell_type == "code"]


def glued(page: str, *names: str, also: tuple[str, ...] = ()) -> dict:
    """Run the import cell of book/<page>.md and then, in page order, every code cell that
    glues one of ``names`` or contains one of the strings in ``also`` (cells those need), with
    ``glue`` recording instead of displaying; return name -> value for all they glue."""
    cells = _code_cells(page)
    imports = next(c for c in cells if "from course_lib import" in c and "glue" in c)
    wanted = [c for c in cells if any(f'glue("{n}"' in c for n in names) or any(a in c for a in also)]
    missing = [n for n in names if not any(f'glue("{n}"' in c for c in wanted)]
    assert not missing, f"{page}: no cell glues {missing}"
    recorded: dict = {}
    ns: dict = {"__name__": "__chapter__"}
    exec(compile(imports, f"{page}:imports", "exec"), ns)
    ns["glue"] = lambda name, value, display=False: recorded.__setitem__(name, value)
    for i, cell in enumerate(wanted):
        exec(compile(cell, f"{page}:cell{i}", "exec"), ns)
    return recorded


def corpus_characters() -> int:
    """Distinct characters of the shipped corpus, read straight from the file."""
    from course_lib.corpus import CORPUS_PATH

    return len(set(CORPUS_PATH.read_text(encoding="utf-8")))


def chapter_config() -> dict:
    return json.loads((ROOT / "course_lib" / "configs" / "chapter.json").read_text())


def test_keys_is_as_far_from_are_as_the_chapter_says():
    # the example sentence as the page shows it, with its two bold words
    quote = re.search(r"^> (.*\*\*keys\*\*.*\*\*are\*\*.*)$", (BOOK / "01_why_transformers.md").read_text(), re.M)
    words = quote.group(1).split()
    keys, are = words.index("**keys**"), words.index("**are**")
    g = glued("01_why_transformers", "keys_distance", "stairs_distance")
    assert g["keys_distance"] == str(are - keys) == "11"
    assert g["stairs_distance"] == str(are - words.index("stairs")) == "1"


def test_vocabulary_and_uniform_loss_are_the_corpus_own():
    n = corpus_characters()
    g6 = glued("06_cross_entropy", "n_chars", "ln_n_chars")
    assert g6["n_chars"] == str(n)
    assert g6["ln_n_chars"] == f"{math.log(n):.3f}"
    g8 = glued("08_training", "vocab")
    assert g8["vocab"] == n


def test_float16_overflow_threshold():
    g = glued("06_cross_entropy", "fp16_max", "fp16_exp_limit", "fp32_exp_limit")
    fp16_max = float(np.finfo(np.float16).max)  # numpy's, not torch's
    assert g["fp16_max"] == f"{fp16_max:,.0f}" == "65,504"
    assert g["fp16_exp_limit"] == f"{math.log(fp16_max):.2f}"
    with np.errstate(over="ignore"):  # just past it, exp is infinite
        assert np.isinf(np.exp(np.float16(math.log(fp16_max) + 0.01)))
    assert g["fp32_exp_limit"] == f"{math.log(float(np.finfo(np.float32).max)):.1f}"


def test_warmup_quoted_in_chapter_7_is_chapter_8s():
    cfg = chapter_config()
    g = glued("07_gradients", "ch8_warmup", "ch8_steps")
    assert (g["ch8_warmup"], g["ch8_steps"]) == (str(cfg["warmup_steps"]), str(cfg["max_steps"]))
    assert 0 < cfg["warmup_steps"] < cfg["max_steps"]


def test_chapter_8_counts_and_batch_describe_the_trained_model():
    cfg, V = chapter_config(), corpus_characters()
    m = cfg["model"]
    assert m["bias"] is False
    d, T, L = m["d_model"], m["block_size"], m["n_layer"]
    # embeddings, per block 12 d^2 (attention 4, MLP 8) + two LayerNorm gains, final LayerNorm
    expected = V * d + T * d + L * (12 * d * d + 2 * d) + d
    g = glued("08_training", "n_params_trained", "tied_saving_trained", "batch_size", "block_size",
              "half_batch", "half_block", also=("text = load_corpus()", "train_ids, val_ids ="))
    assert g["n_params_trained"] == f"{expected:,}"
    assert g["tied_saving_trained"] == f"{V * d:,}"
    assert (g["batch_size"], g["block_size"]) == (cfg["batch_size"], T)
    assert (g["half_batch"], g["half_block"]) == (cfg["batch_size"] // 2, T // 2)


def test_tied_embedding_gets_gradient_in_every_row_untied_only_in_looked_up_rows():
    from course_lib.model import GPTConfig, MiniGPT

    _ = torch.manual_seed(0)
    model = MiniGPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, d_model=8))
    assert model.lm_head.weight is model.tok_emb.weight, "MiniGPT ties the output layer to the embedding"
    x = torch.tensor([[0, 1, 0, 1]])  # (1, 4): only tokens 0 and 1
    _, loss = model(x, torch.tensor([[1, 0, 1, 0]]))
    loss.backward()
    rows_with_grad = (model.tok_emb.weight.grad.abs().sum(-1) > 0).tolist()
    assert all(rows_with_grad), "tied: every row scores every position, so every row gets a gradient"
    table = torch.randn(10, 8, requires_grad=True)
    torch.nn.functional.embedding(x, table).sum().backward()
    assert (table.grad.abs().sum(-1) > 0).tolist() == [True, True] + [False] * 8


def test_gelu_numbers_of_chapter_8():
    g = glued("08_training", "gelu_min", "gelu_argmin", "gelu_slope_neg1", "gelu_tanh_gap")
    x = np.linspace(-4, 4, 801)  # the chapter's grid, in numpy with math.erf
    phi = np.vectorize(lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2))))(x)  # Φ(x)
    gelu = x * phi
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    i = int(gelu.argmin())
    assert (g["gelu_min"], g["gelu_argmin"]) == (f"{gelu[i]:.3f}", f"{x[i]:.2f}")
    # d/dx x Φ(x) = Φ(x) + x φ(x), at x = -1
    slope = 0.5 * (1 + math.erf(-1 / math.sqrt(2))) - math.exp(-0.5) / math.sqrt(2 * math.pi)
    assert g["gelu_slope_neg1"] == f"{slope:.3f}"
    assert g["gelu_tanh_gap"] == sci(np.abs(gelu - tanh_form).max(), 1)


def test_raw_position_index_numbers_of_chapter_3():
    g = glued("03_embeddings", "raw_token_norm", "raw_index_max", "raw_neighbour_gap", "raw_pe_norm", "raw_d")
    d, T = int(g["raw_d"]), int(g["raw_index_max"]) + 1
    assert g["raw_neighbour_gap"] == f"{1 / (T - 1):.4f}"
    assert g["raw_pe_norm"] == f"{math.sqrt(d / 2):.3f}"  # each sine-cosine pair has length 1
    # a vector of d entries of standard deviation 0.02 is about 0.02 √d long
    assert abs(float(g["raw_token_norm"]) - 0.02 * math.sqrt(d)) < 0.01


def test_chapter_1_lstm_numbers_recomputed_with_torch_lstmcell():
    from course_lib.labs.rnn import _inputs, lstm_weights, rnn_gradient_norms

    g = glued("01_why_transformers", "sigmoid_3", "lstm_open_128", "lstm_open_256", "lstm_closed_256",
              "lstm_rnn_256")
    assert g["sigmoid_3"] == f"{1 / (1 + math.exp(-3)):.3f}"

    def torch_lstm_grad(T, forget_bias):  # PyTorch's own cell, loaded with the chapter's weights
        w = lstm_weights(16, forget_bias=forget_bias, seed=0)
        cell = torch.nn.LSTMCell(16, 16, dtype=torch.float64)
        with torch.no_grad():
            for p, v in zip((cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh), w):
                p.copy_(v)
        x = _inputs(T, 16, 1).requires_grad_(True)
        h = c = torch.zeros(1, 16, dtype=torch.float64)
        for t in range(T):
            h, c = cell(x[t:t + 1], (h, c))
        (grad,) = torch.autograd.grad(h.sum(), x)
        return float(grad[0].norm())

    assert g["lstm_open_128"] == f"{torch_lstm_grad(128, 3.0):.2f}"
    assert g["lstm_open_256"] == sci(torch_lstm_grad(256, 3.0), 1)
    assert g["lstm_closed_256"] == sci(torch_lstm_grad(256, 0.0), 0)
    assert g["lstm_rnn_256"] == sci(rnn_gradient_norms([256])[0], 0)


def test_chapter_1_scaling_fit_recomputed_from_the_stored_runs():
    g = glued("01_why_transformers", "alpha_power", "n_front", "front_c_lo", "front_c_hi", "kaplan_alpha",
              "chinchilla_gamma", "n_grid_runs", "long_measured", "alpha_floor", "long_predicted",
              also=("scaling = load_scaling_runs()",))
    runs = json.loads((ROOT / "course_lib" / "results" / "scaling.json").read_text())["runs"]
    bench = json.loads((ROOT / "course_lib" / "results" / "train_bench.json").read_text())["runs"]
    # the grid's best run per budget, then every point that no cheaper point beats (brute force)
    points = [min((r for r in runs if r["budget"] == b), key=lambda r: r["val_loss"])
              for b in {r["budget"] for r in runs}]
    points += [{"compute": r["flops_per_token"] * r["steps"] * r["config"]["batch_size"]
                * r["config"]["model"]["block_size"], "val_loss": r["final_val_loss"]} for r in bench.values()]
    front = sorted((p for p in points if not any(q["compute"] <= p["compute"] and q["val_loss"] < p["val_loss"]
                                                for q in points)), key=lambda p: p["compute"])
    slope, _ = np.polyfit(np.log([p["compute"] for p in front]), np.log([p["val_loss"] for p in front]), 1)
    assert g["alpha_power"] == f"{-slope:.3f}"
    assert g["n_front"] == str(len(front)) and g["n_grid_runs"] == str(len(runs))
    for name, value in (("front_c_lo", front[0]["compute"]), ("front_c_hi", front[-1]["compute"])):
        mantissa, exponent = g[name].split(" × 10")  # e.g. "3 × 10¹⁰"
        exponent = int(exponent.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
        assert abs(float(mantissa) * 10.0 ** exponent / value - 1) < 0.2  # one significant digit
    assert g["long_measured"] == f"{bench['long']['final_val_loss']:.2f}"
    # the published constants, as the papers state them (Kaplan et al. 2020; Hoffmann et al. 2022)
    assert g["kaplan_alpha"] == "0.050"
    assert g["chinchilla_gamma"] == f"{0.34 * 0.28 / (0.34 + 0.28):.3f}"
    # the prose says both our exponents are larger than the published ones, and that the
    # grid's fit mispredicts the long run
    assert float(g["alpha_power"]) > float(g["kaplan_alpha"])
    assert float(g["alpha_floor"]) > float(g["chinchilla_gamma"])
    assert abs(float(g["long_predicted"]) - float(g["long_measured"])) > 0.1


@pytest.mark.slow
def test_chapter_8_model_does_not_copy_as_its_prose_says(built_book):
    """Chapter 8 says its small model has not learned to copy (no induction heads): the glued
    loss on the second copy of a repeated random sequence must not be far below the first.
    If a new configuration learns to copy, this fails and the prose must change with it."""
    import ast

    import nbformat

    values = {}
    build = built_book / "jupyter_execute" / "book"
    side = build / "08_training.glue.json"
    if side.exists():  # glue cells tagged remove-cell live here
        for name, out in json.loads(side.read_text()).items():
            values[name] = next(v for k, v in out["data"].items() if k.endswith("text/plain"))
    for cell in nbformat.read(build / "08_training.ipynb", as_version=4).cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook")
            if meta:
                values[meta["name"]] = next(v for k, v in out["data"].items() if k.endswith("text/plain"))
    first, second = (float(ast.literal_eval(values[k])) for k in ("copy_loss_first", "copy_loss_second"))
    assert first > math.log(corpus_characters()), "random characters are less likely than uniform guesses"
    assert second > 0.8 * first, "the model now copies: rewrite Chapter 8's paragraph on induction heads"
