"""Every glued number of Chapter 5 (the worked examples), recomputed independently in torch float64.

The pages compute with ``course_lib.handcalc`` (NumPy); this file recomputes every quantity with
torch and autograd, without importing handcalc, then compares each number that appears in each
glued string (arithmetic like "0.0×0.1 + 0.1×0.0 = 0.0" included) within its displayed rounding.
A glued name this file does not know fails the test, so new numbers cannot slip in unchecked.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib.handcalc.sheets import write_worksheets
from course_lib.handcalc.worksheet import worksheet_html
from tools import ROOT

PAGES = ["05_worked_examples"] + [
    f"worked/{p.stem}" for p in sorted((ROOT / "book" / "worked").glob("*.md"))
]
VOCAB = "ABCD"
E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
PATTERNS = [("AB", "C"), ("AA", "D"), ("BA", "C")]
LR = 0.1


# float64 as the default dtype for this module only (see conftest.float64_default).
pytestmark = pytest.mark.usefixtures("float64_default")


# ------------------------------------------------------------------------------ reading glue
def _glue_text(out: dict) -> str:
    meta = out["metadata"]["scrapbook"]
    pre, data = meta.get("mime_prefix", ""), out["data"]
    for prefix in (pre, ""):  # notebooks keep the prefix; <page>.glue.json drops it
        if prefix + "text/latex" in data:
            return str(data[prefix + "text/latex"])
        if prefix + "text/plain" in data:
            return str(ast.literal_eval(data[prefix + "text/plain"]))
    raise AssertionError(f"glue {meta['name']}: no text/latex or text/plain output")


def glued_values(built: Path) -> dict[str, str]:
    """name -> glued text, from the executed notebooks and myst-nb's <page>.glue.json files
    (glue cells tagged remove-cell are stripped from the notebook but kept in the JSON)."""
    import json

    import nbformat

    values: dict[str, str] = {}
    for page in PAGES:
        path = built / "jupyter_execute" / "book" / f"{page}.ipynb"
        assert path.exists(), f"executed notebook missing: {path}"
        found = {}
        side = path.with_suffix(".glue.json")
        if side.exists():
            for name, out in json.loads(side.read_text()).items():
                found[name] = _glue_text(out)
        for cell in nbformat.read(path, as_version=4).cells:
            for out in cell.get("outputs", []):
                if out.get("metadata", {}).get("scrapbook"):
                    found[out["metadata"]["scrapbook"]["name"]] = _glue_text(out)
        dup = set(found) & set(values)
        assert not dup, f"glue names used on two pages: {sorted(dup)}"
        values.update(found)
    return {name: _untranspose(text) for name, text in values.items()}


_TRANSPOSED = re.compile(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}\^\{\\top\}", re.S)


def _untranspose(text: str) -> str:
    """A matrix the page writes transposed (``[...]^\\top``, worksheet.matrix_latex: wide
    matrices on a phone) back in its own orientation, so its numbers read in row-major order."""

    def flip(m: re.Match) -> str:
        rows = [[c.strip() for c in row.split("&")] for row in m.group(1).split("\\\\")]
        cols = [" & ".join(col) for col in zip(*rows)]
        return "\\begin{bmatrix} " + " \\\\ ".join(cols) + " \\end{bmatrix}"

    return _TRANSPOSED.sub(flip, text)


NUMBER = re.compile(
    r"(?<![\w.])([-\u2212])?(∞|\\infty|\d+(?:\.\d+)?)(?: × 10([\u207b]?[\u2070-\u2079¹²³]+))?"
)
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")


def numbers_in(text: str) -> list[tuple[float, str]]:
    """The numbers shown in ``text``, each with its digits as written; one with a power of ten
    (``sci``: "9.384 × 10⁻⁵") as the positional digits it stands for ("0.00009384")."""
    out = []
    for sign, body, power in NUMBER.findall(text):
        v = math.inf if body in ("∞", "\\infty") else float(body)
        if power:
            p = int(power.translate(_SUPERSCRIPT_DIGITS))
            v = float(f"{body}e{p}")
            body = f"{v:.{max(len(body.partition('.')[2]) - p, 0)}f}"
        out.append((-v if sign else v, body))
    return out


def inconsistent_roundings(glued: dict[str, str], expected: dict[str, list[float]]) -> list[str]:
    """The quantities shown with two different roundings (1.384 here, 1.38378 there).

    Every number shown in a glued value is paired with the float64 value torch computes for it
    (``expected``, in order); numbers with the same value to 9 significant digits are the same
    quantity, and must be shown the same way on every page. Exact numbers (integers, 0, ±∞) are
    left out: they need no rounding."""
    groups: dict[str, dict[float, list[str]]] = {}
    for name, text in sorted(glued.items()):
        shown, want = numbers_in(text), expected.get(name, [])
        if len(shown) != len(want):
            continue  # test_every_glued_number_is_recomputed_by_torch reports it
        for (value, _body), target in zip(shown, want):
            if math.isinf(target) or target == round(target):
                continue
            groups.setdefault(f"{target:.9g}", {}).setdefault(value, []).append(name)
    return [
        f"{key}: " + "; ".join(f"{v:g} in {', '.join(names)}" for v, names in sorted(ways.items()))
        for key, ways in sorted(groups.items())
        if len(ways) > 1
    ]


def matches(shown: float, body: str, expected: float) -> bool:
    if math.isinf(expected) or math.isinf(shown):
        return shown == expected
    if shown == 0.0:
        return abs(expected) < 1e-12
    decimals = len(body.split(".")[1]) if "." in body else 0
    tol_dec = 0.5 * 10.0**-decimals
    tol_sig = 0.5 * 10.0 ** (math.floor(math.log10(abs(expected))) - 3) if expected else tol_dec
    return abs(shown - expected) <= min(tol_dec, tol_sig) * (1 + 1e-9) + 1e-15


# ------------------------------------------------------------------------------ torch model
def params0() -> dict:
    return {
        "W_Q": 0.1 * torch.eye(2),
        "W_K": 0.1 * torch.eye(2),
        "W_V": 0.1 * torch.eye(2),
        "W_O": torch.tensor([[0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 0.1, 0.0]]),
    }


def run(W: dict, tokens: str, target: str) -> dict:
    X = E[[VOCAB.index(t) for t in tokens]]
    r = {"X": X, "Q": X @ W["W_Q"], "K": X @ W["W_K"], "V": X @ W["W_V"]}
    for k in ("Q", "K", "V"):
        if not r[k].requires_grad:
            r[k].requires_grad_(True)
        r[k].retain_grad()
    r["scores"] = r["Q"] @ r["K"].T
    r["scaled"] = r["scores"] / math.sqrt(2)
    T = len(tokens)
    r["masked"] = r["scaled"].masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
    r["weights"] = torch.softmax(r["masked"], -1)
    r["out"] = r["weights"] @ r["V"]
    r["logits"] = r["out"][-1] @ W["W_O"]
    r["probs"] = torch.softmax(r["logits"].detach(), -1)
    r["loss"] = F.cross_entropy(r["logits"][None], torch.tensor([VOCAB.index(target)]))
    for k in ("scores", "scaled", "weights", "out", "logits"):
        r[k].retain_grad()
    return r


def with_grad(W):
    return {k: v.clone().requires_grad_(True) for k, v in W.items()}


def sgd(W, grads, lr, only=None):
    return {
        k: (v - lr * grads[k] if only is None or k in only else v).detach() for k, v in W.items()
    }


def flat(t) -> list[float]:
    return [float(v) for v in torch.as_tensor(t).detach().reshape(-1)]


def dot(a, b) -> list[float]:
    a, b = flat(a), flat(b)
    return [v for pair in zip(a, b) for v in pair] + [float(np.dot(a, b))]


def affine(x, w, b) -> list[float]:
    return dot(x, w)[:-1] + [float(b), float(torch.dot(torch.as_tensor(x), torch.as_tensor(w)) + b)]


def torch_block_model(P: dict, tokens: str, target: str):
    h = E[[VOCAB.index(t) for t in tokens]]
    T = len(tokens)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in (1, 2):

        def B(n, i=i):
            return P[f"block{i}.{n}"]

        a = F.layer_norm(h, (2,), B("ln1.g"), B("ln1.b"), eps=1e-5)
        h = (
            h
            + F.scaled_dot_product_attention(
                (a @ B("W_Q"))[None], (a @ B("W_K"))[None], (a @ B("W_V"))[None], attn_mask=mask
            )[0]
        )
        m = F.layer_norm(h, (2,), B("ln2.g"), B("ln2.b"), eps=1e-5)
        h = h + torch.relu(m @ B("W1") + B("b1")) @ B("W2") + B("b2")
    z = F.layer_norm(h, (2,), P["lnf.g"], P["lnf.b"], eps=1e-5)[-1] @ P["W_O"]
    return F.cross_entropy(z[None], torch.tensor([VOCAB.index(target)])), torch.softmax(z, -1)


FFN_W = torch.tensor([[0.2, 0.1], [0.1, 0.2]], dtype=torch.float64)
FFN_B1 = torch.tensor([0.0, -0.15], dtype=torch.float64)
FFN_B2 = torch.zeros(2, dtype=torch.float64)


def block_model_init() -> dict:
    P = {}
    for i in (1, 2):
        P.update(
            {
                f"block{i}.ln1.g": torch.ones(2),
                f"block{i}.ln1.b": torch.zeros(2),
                f"block{i}.W_Q": 0.1 * torch.eye(2),
                f"block{i}.W_K": 0.1 * torch.eye(2),
                f"block{i}.W_V": 0.1 * torch.eye(2),
                f"block{i}.ln2.g": torch.ones(2),
                f"block{i}.ln2.b": torch.zeros(2),
                f"block{i}.W1": FFN_W.clone(),
                f"block{i}.b1": FFN_B1.clone(),
                f"block{i}.W2": FFN_W.clone(),
                f"block{i}.b2": FFN_B2.clone(),
            }
        )
    P.update({"lnf.g": torch.ones(2), "lnf.b": torch.zeros(2), "W_O": params0()["W_O"]})
    return {k: v.clone().requires_grad_(True) for k, v in P.items()}


# ------------------------------------------------------------------------------ expected values
def expected_values() -> dict[str, list[float]]:
    ex: dict[str, list[float]] = {}
    W = with_grad(params0())
    r = run(W, "AB", "C")
    r["loss"].backward()
    Q, K, V, X = (r[k].detach() for k in ("Q", "K", "V", "X"))
    w, h, z, p = (
        r["weights"].detach(),
        r["out"][-1].detach(),
        r["logits"].detach(),
        r["probs"].detach(),
    )
    WO = W["W_O"].detach()
    # Example 1
    ex["e1_Q"], ex["e1_K"], ex["e1_V"] = flat(Q), flat(K), flat(V)
    ex["e1_qB0"], ex["e1_qB1"] = dot(X[1], W["W_Q"][:, 0]), dot(X[1], W["W_Q"][:, 1])
    ex["e1_score_BA"], ex["e1_score_BB"] = dot(Q[1], K[0]), dot(Q[1], K[1])
    sc, scaled = r["scores"].detach(), r["scaled"].detach()
    for j, t in enumerate("AB"):
        ex[f"e1_scaled_B{t}"] = [float(sc[1, j]), 2.0, float(scaled[1, j])]
    ex["e1_masked"] = flat(r["masked"])
    e = torch.exp(scaled[1])
    ex["e1_exp_BA"], ex["e1_exp_BB"] = (
        [float(scaled[1, 0]), float(e[0])],
        [float(scaled[1, 1]), float(e[1])],
    )
    ex["e1_expsum"] = flat(e) + [float(e.sum())]
    ex["e1_w_BA"], ex["e1_w_BB"] = (
        [float(e[0]), float(e.sum()), float(w[1, 0])],
        [float(e[1]), float(e.sum()), float(w[1, 1])],
    )
    ex["e1_wsum"] = flat(w[1]) + [float(w[1].sum())]
    ex["e1_h0"], ex["e1_h1"] = dot(w[1], V[:, 0]), dot(w[1], V[:, 1])
    ez = torch.exp(z)
    for j, t in enumerate(VOCAB):
        ex[f"e1_logit_{t}"] = dot(h, WO[:, j])
        ex[f"e1_p_{t}"] = [float(ez[j]), float(ez.sum()), float(p[j])]
    ex["e1_zexp"] = [v for j in range(4) for v in (float(z[j]), float(ez[j]))]
    ex["e1_zexpsum"] = [float(ez.sum())]
    ex["e1_psum"] = flat(p) + [float(p.sum())]
    ex["e1_loss"] = [float(p[2]), r["loss"].item()]
    ex["e1_ln4"] = [math.log(4)]
    # Example 2
    y = torch.tensor([0.0, 0.0, 1.0, 0.0])
    d_logits = r["logits"].grad
    dWO = W["W_O"].grad
    ex["e2_dlogits"] = flat(d_logits)
    ex["e2_dlogit_C"] = [float(p[2]), 1.0, float(p[2] - y[2])]
    ex["e2_dWO"] = flat(dWO)
    ex["e2_dWO_1C"] = [float(h[0]), float(d_logits[2]), float(dWO[0, 2])]
    grads = {k: v.grad for k, v in W.items()}
    W2 = sgd(W, grads, LR, only=["W_O"])
    ex["e2_WO_new_1C"] = [float(WO[0, 2]), LR, float(dWO[0, 2]), float(W2["W_O"][0, 2])]
    ex["e2_WO_new"] = flat(W2["W_O"])
    r2 = run(W2, "AB", "C")
    ex["e2_logits_new"] = flat(r2["logits"])
    pC0, pC1, l0, l1 = float(p[2]), float(r2["probs"][2]), r["loss"].item(), r2["loss"].item()
    ex.update(
        {
            "e2_pC_before": [pC0],
            "e2_pC_after": [pC1],
            "e2_pC_change": [pC1 - pC0],
            "e2_loss_before": [l0],
            "e2_loss_after": [l1],
            "e2_loss_change": [l1 - l0],
        }
    )
    # Example 3
    d_h = r["out"].grad[-1]
    ex["e3_dh0"], ex["e3_dh1"] = dot(WO[0], d_logits), dot(WO[1], d_logits)
    gw = r["weights"].grad[1]
    ex["e3_da_A"], ex["e3_da_B"] = dot(d_h, V[0]), dot(d_h, V[1])
    ex["e3_dV"] = flat(r["V"].grad)
    ex["e3_J"] = flat(
        torch.autograd.functional.jacobian(lambda u: torch.softmax(u, -1), r["masked"][1].detach())
    )
    ex["e3_sg"] = dot(w[1], gw)
    sg = float(torch.dot(w[1], gw))
    d_scaled, d_scores = r["scaled"].grad, r["scores"].grad
    for j, t in enumerate("AB"):
        ex[f"e3_du_{t}"] = [float(w[1, j]), float(gw[j]), sg, float(d_scaled[1, j])]
        ex[f"e3_ds_{t}"] = [float(d_scaled[1, j]), 2.0, float(d_scores[1, j])]
    ex["e3_dqB0"], ex["e3_dqB1"] = dot(d_scores[1], K[:, 0]), dot(d_scores[1], K[:, 1])
    ex["e3_dK"] = flat(r["K"].grad)
    ex["e3_dWQ"], ex["e3_dWK"], ex["e3_dWV"] = (
        flat(W["W_Q"].grad),
        flat(W["W_K"].grad),
        flat(W["W_V"].grad),
    )
    r_all = run(sgd(W, grads, LR), "AB", "C")
    pC_all, l_all = float(r_all["probs"][2]), r_all["loss"].item()
    ex.update(
        {
            "e3_pC_before": [pC0],
            "e3_pC_WO": [pC1],
            "e3_pC_all": [pC_all],
            "e3_loss_before": [l0],
            "e3_loss_WO": [l1],
            "e3_loss_all": [l_all],
        }
    )
    ex.update(
        {
            "s_loss0": [l0],
            "s_pC0": [pC0],
            "s_pC_wo": [pC1],
            "s_loss_wo": [l1],
            "s_pC_all": [pC_all],
            "s_loss_all": [l_all],
            "s_wBB": [float(w[1, 1])],
        }
    )
    # Example 4
    Wb = with_grad(params0())
    losses = [run(Wb, t, y_)["loss"] for t, y_ in PATTERNS]
    mean = sum(losses) / 3
    mean.backward()
    for key, loss in zip(["AB", "AA", "BA"], losses):
        ex[f"e4_loss_{key}"] = [loss.item()]
    ex["e4_loss_mean"] = [loss.item() for loss in losses] + [3.0, mean.item()]
    ex["e4_dWO_mean"] = flat(Wb["W_O"].grad)
    W1 = sgd(Wb, {k: v.grad for k, v in Wb.items()}, LR)
    ex["e4_step_before"] = [mean.item()]
    ex["e4_step_after"] = [(sum(run(W1, t, y_)["loss"] for t, y_ in PATTERNS) / 3).item()]
    Wt, first = params0(), None
    for epoch in range(500):
        Wt = with_grad(Wt)
        rs = [run(Wt, t, y_) for t, y_ in PATTERNS]
        if first is None and all(
            int(rr["probs"].argmax()) == VOCAB.index(y_) for rr, (_, y_) in zip(rs, PATTERNS)
        ):
            first = epoch
        (sum(rr["loss"] for rr in rs) / 3).backward()
        Wt = sgd(Wt, {k: v.grad for k, v in Wt.items()}, LR)
    rs = [run(Wt, t, y_) for t, y_ in PATTERNS]
    ex.update(
        {
            "e4_lr": [LR],
            "e4_epochs": [500.0],
            "e4_first_correct": [float(first)],
            "e4_final_loss": [(sum(rr["loss"] for rr in rs) / 3).item()],
        }
    )
    for key, rr, (_, y_) in zip(["AB", "AA", "BA"], rs, PATTERNS):
        ex[f"e4_p_{key}"] = [float(rr["probs"][VOCAB.index(y_)])]
    # Example 5
    x = E[0]
    pre = x @ FFN_W + FFN_B1
    hid = torch.relu(pre)
    out = hid @ FFN_W + FFN_B2
    ex["e5_W1"], ex["e5_b1"] = flat(FFN_W), flat(FFN_B1)
    ex["e5_pre_A0"], ex["e5_pre_A1"] = (
        affine(x, FFN_W[:, 0], FFN_B1[0]),
        affine(x, FFN_W[:, 1], FFN_B1[1]),
    )
    ex["e5_relu_A1"] = [float(pre[1]), float(hid[1])]
    ex["e5_out_A0"], ex["e5_out_A1"] = (
        affine(hid, FFN_W[:, 0], FFN_B2[0]),
        affine(hid, FFN_W[:, 1], FFN_B2[1]),
    )
    ex["e5_res_A0"] = [float(x[0]), float(out[0]), float(x[0] + out[0])]
    ex["e5_res_A1"] = [float(x[1]), float(out[1]), float(x[1] + out[1])]
    ex["e5_W1W2"], ex["e5_bb"] = flat(FFN_W @ FFN_W), flat(FFN_B1 @ FFN_W + FFN_B2)
    Xr = torch.tensor(np.random.default_rng(0).normal(size=(1000, 2)))  # the page's inputs
    relu_out = torch.relu(Xr @ FFN_W + FFN_B1) @ FFN_W + FFN_B2
    Xa = torch.cat([Xr, torch.ones(1000, 1)], 1)
    coef = torch.linalg.lstsq(Xa, relu_out).solution
    ex["e5_fit_err"] = [float((Xa @ coef - relu_out).abs().max())]
    # Example 6: LayerNorm on A + FFN(A), then the two-block model
    v = x + out
    mu = v.mean()
    var = ((v - mu) ** 2).mean()
    std = torch.sqrt(var + 1e-5)
    ln = F.layer_norm(v, (2,), eps=1e-5)
    assert torch.allclose(ln, (v - mu) / std)
    ex["e6_ln_mean"] = [float(v[0]), float(v[1]), 2.0, float(mu)]
    # (a)^2 + (b)^2
    ex["e6_ln_var"] = [float(v[0] - mu), 2.0, float(v[1] - mu), 2.0, 2.0, float(var)]
    ex["e6_ln_std"] = [float(var), 1e-5, float(std)]
    ex["e6_ln_xhat0"] = [float(v[0]), float(mu), float(std), float(ln[0])]
    ex["e6_ln_xhat1"] = [float(v[1]), float(mu), float(std), float(ln[1])]
    P = block_model_init()
    zero, positions = 0, 0  # block 1's FFN at the start: how often it adds exactly zero
    for t, _ in PATTERNS:
        h = E[[VOCAB.index(c) for c in t]]
        mask = torch.ones(len(t), len(t), dtype=torch.bool).tril()
        a = F.layer_norm(h, (2,), eps=1e-5)
        h = (
            h
            + F.scaled_dot_product_attention(
                (a @ P["block1.W_Q"])[None],
                (a @ P["block1.W_K"])[None],
                (a @ P["block1.W_V"])[None],
                attn_mask=mask,
            )[0]
        )
        pre = F.layer_norm(h, (2,), eps=1e-5) @ FFN_W + FFN_B1  # (T, 2)
        ffn = torch.relu(pre) @ FFN_W + FFN_B2  # (T, 2)
        zero, positions = zero + int((ffn == 0).all(-1).sum()), positions + len(t)
        if t == "AB":
            ex["e6_ffn_pre_off"], ex["e6_ffn_pre_on"], ex["e6_ffn_out_on"] = (
                flat(pre[-1]),
                flat(pre[0]),
                flat(ffn[0]),
            )
    ex["e6_ffn_zero"], ex["e6_ffn_positions"] = [float(zero)], [float(positions)]
    ex["e6_n_params"] = [float(sum(t.numel() for t in P.values()))]
    ex["e6_loss0"] = [(sum(torch_block_model(P, t, y_)[0] for t, y_ in PATTERNS) / 3).item()]
    opt = torch.optim.AdamW(
        [
            {"params": [t for k, t in P.items() if "W" in k], "weight_decay": 0.01},
            {"params": [t for k, t in P.items() if "W" not in k], "weight_decay": 0.0},
        ],
        lr=0.01,
    )
    first = None
    for step in range(300):
        outs = [torch_block_model(P, t, y_) for t, y_ in PATTERNS]
        if first is None and all(
            int(pr.argmax()) == VOCAB.index(y_) for (_, pr), (_, y_) in zip(outs, PATTERNS)
        ):
            first = step
        opt.zero_grad()
        (sum(loss for loss, _ in outs) / 3).backward()
        opt.step()
    outs = [torch_block_model(P, t, y_) for t, y_ in PATTERNS]
    ex.update(
        {
            "e6_lr": [0.01],
            "e6_steps": [300.0],
            "e6_first_learned": [float(first)],
            "e6_loss_final": [(sum(loss for loss, _ in outs) / 3).item()],
        }
    )
    for key, (_, pr), (_, y_) in zip(["AB", "AA", "BA"], outs, PATTERNS):
        ex[f"e6_p_{key}"] = [pr[VOCAB.index(y_)].item()]
    ex.update(universal_approximation_values())
    return ex


def universal_approximation_values() -> dict[str, list[float]]:
    """Example 5.5's numbers without the lab's network: the broken line through the knots is
    ``np.interp``; the largest error on 4001 points, its log-log slope, the jump's error."""
    import numpy as np

    widths = [4, 8, 16, 32, 64, 128]
    x = np.linspace(-1, 1, 4001)

    def err(f, n):
        knots = np.linspace(-1, 1, n + 1)
        return float(np.abs(np.interp(x, knots, f(knots)) - f(x)).max())

    errors = [err(lambda t: np.sin(3 * t) + 0.5 * t**2, n) for n in widths]
    slope = float(np.polyfit(np.log(widths), np.log(errors), 1)[0])
    jump = min(err(lambda t: (t > 0.0001).astype(float), n) for n in widths)
    return {
        "e5_ua_units": [float(widths[0]), float(widths[-1])],
        "e5_ua_first": [errors[0]],
        "e5_ua_last": [errors[-1]],
        "e5_ua_slope": [slope],
        "e5_ua_factor": [2**-slope],
        "e5_ua_jump": [jump],
    }


