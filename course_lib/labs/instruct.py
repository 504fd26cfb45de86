"""From a language model to an instruction follower: an instruction set, its template and
supervised fine-tuning (SFT) with the prompt's loss masked (Chapter 13).

**The instruction set** is built from the corpus itself: spoken lines of the plays (speaker
headings, stage directions and act/scene lines removed, at most ``MAX_LINE`` characters) and
three instructions about a line, each with one right answer, of three kinds of difficulty:

- ``End mark?``: the name of the line's last punctuation mark (``stop``, ``comma``,
  ``question``, ...; ``none``): read one character, the one just before the answer;
- ``Next word?``: the input is the start of a line, cut at a word boundary; the answer is the
  word that follows (what the pretrained model does anyway, asked in a new format);
- ``First word?``: the line's first word: copy characters from the far end of the prompt.

Training examples come from the plays that lie entirely in the training part of the corpus;
test examples from the three plays at its end (``HELD_OUT_PLAYS``), which the pretrained model
never read.

**The template and its special tokens.** The model reads characters, and every character of
its 81-symbol vocabulary occurs in the corpus, so a marker made of ordinary characters could
also be text. We add three new tokens instead, written as characters that never occur in the
corpus (``SPECIALS``)::

    §First word?\\nWhat lady she her lord.»What¶
    ^ instruction  ^ input                ^ response, then the end token

Their code points sort after every corpus character, so ``with_specials`` keeps every old
token's id and appends the three new ones (ids 81, 82, 83); ``extend_vocab`` gives the model
three new embedding rows (the tied head gets the same three output rows), initialised to the
mean of the old ones, so the model starts out treating them as an average character.

**SFT** trains on ``prompt + response + end`` with the ordinary next-token loss; with
``mask_prompt`` the targets inside the prompt are set to ``IGNORE_INDEX`` (-100, which
``F.cross_entropy`` skips; Chapter 6), so only the response is learnt.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..corpus import PLAY_SEPARATOR, load_corpus
from ..data import CharTokenizer
from ..model import MiniGPT

__all__ = [
    "SPECIALS",
    "INSTRUCTION",
    "RESPONSE",
    "END",
    "IGNORE_INDEX",
    "TASKS",
    "END_MARKS",
    "HELD_OUT_PLAYS",
    "MAX_LINE",
    "Example",
    "with_specials",
    "extend_vocab",
    "spoken_lines",
    "play_lines",
    "line_words",
    "make_example",
    "instruction_set",
    "format_prompt",
    "plain_prompt",
    "mask_prompt_targets",
    "encode_example",
    "sft_batch",
    "sft",
    "generate_answer",
    "task_accuracy",
]

INSTRUCTION, RESPONSE, END = "\u00a7", "\u00bb", "\u00b6"  # §, », ¶: not in the corpus
SPECIALS = (INSTRUCTION, RESPONSE, END)
IGNORE_INDEX = -100  # F.cross_entropy's default: targets equal to it add nothing to the loss
TASKS = ("End mark?", "Next word?", "First word?")
#: The answers of ``End mark?``: a line ending in a letter (or anything else) is ``none``.
END_MARKS = {
    ".": "stop",
    ",": "comma",
    "?": "question",
    "!": "exclaim",
    ";": "semicolon",
    ":": "colon",
    "-": "dash",
}
#: The three plays entirely in the validation part of the corpus (as in Chapter 12).
HELD_OUT_PLAYS = ("TWELFTH NIGHT", "THE TWO GENTLEMEN OF VERONA", "THE WINTER'S TALE")
#: The play the 90/10 split cuts through: in neither the training nor the test plays.
SPLIT_PLAY = "THE HISTORY OF TROILUS AND CRESSIDA"
MAX_LINE = 40  # characters: the longest prompt, answer and end token fit in 64

_HEADING = re.compile(r"^[A-Z][A-Z0-9 .,'&-]*\.$")  # "VIOLA." or "FIRST OFFICER."
_STAGE = re.compile(r"^\s*\[.*\]\s*$")  # a whole-line stage direction
_ACT = re.compile(r"^(ACT|SCENE|Scene|Act)\b")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")  # "We'll" is one word; quotes are not


@dataclass(frozen=True)
class Example:
    """One instruction: ``instruction`` (one of ``TASKS``), ``input`` (a line or the start of
    one), ``response`` (the right answer, without the end token) and the ``play`` it is from."""

    instruction: str
    input: str
    response: str
    play: str


# --------------------------------------------------------------------------- tokens
def with_specials(tok: CharTokenizer) -> CharTokenizer:
    """The tokenizer ``tok`` plus the three special tokens, ids appended after the old ones
    (every old character keeps its id, so the pretrained embedding rows stay valid)."""
    clash = [s for s in SPECIALS if s in tok.stoi]
    if clash:
        raise ValueError(
            f"with_specials: {clash!r} are already ordinary characters of the vocabulary; the "
            "special tokens must be characters the corpus never uses."
        )
    if max(tok.chars) > min(SPECIALS):
        raise ValueError(
            "with_specials: the vocabulary has characters that sort after the special tokens, "
            "so old ids would move; pick special characters with larger code points."
        )
    return CharTokenizer(list(tok.chars) + list(SPECIALS))


def extend_vocab(model: MiniGPT, n_new: int) -> MiniGPT:
    """A copy of ``model`` with ``n_new`` more token ids: the old weights copied, each new
    embedding row (and, tied to it, output row) set to the mean of the old rows."""
    if n_new < 1:
        raise ValueError(f"extend_vocab: n_new must be >= 1; got {n_new}.")
    old = model.tok_emb.weight.detach()  # (V, d)
    bigger = MiniGPT(model.cfg.with_vocab(model.cfg.vocab_size + n_new))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    mean = old.mean(dim=0, keepdim=True)  # (1, d)
    state["tok_emb.weight"] = torch.cat([old, mean.expand(n_new, -1)])  # (V + n_new, d)
    state["lm_head.weight"] = state["tok_emb.weight"]  # tied: one matrix reads and writes
    bigger.load_state_dict(state)
    return bigger.train(model.training)


# --------------------------------------------------------------------------- the data
def spoken_lines(play: str) -> list[str]:
    """The spoken lines of one play (front matter, speaker headings, whole-line stage
    directions, act/scene lines and blank lines removed), stripped."""
    start = re.search(r"^(ACT|Act) (I|1)\b", play, re.M)
    body = play[start.start() :] if start else play
    out = []
    for ln in body.split("\n"):
        s = ln.strip()
        if s and not _HEADING.match(s) and not _STAGE.match(s) and not _ACT.match(s):
            out.append(s)
    return out


def play_lines(held_out: bool) -> dict[str, list[str]]:
    """{play title: spoken lines} of the training plays (``held_out=False``: every play
    before ``SPLIT_PLAY``) or of ``HELD_OUT_PLAYS`` (``held_out=True``)."""
    out, seen_split = {}, False
    for play in load_corpus().split(PLAY_SEPARATOR):
        title = play.split("\n", 1)[0].strip()
        if title.startswith(SPLIT_PLAY):
            seen_split = True
            continue
        is_test = any(title.startswith(p) for p in HELD_OUT_PLAYS)
        if is_test == held_out and (held_out or not seen_split):
            out[title] = spoken_lines(play)
    return out


def line_words(line: str) -> list[str]:
    """The words of a line, letters and inner apostrophes only ("We'll", not "'Sir")."""
    return _WORD.findall(line)


def make_example(line: str, task: str, play: str, rng: random.Random) -> Example | None:
    """The example of ``task`` on ``line``, or None when the line does not suit it (longer than
    ``MAX_LINE``, fewer than three words, or for ``Next word?`` no word boundary to cut at)."""
    if task not in TASKS:
        raise ValueError(f"make_example: task must be one of {TASKS}; got {task!r}.")
    words = line_words(line)
    if len(line) > MAX_LINE or len(words) < 3:
        return None
    if task == "First word?":
        return Example(task, line, words[0], play)
    if task == "End mark?":
        return Example(task, line, END_MARKS.get(line[-1], "none"), play)
    # Next word?: cut before word j (j >= 2), at the space in front of it
    cuts = [m for m in _WORD.finditer(line)][2:]
    cuts = [m for m in cuts if line[m.start() - 1] == " "]
    if not cuts:
        return None
    m = rng.choice(cuts)
    return Example(task, line[: m.start() - 1], m.group(), play)


def instruction_set(held_out: bool, n_per_task: int, seed: int = 0) -> list[Example]:
    """``n_per_task`` examples of each task (interleaved: one of each task in turn), from
    distinct random lines of the training plays or of the held-out plays."""
    if n_per_task < 1:
        raise ValueError(f"instruction_set: n_per_task must be >= 1; got {n_per_task}.")
    rng = random.Random(seed)
    pool = [(play, ln) for play, lines in play_lines(held_out).items() for ln in lines]
    rng.shuffle(pool)
    per_task: dict[str, list[Example]] = {t: [] for t in TASKS}
    it = iter(pool)
    for task in TASKS:
        while len(per_task[task]) < n_per_task:
            play, line = next(it, (None, None))
            if line is None:
                raise ValueError(
                    f"instruction_set: not enough suitable lines for {n_per_task} examples "
                    "per task; ask for fewer."
                )
            ex = make_example(line, task, play, rng)
            if ex is not None:
                per_task[task].append(ex)
    return [per_task[t][i] for i in range(n_per_task) for t in TASKS]


def format_prompt(instruction: str, input: str) -> str:
    """The template's prompt: ``§instruction\\ninput»`` (the response follows, then ``¶``)."""
    return f"{INSTRUCTION}{instruction}\n{input}{RESPONSE}"


