"""The worksheets of Chapter 5, built from the hand-calculation engine (so the key cannot
disagree with the chapter). ``all_worksheets()`` returns {stem: (title, intro, [Line, ...])};
``write_worksheets(outdir)`` renders them to HTML with ``worksheet.worksheet_html``::

    python -m course_lib.handcalc.sheets book/worked/worksheets
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from . import engine as hc
from .worksheet import Line, _op, dot_str, fmt, worksheet_html

INTRO = (
    "Setting: A=[1,0], B=[0,1], C=[1,1], D=[0,0]; W_Q = W_K = W_V = 0.1·I; "
    "W_O = [[0.1, 0, 0, 0], [0, 0, 0.1, 0]] (2×4); input [A, B], target C, learning rate 0.1; "
    "causal attention, predicting from the last position. Give 4 significant digits."
)


def _dot(a, b, sig: int = 4) -> str:
    """A dot product written out, its result left as the worksheet's blank."""
    return dot_str(a, b, sig, result=False) + " = {}"


def ex1() -> list[Line]:
    p = hc.initial_params()
    f = hc.forward(p, ["A", "B"], "C")
    L = []
    for i, tok in enumerate("AB"):
        for j in range(2):
            L.append(
                Line(
                    "Queries, keys, values",
                    f"q_{tok}[{j + 1}] = x_{tok}·W_Q[:, {j + 1}] = {{}}",
                    fmt(f.Q[i, j]),
                )
            )
    L.append(
        Line(
            "Queries, keys, values",
            "K and V (same as Q here, since W_K = W_V = W_Q): K = {}",
            str([[fmt(v) for v in row] for row in f.K]),
        )
    )
    for j, tok in enumerate("AB"):
        L.append(
            Line(
                "Scores",
                f"score(B, {tok}) = q_B·k_{tok} = " + _dot(f.Q[1], f.K[j]),
                fmt(f.scores[1, j]),
            )
        )
    for j, tok in enumerate("AB"):
        L.append(
            Line(
                "Scores",
                f"scaled(B, {tok}) = {fmt(f.scores[1, j])} / √2 = {{}}",
                fmt(f.scaled[1, j]),
            )
        )
    for j, tok in enumerate("AB"):
        L.append(
            Line(
                "Softmax",
                f"weight(B, {tok}) = e^{fmt(f.scaled[1, j])} / (e^{fmt(f.scaled[1, 0])} + "
                f"e^{fmt(f.scaled[1, 1])}) = {{}}",
                fmt(f.weights[1, j]),
            )
        )
    for j in range(2):
        L.append(Line("Context", f"h[{j + 1}] = " + _dot(f.weights[1], f.V[:, j]), fmt(f.h[j])))
    for j, tok in enumerate(hc.VOCAB):
        L.append(Line("Logits", f"logit({tok}) = " + _dot(f.h, p.W_O[:, j]), fmt(f.logits[j])))
    for j, tok in enumerate(hc.VOCAB):
        L.append(
            Line(
                "Probabilities", f"P({tok}) = e^logit({tok}) / Σ e^logit = {{}}", fmt(f.probs[j], 6)
            )
        )
    L.append(Line("Loss", f"L = −ln P(C) = −ln {fmt(f.probs[2], 6)} = {{}}", fmt(f.loss, 6)))
    return L


def ex2() -> list[Line]:
    p = hc.initial_params()
    f = hc.forward(p, ["A", "B"], "C")
    g = hc.backward(p, f)
    p2 = hc.sgd_step(p, g.params(), 0.1, only=["W_O"])
    f2 = hc.forward(p2, ["A", "B"], "C")
    L = [
        Line(
            "Gradient at the logits",
            f"(p − y)[{tok}] = {fmt(f.probs[j], 6)} − {int(f.y[j])} = {{}}",
            fmt(g.d_logits[j], 6),
        )
        for j, tok in enumerate(hc.VOCAB)
    ]
    for i in range(2):
        for j, tok in enumerate(hc.VOCAB):
            L.append(
                Line(
                    "dL/dW_O = outer(h, p − y)",
                    f"dL/dW_O[{i + 1}, {tok}] = {fmt(f.h[i])}×{_op(g.d_logits[j])} = {{}}",
                    fmt(g.d_W_O[i, j]),
                )
            )
    for i in range(2):
        for j, tok in enumerate(hc.VOCAB):
            L.append(
                Line(
                    "Update W_O ← W_O − 0.1·dL/dW_O",
                    f"W_O[{i + 1}, {tok}] = {fmt(p.W_O[i, j])} − 0.1×{_op(g.d_W_O[i, j])} = {{}}",
                    fmt(p2.W_O[i, j]),
                )
            )
    L.append(Line("Forward again", "new logit(C) = {}", fmt(f2.logits[2], 6)))
    L.append(Line("Forward again", "new P(C) = {}", fmt(f2.probs[2], 6)))
    L.append(Line("Forward again", f"new loss (was {fmt(f.loss, 6)}) = {{}}", fmt(f2.loss, 6)))
    return L


