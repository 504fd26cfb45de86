"""The training loop: it learns, the optimiser groups, the schedule, exact resume, the CLI."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest
import torch
from train_support import TINY, tiny_trainer

from course_lib.model import MiniGPT
from course_lib.schedule import warmup_cosine
from course_lib.train import (
    TrainConfig,
    Trainer,
    corpus_tokens,
    load_config,
    load_model,
    main,
    make_optimizer,
)

_trainer = tiny_trainer


def test_training_lowers_the_loss_well_below_ln_vocab():
    t = _trainer()
    h = t.train(progress=False)
    V = t.module.cfg.vocab_size
    assert h.step == [0, 20, 40, 60]
    assert abs(h.val[0] - math.log(V)) < 0.15  # starts near uniform guessing
    assert h.val[-1] < h.val[0] - 1.0 and h.train[-1] < h.train[0] - 1.0
    assert len(h.step_loss) == 60 and h.tokens == 60 * 8 * 16 and h.tokens_per_second > 0


def test_learning_rates_follow_warmup_cosine():
    t = _trainer(max_steps=30, warmup_steps=5)
    t.train(progress=False, evaluate=False)
    expected = [warmup_cosine(s, 3e-3, 5, 30, 3e-4) for s in range(30)]
    assert t.history.lr == pytest.approx(expected)
    assert t.optimizer.param_groups[0]["lr"] == pytest.approx(expected[-1])


def test_weight_decay_only_on_matrices():
    t = _trainer()
    opt = make_optimizer(t.module, 1e-3, 0.1)
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    for name, p in t.module.named_parameters():
        assert (id(p) in decayed) == (p.dim() >= 2), name
        assert (
            opt.param_groups[0]["weight_decay"] == 0.1
            and opt.param_groups[1]["weight_decay"] == 0.0
        )
    n_opt = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n_opt == t.module.num_params()  # the tied matrix appears once


def test_gradient_clipping_bounds_the_update_norm():
    t = _trainer(grad_clip=1e-3, lr=1.0, warmup_steps=0, weight_decay=0.0, max_steps=1)
    before = [p.detach().clone() for p in t.module.parameters()]
    t.train_step()
    # Adam normalises the step, so check the clipped gradient norm directly instead
    norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in t.module.parameters()))
    assert norm.item() <= 1e-3 * 1.001
    assert any(not torch.equal(b, p) for b, p in zip(before, t.module.parameters()))


def test_checkpoint_resume_gives_exactly_the_same_next_losses(tmp_path):
    dropout = dict(model={**TINY["model"], "dropout": 0.1})
    straight = _trainer(**dropout)
    straight.train(steps=30, progress=False)
    straight.save(tmp_path / "ckpt.pt")
    straight.train(steps=10, progress=False)

    cfg = TrainConfig(**{**TINY, **dropout})
    tok, train, val = corpus_tokens(cfg)
    torch.manual_seed(12345)  # disturb the global RNG: the checkpoint must restore it
    resumed = Trainer.load(tmp_path / "ckpt.pt", train, val)
    assert (
        resumed.step == 30
        and resumed.history.step == straight.history.step[: len(resumed.history.step)]
    )
    resumed.train(steps=10, progress=False)
    assert resumed.history.step_loss == straight.history.step_loss  # bit-for-bit
    model, tok2 = load_model(tmp_path / "ckpt.pt")
    assert tok2.chars == tok.chars and not model.training


def test_load_restores_the_state_of_its_own_rank(tmp_path):
    # Two trainers as the two ranks of a DDP run would have them (seed + rank samplers).
    cfg = TrainConfig(**TINY)
    tok, train, val = corpus_tokens(cfg)
    ranks = [
        Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok, rank=r, world_size=2)
        for r in range(2)
    ]
    for t in ranks:
        for _ in range(3):
            t.sampler.sample(8)  # each rank has drawn 3 batches
    state = ranks[0].state_dict()
    # what the all_gather of a DDP save holds: each rank's own entry
    state["ranks"] = [t.state_dict()["ranks"][0] for t in ranks]
    torch.save(state, tmp_path / "ckpt.pt")
    next_batches = [t.sampler.sample(8)[0] for t in ranks]
    assert not torch.equal(*next_batches)  # the ranks draw different batches
    for r in range(2):
        resumed = Trainer.load(tmp_path / "ckpt.pt", train, val, rank=r, world_size=2)
        assert torch.equal(resumed.sampler.sample(8)[0], next_batches[r])
    # resumed by one process: a warning (its batches cannot match the two-process run), rank 0's
    # stream
    with pytest.warns(UserWarning, match="written by 2 process"):
        single = Trainer.load(tmp_path / "ckpt.pt", train, val)
    assert torch.equal(single.sampler.sample(8)[0], next_batches[0])


def test_checkpoints_from_before_per_rank_states_still_load(tmp_path):
    t = _trainer(max_steps=10)
    t.train(steps=5, progress=False, evaluate=False)
    state = t.state_dict()
    old = {k: v for k, v in state.items() if k not in ("ranks", "world_size")}
    old.update(sampler=state["ranks"][0]["sampler"], torch_rng=state["ranks"][0]["torch_rng"])
    torch.save(old, tmp_path / "old.pt")
    expected = t.sampler.sample(8)[0]
    _, train, val = corpus_tokens(t.cfg)
    assert torch.equal(Trainer.load(tmp_path / "old.pt", train, val).sampler.sample(8)[0], expected)


def test_config_file_and_cli(tmp_path, capsys):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**TINY, "max_steps": 20}))
    res = main(["--config", str(path), "--out", str(tmp_path / "run"), "--no-progress"])
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["steps"] == 20 and saved["final_val_loss"] == pytest.approx(res["final_val_loss"])
    assert saved["val_perplexity"] == pytest.approx(math.exp(saved["final_val_loss"]))
    assert isinstance(saved["sample"], str) and len(saved["sample"]) == 300
    assert "tiny: 20 steps" in capsys.readouterr().out
    # resume the run for 10 more steps from its checkpoint: --max-steps extends it (issue 12)
    res2 = main(
        [
            "--max-steps",
            "30",
            "--resume",
            str(tmp_path / "run" / "ckpt.pt"),
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ]
    )
    assert res2["steps"] == 30 and res2["config"]["max_steps"] == 30
    state = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=False)
    assert state["step"] == 30 and len(state["history"]["step_loss"]) == 30
    # the last 10 steps follow the schedule stretched to the new end
    assert state["history"]["lr"][20:] == pytest.approx(
        [warmup_cosine(s, 3e-3, 10, 30, 3e-4) for s in range(20, 30)]
    )
    res3 = main(["--resume", str(tmp_path / "run" / "ckpt.pt"), "--no-progress"])
    # without --max-steps the checkpoint's own (now 30) is kept: nothing left to do
    assert res3["steps"] == 30
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "x")])  # neither --config nor --resume
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"n_layers": 3}))
    with pytest.raises(ValueError, match="unknown keys"):
        load_config(bad)
    bad.write_text(json.dumps({"model": {"n_layers": 3}}))
    with pytest.raises(ValueError, match="model section has unknown keys"):
        load_config(bad)
    bad.write_text(json.dumps({"n_layer": 3}))  # a model key at the top level
    with pytest.raises(ValueError, match="model"):
        load_config(bad)


def test_config_overrides_and_round_trip(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    cfg = load_config(path, max_steps=5, model={"d_model": 16})
    assert cfg.max_steps == 5 and cfg.warmup_steps == 5  # a shortened run keeps a valid schedule
    assert cfg.model.d_model == 16 and cfg.model.n_layer == 2  # other model keys kept
    assert cfg.model.vocab_size is None and cfg.tokens_per_step == 8 * 16
    assert TrainConfig(**json.loads(json.dumps(asdict(cfg)))) == cfg  # what checkpoints store
    with pytest.raises(ValueError, match="vocab_size is not set"):
        MiniGPT(cfg.model)


def test_shipped_configs_are_valid():
    from importlib.resources import files

    names = [
        p.name
        for p in files("course_lib").joinpath("configs").iterdir()
        if p.name.endswith(".json")
    ]
    assert {"baseline.json", "chapter.json", "long.json"} <= set(names)
    for name in names:
        cfg = load_config(files("course_lib").joinpath("configs", name))
        assert cfg.corpus == "shakespeare"


def test_bpe_tokenizer_in_the_training_pipeline(tmp_path):
    """tokenizer="bpe-N": merges learned on the training split, the model's vocabulary is N, and
    the checkpoint brings the same BPE tokenizer back (decode(encode(s)) == s)."""
    from course_lib.bpe import BPETokenizer

    t = tiny_trainer(tokenizer="bpe-300", max_steps=3, warmup_steps=1, eval_interval=3)
    assert isinstance(t.tokenizer, BPETokenizer) and t.model.cfg.vocab_size == 300
    t.train(progress=False)
    t.save(tmp_path / "ckpt.pt")
    model, tok = load_model(tmp_path / "ckpt.pt")
    assert isinstance(tok, BPETokenizer) and tok.state_dict() == t.tokenizer.state_dict()
    text = "To be, or not to be: that is the question. Ünïcödé ✓"
    assert tok.decode(tok.encode(text)) == text
    assert model.cfg.vocab_size == 300


@pytest.mark.parametrize("bad", ["bpe", "bpe-12", "word", "bpe-1k"])
def test_unknown_tokenizer_setting_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="tokenizer must be 'char' or 'bpe-N'"):
        TrainConfig(**{**TINY, "tokenizer": bad})


def test_reading_the_losses_in_groups_changes_nothing():
    """train() reads the step losses from the device in groups (a GPU keeps queueing steps);
    the history is the same whatever the group size, evaluations included."""
    one, seven = _trainer(), _trainer()
    h1, h7 = one.train(progress=False, read_every=1), seven.train(progress=False, read_every=7)
    assert h1.step_loss == h7.step_loss and h1.lr == h7.lr and len(h1.step_loss) == one.step
    assert (h1.step, h1.val, h1.train) == (h7.step, h7.val, h7.train)
    with pytest.raises(ValueError, match="read_every must be a positive"):
        _trainer().train(progress=False, read_every=0)


# -- the trainer owns its state (issue 37) -----------------------------------------------------


def test_a_run_resumed_from_its_state_dict_equals_the_uninterrupted_run_bit_for_bit():
    """``state_dict`` / ``load_state_dict`` in one process, as ``nn.Module``'s: a run stopped
    after 25 steps and resumed in a fresh trainer (another seed's weights, a disturbed global
    RNG, dropout on) makes the uninterrupted run's steps: losses, learning rates, evaluations,
    weights and optimiser moments, bit for bit."""
    import copy

    dropout = dict(model={**TINY["model"], "dropout": 0.1})
    straight = _trainer(**dropout)
    straight.train(progress=False)

    first = _trainer(**dropout)
    first.train(steps=25, progress=False)
    state = copy.deepcopy(first.state_dict())  # a snapshot: the live tensors train on
    first.train(steps=5, progress=False)  # and the first trainer moves on, changing nothing saved

    resumed = _trainer(**dropout, seed=7)  # other initial weights and sampler: all replaced
    torch.manual_seed(12345)  # the global RNG (dropout) is part of the state too
    resumed.load_state_dict(state)
    assert resumed.step == 25 and resumed.history.step == [0, 20]
    resumed.train(progress=False)
    assert resumed.history.step_loss == straight.history.step_loss
    assert resumed.history.lr == straight.history.lr
    assert (resumed.history.step, resumed.history.val) == (
        straight.history.step,
        straight.history.val,
    )
    for a, b in zip(resumed.module.parameters(), straight.module.parameters()):
        assert torch.equal(a, b)
    moments = [resumed.optimizer.state_dict()["state"], straight.optimizer.state_dict()["state"]]
    for key, value in moments[1].items():
        assert all(torch.equal(moments[0][key][k], v) for k, v in value.items())


def test_following_the_cli_never_leads_from_checkpoint_back_into_the_trainer(tmp_path):
    """``python -m course_lib.train`` (a run, then its resume): no function of ``course_lib.train``
    is ever called while a function of ``course_lib.checkpoint`` is on the stack (the state is
    the trainer's; ``checkpoint`` only writes and reads files), and ``checkpoint`` imports
    nothing of the trainer."""
    import ast
    import sys

    import course_lib.checkpoint as checkpoint_mod
    import course_lib.train as train_mod

    tree = ast.parse(open(checkpoint_mod.__file__, encoding="utf-8").read())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not {m for m in imported if m.endswith("train")}, imported

    train_file, checkpoint_file = train_mod.__file__, checkpoint_mod.__file__
    back_calls, seen = [], set()

    def profile(frame, event, arg):
        if event != "call":
            return
        seen.add(frame.f_code.co_filename)
        if frame.f_code.co_filename != train_file:
            return
        caller = frame.f_back
        while caller is not None:
            if caller.f_code.co_filename == checkpoint_file:
                back_calls.append(f"{caller.f_code.co_name} -> {frame.f_code.co_name}")
                return
            caller = caller.f_back

    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**TINY, "max_steps": 6, "warmup_steps": 2, "eval_interval": 3}))
    out = str(tmp_path / "run")
    sys.setprofile(profile)
    try:
        main(["--config", str(path), "--out", out, "--no-progress", "--steps", "3"])
        main(["--resume", f"{out}/ckpt.pt", "--out", out, "--no-progress"])
    finally:
        sys.setprofile(None)
    assert checkpoint_file in seen and train_file in seen  # the trace saw both modules at work
    assert not back_calls, back_calls


def test_run_resolves_the_device_once_and_uses_only_the_trainers_public_api(tmp_path, monkeypatch):
    """``run`` resolves the device once (the trainer takes the torch.device as it is), and
    neither assigns to a trainer's attributes nor calls its private methods."""
    import ast
    import inspect
    import textwrap

    import course_lib.train as train_mod

    calls = []
    real = train_mod.resolve_device
    monkeypatch.setattr(
        train_mod, "resolve_device", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**TINY, "max_steps": 3, "warmup_steps": 1}))
    main(["--config", str(path), "--no-progress"])
    assert len(calls) == 1, calls

    tree = ast.parse(textwrap.dedent(inspect.getsource(train_mod.run)))
    wrong = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "trainer"
        and (node.attr.startswith("_") or isinstance(node.ctx, ast.Store))
    ]
    assert not wrong, f"run reaches into the trainer: {wrong}"


def test_the_trainer_wraps_its_model_in_ddp_inside_a_process_group(monkeypatch):
    """In a torchrun process group the Trainer builds the DistributedDataParallel wrapper
    itself (``run`` no longer patches ``trainer.model``); outside one, the model is the module."""
    import torch.nn.parallel

    import course_lib.device as device_mod

    class FakeDDP(torch.nn.Module):
        def __init__(self, module, device_ids=None):
            super().__init__()
            self.module, self.device_ids = module, device_ids

    plain = _trainer()
    assert plain.model is plain.module
    monkeypatch.setattr(device_mod, "dist_ready", lambda: True)
    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel", FakeDDP)
    wrapped = _trainer()
    assert isinstance(wrapped.model, FakeDDP) and wrapped.model.module is wrapped.module
    assert wrapped.model.device_ids is None  # a CPU rank: no device ids