def plain_prompt(ex: Example) -> str:
    """How the base model (no special tokens) is asked: in plain text it has seen. ``Next
    word?`` is the base model's own task: the start of the line and a space."""
    if ex.instruction == "Next word?":
        return ex.input + " "
    if ex.instruction == "First word?":
        return f"{ex.input}\nThe first word of that line is "
    return f"{ex.input}\nThe line ends with a "


# --------------------------------------------------------------------------- SFT
def mask_prompt_targets(
    ids: torch.Tensor, prompt_len: int, ignore_index: int = IGNORE_INDEX
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets of one sequence ids (T,), the targets that lie inside the
    prompt set to ``ignore_index``: inputs (T-1,), targets (T-1,). Target t is ids[t + 1], so
    targets[:prompt_len - 1] are prompt tokens; targets[prompt_len - 1] is the response's
    first token (predicted from the prompt's last one) and is kept."""
    if ids.dim() != 1 or not 1 <= prompt_len < len(ids):
        raise ValueError(
            f"mask_prompt_targets: need ids (T,) and 1 <= prompt_len < T; got shape "
            f"{tuple(ids.shape)} and prompt_len={prompt_len}."
        )
    targets = ids[1:].clone()  # (T-1,)
    targets[: prompt_len - 1] = ignore_index
    return ids[:-1], targets


def encode_example(tok: CharTokenizer, ex: Example) -> tuple[torch.Tensor, int]:
    """ids (T,) of ``prompt + response + END`` and the prompt's length in tokens."""
    prompt = format_prompt(ex.instruction, ex.input)
    return tok.encode(prompt + ex.response + END), len(prompt)


def sft_batch(
    tok: CharTokenizer, examples: list[Example], block_size: int, mask_prompt: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y (B, L) for a list of examples, right-padded to the longest (L <= block_size):
    padding targets are ``IGNORE_INDEX`` (inputs padded with the end token, never learnt);
    with ``mask_prompt`` the prompt's targets too."""
    rows = []
    for ex in examples:
        ids, n_prompt = encode_example(tok, ex)
        if len(ids) - 1 > block_size:
            raise ValueError(
                f"sft_batch: an example is {len(ids)} tokens, more than block_size + 1 = "
                f"{block_size + 1}; shorten its line (MAX_LINE)."
            )
        x, y = mask_prompt_targets(ids, n_prompt) if mask_prompt else (ids[:-1], ids[1:])
        rows.append((x, y))
    L = max(len(x) for x, _ in rows)
    X = torch.full((len(rows), L), tok.stoi[END], dtype=torch.long)  # (B, L)
    Y = torch.full((len(rows), L), IGNORE_INDEX, dtype=torch.long)  # (B, L)
    for i, (x, y) in enumerate(rows):
        X[i, : len(x)], Y[i, : len(y)] = x, y
    return X, Y


def sft(
    model: MiniGPT,
    tok: CharTokenizer,
    examples: list[Example],
    steps: int,
    mask_prompt: bool = True,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
) -> list[float]:
    """Supervised fine-tuning in place: ``steps`` AdamW steps (linear warm-up over the first
    tenth, then constant) on random batches of ``examples``. Returns the loss of every step
    (the masked loss with ``mask_prompt``, the loss over every token without)."""
    if steps < 1 or not examples:
        raise ValueError("sft: need steps >= 1 and at least one example.")
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    model.train()
    losses = []
    for _ in range(steps):
        pick = torch.randint(len(examples), (batch_size,), generator=g).tolist()
        x, y = sft_batch(tok, [examples[i] for i in pick], model.cfg.block_size, mask_prompt)
        logits, _ = model(x)  # (B, L, V)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return losses


# --------------------------------------------------------------------------- answers
@torch.no_grad()
def generate_answer(
    model: MiniGPT, tok: CharTokenizer, prompt: str, max_new: int = 14, stop: str = END
) -> str:
    """Greedy decoding from ``prompt`` until a character of ``stop`` (not included) or
    ``max_new`` characters."""
    ids = tok.encode(prompt)[None]  # (1, T)
    stops = {tok.stoi[c] for c in stop if c in tok.stoi}
    out = []
    for _ in range(max_new):
        logits, _ = model(ids[:, -model.cfg.block_size :])  # (1, T, V)
        nxt = int(logits[0, -1].argmax())
        if nxt in stops:
            break
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)  # (1, T + 1)
    return tok.decode(out)


def task_accuracy(
    model: MiniGPT, tok: CharTokenizer, examples: list[Example], plain: bool = False
) -> dict[str, float]:
    """Exact-match accuracy of greedy answers, per task and ``"all"``. With ``plain`` the
    model is asked in plain text (``plain_prompt``, for a model without the special tokens)
    and its answer is the first word it writes."""
    right = {t: [] for t in TASKS}
    for ex in examples:
        if plain:
            text = generate_answer(model, tok, plain_prompt(ex), stop="\n")
            words = line_words(text)
            got = words[0] if words else ""
        else:
            got = generate_answer(model, tok, format_prompt(ex.instruction, ex.input))
        right[ex.instruction].append(got == ex.response)
    acc = {t: sum(r) / len(r) for t, r in right.items() if r}
    acc["all"] = sum(sum(r) for r in right.values()) / len(examples)
    return acc