def ex3() -> list[Line]:
    p = hc.initial_params()
    f = hc.forward(p, ["A", "B"], "C")
    g = hc.backward(p, f)
    s, gw = f.weights[1], g.d_weights[1]
    L = [
        Line(
            "Into the context", f"dL/dh[{i + 1}] = " + _dot(p.W_O[i], g.d_logits, 6), fmt(g.d_h[i])
        )
        for i in range(2)
    ]
    L += [
        Line("Into the weights", f"dL/da_{t} = " + _dot(g.d_h, f.V[j]), fmt(gw[j]))
        for j, t in enumerate("AB")
    ]
    L.append(Line("Through the softmax", "s·g = " + _dot(s, gw), fmt(float(s @ gw))))
    L += [
        Line(
            "Through the softmax",
            f"dL/du_{t} = {fmt(s[j])}×({fmt(gw[j])} − ({fmt(float(s @ gw))})) = {{}}",
            fmt(g.d_scaled[1, j]),
        )
        for j, t in enumerate("AB")
    ]
    L += [
        Line(
            "Through the scale",
            f"dL/dscore_{t} = {fmt(g.d_scaled[1, j])} / √2 = {{}}",
            fmt(g.d_scores[1, j]),
        )
        for j, t in enumerate("AB")
    ]
    L += [
        Line(
            "Queries and keys",
            f"dL/dq_B[{i + 1}] = " + _dot(g.d_scores[1], f.K[:, i]),
            fmt(g.d_Q[1, i]),
        )
        for i in range(2)
    ]
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        G = getattr(g.params(), name)
        for idx in np.ndindex(G.shape):
            L.append(
                Line(f"dL/d{name}", f"dL/d{name}[{idx[0] + 1}, {idx[1] + 1}] = {{}}", fmt(G[idx]))
            )
    f_all = hc.forward(hc.sgd_step(p, g.params(), 0.1), ["A", "B"], "C")
    L.append(Line("After updating all four", "P(C) = {}", fmt(f_all.probs[2], 6)))
    L.append(Line("After updating all four", "loss = {}", fmt(f_all.loss, 6)))
    return L


def ex4() -> list[Line]:
    p = hc.initial_params()
    fwds, grads, mean_loss, mean = hc.batch_gradients(p)
    names = ["[A,B]→C", "[A,A]→D", "[B,A]→C"]
    L = [
        Line("Per-example losses", f"loss {n} = {{}}", fmt(f.loss, 6)) for n, f in zip(names, fwds)
    ]
    L.append(Line("Per-example losses", "mean loss = {}", fmt(mean_loss, 6)))
    for i in range(2):
        for j, tok in enumerate(hc.VOCAB):
            vals = " + ".join(_op(g.d_W_O[i, j]) for g in grads)
            L.append(
                Line(
                    "Averaged gradient of W_O",
                    f"mean dL/dW_O[{i + 1}, {tok}] = ({vals}) / 3 = {{}}",
                    fmt(mean.W_O[i, j]),
                )
            )
    L.append(
        Line(
            "One batch update",
            "mean loss after one step on all four matrices = {}",
            fmt(hc.batch_gradients(hc.sgd_step(p, mean, 0.1))[2], 6),
        )
    )
    return L


def ex5() -> list[Line]:
    fp = hc.example_ffn_params()
    f = hc.ffn_forward(fp, hc.EMBEDDINGS)
    L = []
    for t, tok in enumerate(hc.VOCAB):
        sec = f"Token {tok} = {[fmt(v) for v in hc.EMBEDDINGS[t]]}"
        for j in range(2):
            L.append(
                Line(
                    sec,
                    f"pre[{j + 1}] = "
                    + _dot(f.x[t], fp.W1[:, j]).replace(" = {}", f" + {_op(fp.b1[j])} = {{}}"),
                    fmt(f.pre[t, j]),
                )
            )
        L += [Line(sec, f"ReLU(pre[{j + 1}]) = {{}}", fmt(f.hidden[t, j])) for j in range(2)]
        L += [
            Line(
                sec, f"FFN[{j + 1}] = hidden·W2[:, {j + 1}] + b2[{j + 1}] = {{}}", fmt(f.out[t, j])
            )
            for j in range(2)
        ]
        L += [Line(sec, f"x + FFN [{j + 1}] = {{}}", fmt(f.residual[t, j])) for j in range(2)]
    W = fp.W1 @ fp.W2
    L += [
        Line("Collapse without ReLU", f"(W1 W2)[{i + 1}, {j + 1}] = {{}}", fmt(W[i, j]))
        for i, j in np.ndindex(2, 2)
    ]
    return L