# ------------------------------------------------------------------------------ tests
@pytest.mark.slow
def test_every_glued_number_is_recomputed_by_torch(built_book):
    glued = glued_values(built_book)
    assert len(glued) > 100, f"expected the worked examples to glue many values; found {len(glued)}"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thousands of tiny autograd steps: threads only add overhead
    try:
        expected = expected_values()
    finally:
        torch.set_num_threads(threads)
    unknown = sorted(set(glued) - set(expected))
    assert not unknown, (
        f"glued names this test cannot recompute (add them to expected_values): {unknown}"
    )
    problems = []
    for name, text in sorted(glued.items()):
        shown, want = numbers_in(text), expected[name]
        if len(shown) != len(want):
            problems.append(
                f"{name}: {len(shown)} numbers in {text!r}, expected {len(want)}: {want}"
            )
            continue
        for (value, body), target in zip(shown, want):
            if not matches(value, body, target):
                problems.append(f"{name}: shows {value!r} in {text!r}, torch gives {target!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_the_same_quantity_is_rounded_the_same_everywhere(built_book):
    """One rule (05_worked_examples.md, "How to use these pages"): 4 significant digits, 6 for
    probabilities and losses; the same quantity never shows up with two roundings."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        expected = expected_values()
    finally:
        torch.set_num_threads(threads)
    problems = inconsistent_roundings(glued_values(built_book), expected)
    assert not problems, "shown with two roundings:\n" + "\n".join(problems)


def test_rounding_check_finds_two_roundings_of_one_quantity():
    loss = 1.3837838
    glued = {"a_loss": "−ln 0.2506 = 1.384", "b_loss": "1.38378", "c_p": "0.250629", "d_n": "3"}
    expected = {"a_loss": [0.2506294, loss], "b_loss": [loss], "c_p": [0.2506294], "d_n": [3.0]}
    problems = inconsistent_roundings(glued, expected)
    assert len(problems) == 2
    assert any("1.384 in a_loss" in line and "1.38378 in b_loss" in line for line in problems)
    glued.update(a_loss="−ln 0.250629 = 1.38378")
    assert inconsistent_roundings(glued, expected) == []


@pytest.mark.slow
def test_worksheets_are_shipped(built_book):
    downloads = list((built_book / "html" / "_downloads").rglob("*_answers.html"))
    assert len(downloads) == 6, f"expected 6 answer keys in the built site, found {len(downloads)}"


def test_matcher_rejects_wrong_numbers():
    assert matches(0.2506, "0.2506", 0.250629) and not matches(0.2506, "0.2506", 0.2507)
    assert matches(0.0, "0.0", 0.0) and not matches(0.0, "0.0", 1e-6)
    assert [v for v, _ in numbers_in("0.25 − 1 = −0.75, W_1 e^0.1 (−2) -\\infty")] == [
        0.25,
        1,
        -0.75,
        0.1,
        -2,
        -math.inf,
    ]


def test_committed_worksheets_are_up_to_date(tmp_path):
    """The HTML worksheets in book/worked/worksheets are exactly what the code generates now."""
    for path in write_worksheets(tmp_path):
        committed = ROOT / "book" / "worked" / "worksheets" / path.name
        assert committed.exists(), (
            f"{committed} missing: run python -m course_lib.handcalc.sheets book/worked/worksheets"
        )
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed.name} is stale: run python -m course_lib.handcalc.sheets "
            "book/worked/worksheets"
        )


def test_worksheet_has_blanks_and_key_has_answers():
    from course_lib.handcalc.worksheet import Line

    lines = [Line("s", "1 + 1 = {}", "2")]
    assert "blank" in worksheet_html("t", "i", lines) and ">2<" not in worksheet_html(
        "t", "i", lines
    )
    assert ">2<" in worksheet_html("t", "i", lines, answers=True)


def test_a_transposed_matrix_reads_back_in_row_major_order():
    from course_lib.handcalc.worksheet import math_eq

    M = np.array([[0.01249, 0.01242, -0.03734, 0.01242], [0.01258, 0.01251, -0.0376, 0.01251]])
    tex = math_eq("W", M).data
    assert "^{\\top}" in tex  # written transposed: four rows of two
    back = _untranspose(tex)
    nums = [float(x) for x in re.findall(r"-?\d+\.\d+", back)]
    assert nums == pytest.approx(M.ravel().tolist(), rel=1e-3)
