"""The chapters' sentences that state a computed fact, checked against the numbers beside them.

A training run's numbers differ from one CPU to the next (``tools.spread``), so a sentence
such as "the commonest kind is “after mille”" or "fusing the two rankings is worse than BM25
alone" can be true on the machine that built the site and false on a reader's. Every such
sentence says its fact in one of two ways:

- through a **glued phrase** the chapter computes from its own numbers (``glue("top_kind",
  ...)``, "within a point of", "none of the 1,000 outputs"): it reads right on any machine,
  and a claim here checks that the phrase agrees with the glued numbers it summarises;
- in **typed words** whose truth holds with a margin wider than any CPU moves the numbers
  (the validation loss "falls" over a run): a claim here states it as a test of the glued
  numbers, and holds on every run of the CPU-spread measurement
  (``course_lib/results/isa_spread.json``), not only on the published build.

``CLAIMS`` lists them per page: each ``Claim`` quotes its sentence as the source has it (so
the sentence cannot change without its claim) and checks the page's glued values.
``tests/book/test_claims.py`` runs every claim on the published numbers, on every run of the
measurement and on every build the tests make (native and simulated AVX2), shows that each
check fails when the numbers it reads contradict its sentence, and enumerates the class: a
sentence that quotes a measured value next to a comparison must have a claim.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable

from .spread import glue_text, parse_number

__all__ = ["Claim", "Values", "CLAIMS", "check_claims", "normalise"]


class Values:
    """A page's glued values, read as the prose shows them: ``v.num("val_loss")`` (a number),
    ``v.text("top_kind")`` (the text without quotes); records which keys a check read."""

    def __init__(self, glue: dict[str, dict]):
        self.glue = glue
        self.read: set[str] = set()

    def text(self, key: str) -> str:
        self.read.add(key)
        if key not in self.glue:
            raise KeyError(key)
        raw = glue_text(self.glue[key])
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw
        return value if isinstance(value, str) else raw

    def num(self, key: str) -> float:
        value = parse_number(self.text(key))
        if value is None:
            raise ValueError(f"glued {key} is {self.text(key)!r}, not a number")
        return value


@dataclass(frozen=True)
class Claim:
    """One sentence's fact: ``quote``, words of the sentence as in the page's source (glue
    roles included; whitespace is normalised); ``check``, true when the glued values agree
    with it."""

    quote: str
    check: Callable[[Values], bool]


def normalise(text: str) -> str:
    return " ".join(text.split())


def check_claims(page: str, glue: dict[str, dict]) -> list[str]:
    """The claims of ``page`` that its glued values (key -> {mime: text}) contradict, each
    as a line naming the sentence and the values it read."""
    failures = []
    for claim in CLAIMS.get(page, ()):
        v = Values(glue)
        try:
            ok = bool(claim.check(v))
        except KeyError as e:
            failures.append(f"{page}: {claim.quote!r} reads {e}, which the page does not glue")
            continue
        if not ok:
            shown = ", ".join(f"{k}={glue_text(glue[k])}" for k in sorted(v.read) if k in glue)
            failures.append(f"{page}: {claim.quote!r} is contradicted by {shown}")
    return failures


def _adds_up(v: Values, a: str, b: str, gap: float) -> bool:
    """The glued numbers ``a`` and ``b``, as shown, are ``gap`` apart (a sentence that says
    "74.5 %, 1.3 points above 73.2 %" must add up)."""
    return abs(v.num(a) - v.num(b) - gap) < 1e-9


def _first_number(text: str) -> float | None:
    m = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    return float(m.group().replace(",", "")) if m else None


def _signed_gap(phrase: str, more: str, fewer: str, same: str) -> float | None:
    """The signed gap a phrase such as "2.4 points more than greedy" states (``same``: zero)."""
    if phrase.startswith(same):
        return 0.0
    gap = _first_number(phrase)
    if gap is None:
        return None
    return gap if more in phrase else (-gap if fewer in phrase else None)


# --------------------------------------------------------------------------- Chapter 13
def _interval(text: str) -> tuple[float, float]:
    """ "[26.3 %, 36.8 %]" -> (26.3, 36.8)."""
    low, high = (float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)[:2])
    return low, high


def _overlap(a: str, b: str) -> bool:
    (a0, a1), (b0, b1) = _interval(a), _interval(b)
    return a0 <= b1 and b0 <= a1


# --------------------------------------------------------------------------- Chapter 11
def _rrf_vs_bm25(v: Values) -> bool:
    fused, alone, phrase = (
        v.num("ret_rrf_recall1"),
        v.num("ret_bm25_recall1"),
        v.text("ret_rrf_vs_bm25"),
    )
    if fused < alone:
        return phrase.startswith("worse than")
    return phrase.startswith("no better than" if fused == alone else "better than")


# --------------------------------------------------------------------------- Chapter 14
_KINDS = {
    "agreement": "agreement",
    "et": "et",
    "mille": "mille",
    "thousands": "before mille",
    "hundreds": "after mille",
    "both": "both sides",
}


def _commonest_kind(v: Values) -> bool:
    counts = {label: int(v.num(f"early_n_{k}")) for k, label in _KINDS.items()}
    top = max(counts.values())
    named = re.findall(r"“([^”]+)”", v.text("top_kind_phrase"))
    return (
        sum(counts.values()) == v.num("early_wrong")
        and counts["agreement"] == v.num("early_agree")
        and counts["et"] == v.num("early_et")
        and set(named) == {label for label, n in counts.items() if n == top}
        and _first_number(v.text("top_kind_phrase")) == top
    )


def _beam_gain(v: Values) -> bool:
    gap = _signed_gap(v.text("beam_gain"), "more than", "fewer than", "no more than")
    return gap is not None and _adds_up(v, "early_beam", "early_greedy", gap)


def _a0_phrase(v: Values) -> bool:
    phrase = v.text("a0_phrase")
    if phrase.startswith("within a point"):
        return abs(v.num("early_a0") - v.num("early_beam")) < 1 - 1e-9
    stated = _signed_gap(phrase, "above", "below", "within")
    return stated is not None and _adds_up(v, "early_a0", "early_beam", stated)


def _beam_changed(v: Values) -> bool:
    changed, phrase = int(v.num("beam_changed")), v.text("beam_changed_phrase")
    return phrase.startswith("none of") if changed == 0 else phrase.startswith(f"{changed:,} of")


def _digits(v: Values) -> bool:
    own, sentence = int(v.num("digits_own")), v.text("digit_sentence")
    sept = f"“sept” reads “{v.text('sept_top')}”" in sentence
    if own == 9:
        return sept and sentence.startswith("Every digit word")
    lead = "Most" if own > 4.5 else "Only"
    return sept and sentence.startswith(f"{lead} {own} of the nine")


def _mille(v: Values) -> bool:
    top, note = v.text("mille_top"), v.text("mille_note")
    return note == (", as a dictionary would" if top == "thousand" else ", not “thousand”")


def _router_round_off(v: Values) -> bool:
    gate = v.text("router_grad_gate")  # "least to most"
    least = parse_number(gate.split(" to ")[0])
    if least is None:
        raise ValueError(f"glued router_grad_gate is {gate!r}, not a range of numbers")
    renorm = v.num("router_grad_renorm")
    return renorm < 1e-4 * least and 1.1 * least / renorm >= v.num("router_grad_ratio")


CLAIMS: dict[str, tuple[Claim, ...]] = {
    "book/08_training": (
        Claim(
            "Before any training the loss is {glue:text}`loss0`, close to $\\ln V =$",
            lambda v: abs(v.num("loss0") - v.num("lnV")) < 0.2,
        ),
        Claim(
            "the validation loss falls from {glue:text}`val_start` to {glue:text}`val_loss`",
            lambda v: v.num("val_loss") < v.num("val_start"),
        ),
        Claim(
            "the gap to validation is small",
            lambda v: abs(v.num("val_loss") - v.num("train_loss")) < 0.15,
        ),
        Claim(
            "validation stays close to training, so the model is not over-fitting",
            lambda v: abs(v.num("val_loss") - v.num("train_loss")) < 0.15,
        ),
        Claim("Greedy decoding soon repeats itself", lambda v: v.num("greedy_repeat") >= 10),
        Claim(
            "Most of each row's weight sits just left of the diagonal",
            lambda v: v.num("h_prev_w") > 0.5,
        ),
        Claim(
            "of each query's weight to the previous character: a \"previous token\" head",
            lambda v: v.num("h_prev_w") > 0.5,
        ),
        Claim(
            "Its weights spread further back, over earlier words",
            lambda v: v.num("h_far_d") >= 3,
        ),
        Claim(
            "characters back, gathering the context of the word and the phrase",
            lambda v: v.num("h_far_d") >= 3,
        ),
        Claim(
            "(random characters are unlikely English)",
            lambda v: v.num("copy_loss_first") > v.num("lnV"),
        ),
        Claim(
            "our model has not learned to copy",
            lambda v: v.num("copy_loss_second") > 0.8 * v.num("copy_loss_first"),
        ),
        Claim(
            "{glue:text}`long_gain` nats below the baby-GPT baseline",
            lambda v: (
                _adds_up(v, "bench_base_loss", "long_val", v.num("long_gain"))
                and v.num("long_gain") > 0
            ),
        ),
        Claim(
            "{glue:text}`long_vs_chapter` the chapter's model",
            lambda v: (
                v.text("long_vs_chapter")
                == ("below" if v.num("long_val") < v.num("bench_chap_loss") else "above")
            ),
        ),
        Claim(
            "{glue:text}`gpu_vs_long` nats below `long.json`'s",
            lambda v: (
                _adds_up(v, "long_val", "gpu_val", v.num("gpu_vs_long"))
                and v.num("gpu_vs_long") > 0
            ),
        ),
        Claim(
            "{glue:text}`bench_gain` nats lower",
            lambda v: (
                _adds_up(v, "bench_base_loss", "bench_chap_loss", v.num("bench_gain"))
                and v.num("bench_gain") > 0
            ),
        ),
    ),
    "book/10_generation": (
        Claim(
            "A fixed $k$ would keep too many candidates in the second place or too few in the"
            " first",
            lambda v: (
                v.num("nucleus_open") > v.num("nucleus_mid")
                and v.num("top1_open") < v.num("top1_mid")
            ),
        ),
        Claim(
            "Greedy decoding writes the text the model likes best (log-likelihood"
            " {glue:text}`ll_greedy`) and loops",
            lambda v: (
                all(
                    v.num("ll_greedy") >= v.num(f"ll_{k}")
                    for k in ("t07", "t10", "t13", "topk", "topp")
                )
                and v.num("d2_greedy") < 0.5
            ),
        ),
        Claim(
            "is close to that of real held-out text ({glue:text}`ckpt_val_neg`), and hardly"
            " anything repeats",
            lambda v: abs(v.num("ll_t10") - v.num("ckpt_val_neg")) < 0.3 and v.num("d2_t10") >= 0.9,
        ),
        Claim(
            "Temperature 1.3 makes that tail likelier",
            lambda v: v.num("ll_t13") < v.num("ll_t10"),
        ),
        Claim(
            "and 0.7 moves towards greedy",
            lambda v: (
                v.num("ll_greedy") > v.num("ll_t07") > v.num("ll_t10")
                and v.num("d4_t07") < v.num("d4_t10")
            ),
        ),
        Claim(
            "Top-$k$ and top-$p$ cut the tail while keeping variety",
            lambda v: (
                min(v.num("ll_topk"), v.num("ll_topp")) > v.num("ll_t10")
                and min(v.num("d4_topk"), v.num("d4_topp")) > v.num("d4_greedy")
            ),
        ),
        Claim(
            "with no repeated word pair",
            lambda v: v.num("d2_topk") == 1 and v.num("d2_topp") == 1,
        ),
        Claim(
            "The repetition penalty only delays greedy's loop",
            lambda v: v.num("d2_greedy") < v.num("d2_rep") < 0.9,
        ),
        Claim(
            "the two runs write the same characters, and their logits differ by at most"
            " {glue:text}`cache_maxdiff`: float rounding",
            lambda v: v.num("cache_maxdiff") < 1e-4,
        ),
        Claim(
            "The gain grows with the length",
            lambda v: v.num("speedup_64") < v.num("speedup_256") < v.num("speedup_1024"),
        ),
        Claim(
            "Averaging two key/value heads into one raises the validation loss",
            lambda v: v.num("gqa_loss_4") < v.num("gqa_loss_2") < v.num("gqa_loss_1"),
        ),
        Claim(
            "{glue:text}`rope_shift` (float rounding), while moving it by 10 positions changes",
            lambda v: v.num("rope_shift") < 1e-4 < v.num("learned_shift"),
        ),
    ),
    "book/11_encoders": (
        Claim(
            "characters fell from {glue:text}`mlm_first_loss` to {glue:text}`mlm_last_loss`",
            lambda v: v.num("mlm_last_loss") < v.num("mlm_first_loss"),
        ),
        Claim("{glue:text}`ret_rrf_vs_bm25`", _rrf_vs_bm25),
        Claim(
            "The tiny encoder loses",
            lambda v: (
                v.num("ret_bi_recall1") < v.num("ret_bm25_recall1")
                and v.num("ret_bi_mrr") < v.num("ret_bm25_mrr")
            ),
        ),
        Claim(
            "Recall@10 cannot change, since re-ranking only reorders",
            lambda v: v.num("ret_rr_recall10") == v.num("ret_bm25_recall10"),
        ),
        Claim(
            "the trade every approximate index makes",
            lambda v: v.num("ivf_overlap") < 100 and v.num("ivf_scanned") < 100,
        ),
        Claim(
            "even logistic regression ({glue:text}`h_log_small` %) beats the transformer there",
            lambda v: v.num("h_log_small") > v.num("h_vit_small"),
        ),
        Claim(
            "a gap of {glue:text}`h_gap_small` points",
            lambda v: _adds_up(v, "h_cnn_small", "h_vit_small", v.num("h_gap_small")),
        ),
        Claim(
            "the gap is down to {glue:text}`h_gap_full`",
            lambda v: (
                _adds_up(v, "h_cnn_full", "h_vit_full", v.num("h_gap_full"))
                and v.num("h_gap_full") < v.num("h_gap_small")
            ),
        ),
    ),
    "book/12_finetuning": (
        Claim(
            "the loss alone sorts {glue:text}`zero_shot` % of the test passages correctly",
            lambda v: v.num("loss_written") < v.num("loss_shuffled") and v.num("zero_shot") > 50,
        ),
        Claim(
            "{glue:text}`b_full` %, {glue:text}`b_full_gain` points more",
            lambda v: (
                _adds_up(v, "b_full", "b_scratch", v.num("b_full_gain"))
                and v.num("b_full_gain") > 0
            ),
        ),
        Claim(
            "({glue:text}`b_probe_vs_full` points {glue:text}`b_probe_cmp` full fine-tuning)",
            lambda v: _adds_up(
                v,
                "b_probe",
                "b_full",
                v.num("b_probe_vs_full") * (1 if v.text("b_probe_cmp") == "above" else -1),
            ),
        ),
        Claim(
            "Larger ranks fit the training passages better but not the test passages",
            lambda v: (
                v.num("lora_r16_train") > v.num("lora_r16_acc")
                and v.num("lora_r16_acc") <= v.num("lora_best_acc")
            ),
        ),
        Claim(
            "here are within the noise; the gap to training from scratch is not",
            lambda v: (
                abs(v.num("b_probe") - v.num("b_full")) <= v.num("seed_spread")
                and abs(v.num("lora_best_acc") - v.num("b_full")) <= v.num("seed_spread")
                and v.num("b_full") - v.num("b_scratch") > v.num("seed_spread")
            ),
        ),
        Claim(
            "{glue:text}`tiny_gap`, float32 round-off; with the exact GELU it is about",
            lambda v: v.text("tiny_gap").startswith("below") and v.num("exact_gap") > 1e-4,
        ),
    ),
    "book/13_assistant": (
        Claim(
            "The first loss, {glue:text}`live_first` nats per character, is high",
            lambda v: v.num("live_last") < v.num("live_first"),
        ),
        Claim(
            "almost never answers: {glue:text}`base_prompted_all` % overall",
            lambda v: v.num("base_prompted_all") <= 5,
        ),
        Claim(
            "is hard to guess for a model of this size whatever the format",
            lambda v: max(v.num("base_prompted_next"), v.num("sft_masked_next")) <= 10,
        ),
        Claim(
            "the masked run is {glue:text}`mask_gap` points {glue:text}`mask_cmp` it",
            lambda v: _adds_up(
                v,
                "sft_masked_all",
                "sft_unmasked_all",
                v.num("mask_gap") * (1 if v.text("mask_cmp") == "above" else -1),
            ),
        ),
        Claim(
            "{glue:text}`sft_unmasked_end_ci` unmasked, overlap",
            lambda v: _overlap(v.text("sft_masked_end_ci"), v.text("sft_unmasked_end_ci")),
        ),
        Claim(
            "and the task accuracy falls from SFT's",
            lambda v: v.num("beta0_task") < v.num("sft_masked_all"),
        ),
        Claim(
            "pushing both answers down",
            lambda v: v.num("beta0_rejected") < v.num("beta0_chosen") < 0,
        ),
        Claim(
            "so they grow with β",
            lambda v: (
                v.num("beta0_margin")
                < v.num("beta1_margin")
                < v.num("beta2_margin")
                < v.num("beta3_margin")
            ),
        ),
        Claim(
            "Here no β raised the task accuracy above SFT's",
            lambda v: max(v.num(f"beta{i}_task") for i in range(4)) <= v.num("sft_masked_all"),
        ),
        Claim(
            "its interval {glue:text}`mc_base_ci` lies above chance",
            lambda v: _interval(v.text("mc_base_ci"))[0] > v.num("chance"),
        ),
        Claim(
            "Every interval overlaps every other",
            lambda v: all(
                _overlap(v.text(a), v.text(b))
                for a, b in (
                    ("mc_base_ci", "mc_sft_masked_ci"),
                    ("mc_base_ci", "mc_sft_unmasked_ci"),
                    ("mc_sft_masked_ci", "mc_sft_unmasked_ci"),
                )
            ),
        ),
    ),
    "book/14_translation": (
        Claim(
            "the validation loss falls from {glue:text}`val_first` after",
            lambda v: v.num("val_loss") < v.num("val_first"),
        ),
        Claim(
            "the validation loss drops by more than two orders of magnitude over the run",
            lambda v: v.num("val_first") / v.num("val_loss") > 100,
        ),
        Claim(
            "a beam of one for {glue:text}`found_1`",  # a beam of one keeps greedy's path
            lambda v: v.num("found_1") >= v.num("found_greedy"),
        ),
        Claim(
            "finds the best output every time ({glue:text}`found_27`)",
            lambda v: v.num("found_27") == v.num("n_models"),
        ),
        Claim(
            "with $\\alpha = 2$, {glue:text}`len_a2`. Every extra word multiplies",
            lambda v: v.num("len_a2") > v.num("len_a0"),
        ),
        Claim("and it changes {glue:text}`beam_changed_phrase`", _beam_changed),
        Claim(
            "is so confident that {glue:text}`beam_confident`",
            lambda v: (
                v.num("beam_changed") <= 0.02 * v.num("n_test")
                and (v.num("beam_changed") == 0) == v.text("beam_confident").startswith("the most")
            ),
        ),
        Claim(
            "BLEU is high even where exact match is not",
            lambda v: v.num("bleu_greedy") > 90,
        ),
        Claim("{glue:text}`digit_sentence`", _digits),
        Claim(
            "so the model tells the two apart by reading different English words",
            lambda v: v.num("quatre_four") >= 10 and v.num("quatre_tens") >= 10,
        ),
        Claim(
            "in French the English tens word decides it",
            lambda v: v.num("vingt_tens") >= 10,
        ),
        Claim("“{glue:text}`mille_top`” most{glue:text}`mille_note`", _mille),
        Claim(
            "The trained model makes few mistakes",
            lambda v: v.num("n_wrong") <= 0.05 * v.num("n_test"),
        ),
        Claim("{glue:text}`beam_gain`", _beam_gain),
        Claim("{glue:text}`top_kind_phrase`", _commonest_kind),
        Claim("{glue:text}`a0_phrase`", _a0_phrase),
        Claim(
            "a model this sure of itself seldom prefers a shorter wrong output",
            lambda v: abs(v.num("early_a0") - v.num("early_beam")) < 2,
        ),
        Claim(
            "Our translator gets most held-out numbers exactly right",
            lambda v: v.num("em_greedy") > 50,
        ),
    ),
    "book/15_speedrun": (
        Claim(
            # round-off: many orders of magnitude below the gate's gradient; "at least" the
            # ratio of the numbers shown (each shown to two figures: up to 10 % apart)
            "float32 round-off, at least {glue:text}`router_grad_ratio` times smaller",
            _router_round_off,
        ),
        Claim(
            "Lower loss per step is half of the question",
            lambda v: v.num("live_speedrun") < v.num("live_chapter"),
        ),
        Claim(
            "At equal time it gets fewer steps",
            lambda v: v.num("ms_rmsnorm") > v.num("ms_layernorm"),
        ),
        Claim(
            "that has to repay its slower step",
            lambda v: v.num("ms_qk") > v.num("ms_layernorm"),
        ),
    ),
}