def ex6() -> list[Line]:
    L = []
    for tok, x in [
        ("A + FFN(A)", hc.ffn_forward(hc.example_ffn_params(), hc.EMBEDDINGS[0]).residual),
        ("[5, 3]", np.array([5.0, 3.0])),
        ("C", hc.EMBEDDINGS[2]),
    ]:
        ln = hc.layernorm_forward(x, np.ones(2), np.zeros(2))
        sec = f"LayerNorm of {tok} = {[fmt(v) for v in x]} (gamma = 1, beta = 0, eps = 0.00001)"
        L += [
            Line(sec, "mean = {}", fmt(ln.mean[0])),
            Line(sec, "variance = {}", fmt(ln.var[0])),
            Line(sec, "√(variance + eps) = {}", fmt(math.sqrt(ln.var[0] + ln.eps))),
        ]
        L += [Line(sec, f"normalised[{j + 1}] = {{}}", fmt(ln.xhat[j])) for j in range(2)]
    params = hc.transformer_init()
    c = hc.transformer_forward(params, ["A", "B"], "C")
    b = c["blocks"][0]
    sec = "Block 1 on [A, B] (initial parameters)"
    L += [
        Line(sec, f"LN1 of the {pos} row = {{}}", str([fmt(v) for v in b["ln1"].y[i]]))
        for i, pos in enumerate(["A", "B"])
    ]
    L.append(
        Line(
            sec,
            "attention weights of the last row = {}",
            str([fmt(v) for v in b["attn"].weights[1]]),
        )
    )
    L.append(
        Line(
            sec, "h after attention + residual, last row = {}", str([fmt(v) for v in b["h_mid"][1]])
        )
    )
    L.append(
        Line(sec, "h after the FFN + residual, last row = {}", str([fmt(v) for v in b["h_out"][1]]))
    )
    L.append(Line("Output", "P(C) of the untrained two-block model = {}", fmt(c["probs"][2], 6)))
    return L


def all_worksheets() -> dict:
    return {
        "ex1_forward": ("Example 1: the forward pass", INTRO, ex1()),
        "ex2_output_step": ("Example 2: one training step on the output layer", INTRO, ex2()),
        "ex3_backprop": ("Example 3: full backpropagation", INTRO, ex3()),
        "ex4_patterns": (
            "Example 4: several patterns at once",
            INTRO + " Patterns: [A,B]→C, [A,A]→D, [B,A]→C.",
            ex4(),
        ),
        "ex5_ffn": (
            "Example 5: feed-forward layer and residual",
            "FFN(x) = ReLU(x W1 + b1) W2 + b2 with W1 = W2 = [[0.2, 0.1], [0.1, 0.2]], "
            "b1 = [0, −0.15], b2 = [0, 0]. Give 4 significant digits.",
            ex5(),
        ),
        "ex6_transformer": (
            "Example 6: LayerNorm and the two-block transformer",
            "LayerNorm(x) = gamma ⊙ (x − mean) / √(variance + eps) + beta over the 2 entries "
            "of x (variance divides by 2). Blocks: h ← h + Attn(LN1(h)); "
            "h ← h + FFN(LN2(h)), with the weights of examples 1 and 5.",
            ex6(),
        ),
    }


def write_worksheets(outdir: str | Path) -> list[Path]:
    """Write ``<stem>_worksheet.html`` and ``<stem>_answers.html`` for every example."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, (title, intro, lines) in all_worksheets().items():
        for answers, suffix, other in (
            (False, "worksheet", "answers"),
            (True, "answers", "worksheet"),
        ):
            path = outdir / f"{stem}_{suffix}.html"
            # The chapter page sits one folder up (book/worked/<stem>.html beside worksheets/).
            page = worksheet_html(
                title, intro, lines, answers, back=f"../{stem}.html", other=f"{stem}_{other}.html"
            )
            path.write_text(page, encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":  # python -m course_lib.handcalc.sheets book/worked/worksheets
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m course_lib.handcalc.sheets OUTDIR")
    for p in write_worksheets(sys.argv[1]):
        print(p)
