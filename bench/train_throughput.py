"""Training throughput: babelspace distillation against sentence-transformers, as two comparisons.

In one process, on the same teacher (minilm), student (e5-small), Bible training pairs, batch size,
max length, number of steps and precision (fp32), with teacher vectors precomputed for both:

(a) babelspace: ``DistillationObjective`` in our loop with its levers on: length-bucketed balanced
    batches, sources and targets padded separately, frozen word embeddings (no 96M-row Adam update).

**Loop vs loop**: (b) sentence-transformers' ``SentenceTransformerTrainer`` + ``losses.MSELoss``
given the same levers: its word embeddings frozen (``requires_grad_(False)``), babelspace's public
``batch_sampler`` (``babelspace.integrations.sentence_transformers.sampler.balanced_batch_sampler``)
yielding babelspace's very length-bucketed batches, the student's default prompt on every text (as
babelspace prepends it: the same tokens), and (a) computes the same loss (MSE averaged over
elements, ``reduction="elementwise"``) with babelspace's optimizer and schedule (``make_optimizer``:
fused AdamW, as the peer's default ``adamw_torch_fused``). Both sides' step times include fetching
and collating the batch. What is left is the loop itself.

**Recipe vs recipe**: (c) sentence-transformers' make_multilingual recipe as written (trainable
embeddings, shuffled batches, columns english/non_english, teacher vectors as labels) against (a);
then, after the same wall-clock budget as (c), both students' xx->en accuracy on the Bible test
books (and xx -> teacher-en), babelspace spending the budget on its recipe (closed-form fit + steps).

Prints pairs/second of each, both ratios, our model-FLOP utilisation against this machine's
measured fp32 matmul GFLOP/s.

    HF_HUB_OFFLINE=1 python bench/train_throughput.py --steps 20 --batch-size 16 --max-seq-length 128

``--compile-lever`` times only ``torch.compile`` (inductor) of the student's transformer against eager,
with the compile time, and projects both onto the default 120-step run.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def matmul_gflops(n: int = 1024, reps: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e9


def model_flops(bert: torch.nn.Module, attention_mask: torch.Tensor, trainable_embeddings: bool) -> float:
    """Training FLOPs of one step: 6 x non-embedding params x real tokens + attention score/context
    matmuls (fwd+bwd) on the padded length. Padding is counted as waste (not as useful FLOPs)."""
    cfg = bert.config
    emb = sum(p.numel() for p in bert.get_input_embeddings().parameters())
    pos = sum(
        p.numel() for n, p in bert.named_parameters() if "position_embeddings" in n or "token_type" in n
    )
    n_params = sum(p.numel() for p in bert.parameters()) - emb - pos
    tokens = float(attention_mask.sum())
    lengths = attention_mask.sum(1).float()
    attn = 6 * 2 * cfg.num_hidden_layers * cfg.hidden_size * float((lengths**2).sum())
    return 6 * n_params * tokens + attn


def held_out(student, teacher, langs, n: int) -> dict[str, float]:
    from babelspace.evaluation.held_out import held_out_texts
    from babelspace.metrics.tatoeba import top1_accuracy
    from babelspace.models.encoder import encode

    en, per = held_out_texts(langs, n, seed=0)
    s_en, t_en = encode(student, en), encode(teacher, en)
    own, tsp = [], []
    for texts in per.values():
        x = encode(student, texts)
        own.append(top1_accuracy(x, s_en))
        tsp.append(top1_accuracy(x, t_en))
    return {"xx>en": float(np.mean(own)), "xx>T(en)": float(np.mean(tsp))}


def lever_table(args, teacher, pairs, tvec, full_pps: float | None) -> None:
    """pairs/s of the babelspace step with one lever switched off at a time (same steps, batch, length)."""
    from babelspace.data.sampling import BalancedBatchSampler
    from babelspace.models.encoder import encode, make_student
    from babelspace.objectives.distillation import DistillationObjective
    from babelspace.training.config import TrainConfig
    from babelspace.training.setup.phases import make_optimizer

    step_times: list[float] = []
    cfg = TrainConfig(batch_size=args.batch_size, lr=args.lr, max_steps=args.steps)

    def run(freeze: bool, bucket: bool, joint: bool, compiled: bool = False) -> float:
        torch.manual_seed(0)
        student = make_student("e5-small", teacher, projection="auto", max_seq_length=args.max_seq_length)
        if compiled:  # ST 6 calls the transformer's forward directly: compile that (inductor, any length)
            bert = student[0].auto_model
            bert.forward = torch.compile(bert.forward, dynamic=True)
        step_times.clear()
        if freeze:
            for p in student[0].auto_model.get_input_embeddings().parameters():
                p.requires_grad = False
        obj = DistillationObjective(student, lambda texts: np.stack([tvec[t] for t in texts]))
        params = [p for p in obj.parameters() if p.requires_grad]
        opt, _ = make_optimizer(params, cfg, args.steps)  # babelspace train's AdamW, as (a)'s
        sampler = BalancedBatchSampler(pairs, args.batch_size, bucket_by_length=bucket, seed=0, infinite=True)
        it = iter(sampler)
        student.train()
        total = 0.0
        for _ in range(args.steps):
            b = [pairs[i] for i in next(it)]
            missing = [p.src for p in b if p.src not in tvec]
            if missing:
                tvec.update(zip(missing, encode(teacher, missing), strict=True))
            t = time.perf_counter()
            if not joint:
                loss = obj(obj.collate(b))["loss"]
            else:  # one pass over sources and targets padded together
                teach = torch.from_numpy(np.stack([tvec[p.src] for p in b]))
                emb = obj.embed(obj.tokenize([p.src for p in b] + [p.tgt for p in b]))
                n = len(b)
                loss = (((emb[:n] - teach) ** 2).sum(1) + ((emb[n:] - teach) ** 2).sum(1)).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step_times.append(time.perf_counter() - t)
            total += step_times[-1]
        return args.steps * args.batch_size / total

    if full_pps is None:  # --compile-lever: that lever alone
        compile_lever(run, step_times, args, None)
        return
    print("levers (babelspace step with one lever off; pairs/s, ratio to all levers on):")
    for name, kw in (
        ("all levers on", None),
        ("embeddings trainable (dense 96M-row update)", dict(freeze=False, bucket=True, joint=False)),
        ("no length bucketing", dict(freeze=True, bucket=False, joint=False)),
        ("one joint source+target pass (padded together)", dict(freeze=True, bucket=True, joint=True)),
    ):
        pps = full_pps if kw is None else run(**kw)
        print(f"  {name:45s} {pps:6.2f}  ({pps / full_pps:.2f}x)")
    compile_lever(run, step_times, args, full_pps)


def compile_lever(run, step_times: list[float], args, full_pps: float | None) -> None:
    """The torch.compile lever: its pairs/s over the same steps (compile time included), after warm-up,
    and what a 120-step run (the default) would take with and without it."""
    import torch._dynamo

    torch._dynamo.reset()
    eager = run(freeze=True, bucket=True, joint=False)
    eager_steady = float(np.median(step_times))
    full_pps = full_pps or eager
    pps = run(freeze=True, bucket=True, joint=False, compiled=True)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    if not graphs:
        print("  torch.compile: nothing was compiled; not reported")
        return
    warm = step_times[3:] or step_times
    steady = float(np.median(warm))
    overhead = sum(step_times) - steady * len(step_times)  # the compiles (first steps, new shapes)
    print(
        f"  {'torch.compile (compile time included)':45s} {pps:6.2f}  ({pps / full_pps:.2f}x; {graphs} graphs)"
    )
    print(
        f"  {'torch.compile, steady steps (median)':45s} {args.batch_size / steady:6.2f}  "
        f"(eager median {args.batch_size / eager_steady:.2f}; eager over all steps {eager:.2f})"
    )
    print(
        f"  120 steps: eager ~{120 * eager_steady:.0f} s, compiled ~{overhead + 120 * steady:.0f} s "
        f"(compile overhead ~{overhead:.0f} s)"
    )


class BabelspaceSteps:
    """(a): babelspace's distillation steps over ``batches``, one per :meth:`step`, each timed with
    the collation of its batch: frozen word embeddings, element-mean MSE, babelspace's optimizer and
    schedule (``make_optimizer``), 2 untimed warm-up passes first."""

    def __init__(self, args, teacher, batches, tvec) -> None:
        from babelspace.models.encoder import make_student
        from babelspace.objectives.distillation import DistillationObjective
        from babelspace.training.config import TrainConfig
        from babelspace.training.setup.phases import make_optimizer

        torch.manual_seed(0)
        student = make_student("e5-small", teacher, projection="auto", max_seq_length=args.max_seq_length)
        self.bert = student[0].auto_model
        for p in self.bert.get_input_embeddings().parameters():
            p.requires_grad = False
        self.objective = DistillationObjective(
            student, lambda texts: np.stack([tvec[t] for t in texts]), reduction="elementwise"
        )
        self.params = [p for p in self.objective.parameters() if p.requires_grad]
        cfg = TrainConfig(batch_size=args.batch_size, lr=args.lr, max_steps=args.steps)
        self.opt, self.schedule = make_optimizer(self.params, cfg, args.steps)  # babelspace train's
        student.train()
        for b in batches[:2]:  # warm-up (allocator, thread pools): untimed
            self.objective(self.objective.collate(b))["loss"].backward()
        self.opt.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        self.batches, self.times, self.flops = batches, [], 0.0

    def step(self) -> None:
        b = self.batches[len(self.times)]
        t = time.perf_counter()
        batch = self.objective.collate(b)
        loss = self.objective(batch)["loss"]
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.schedule.step()
        self.times.append(time.perf_counter() - t)
        masks = (batch[side]["attention_mask"] for side in ("source", "target"))
        self.flops += sum(model_flops(self.bert, m, trainable_embeddings=False) for m in masks)


def main() -> None:  # noqa: PLR0915 - a benchmark script: one linear sequence of measurements
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--langs", default="de,fr,es,ru,zh,ar,hi,sw")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--test-sentences", type=int, default=200)
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument(
        "--fit-pairs", type=int, default=300, help="pairs for babelspace's closed-form projection fit"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--levers", action="store_true", help="also time babelspace with each lever switched off")
    ap.add_argument(
        "--compile-lever", action="store_true", help="only time the torch.compile lever against eager"
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    langs = args.langs.split(",")

    from babelspace.data.bible import bible_pairs
    from babelspace.data.sampling import BalancedBatchSampler
    from babelspace.models.encoder import encode, load_encoder

    gflops = matmul_gflops()
    print(
        f"machine: torch {torch.__version__}, {torch.get_num_threads()} threads, fp32 matmul {gflops:.1f} GFLOP/s"
    )
    teacher = load_encoder("minilm", max_seq_length=args.max_seq_length)
    pairs = bible_pairs(langs, "train").pairs
    n_pairs = args.steps * args.batch_size
    sampler = BalancedBatchSampler(pairs, args.batch_size, bucket_by_length=True, seed=0, infinite=True)
    it = iter(sampler)
    batches = [[pairs[i] for i in next(it)] for _ in range(args.steps)]
    used = [p for b in batches for p in b]
    tvec = {p.src: v for p, v in zip(used, encode(teacher, [p.src for p in used]), strict=True)}
    if args.compile_lever:
        lever_table(args, teacher, pairs, tvec, None)
        return

    # (a) and (b) alternate step by step, so that both see the machine in the same state
    ours = BabelspaceSteps(args, teacher, batches, tvec)
    leveled, lev_time, lev_times = peer_run(args, pairs, used, tvec, leveled=True, between=ours.step)
    del leveled
    ours_time = sum(ours.times)
    ours_pps, ours_med = n_pairs / ours_time, args.batch_size / float(np.median(ours.times))
    mfu = ours.flops / ours_time / 1e9 / gflops
    print(
        f"(a) babelspace : {ours_pps:6.2f} pairs/s  ({ours_time / args.steps:.2f} s/step, median "
        f"{np.median(ours.times):.2f}); model FLOP/s {ours.flops / ours_time / 1e9:.1f} G = {100 * mfu:.0f}% of measured matmul"
    )
    report_peer("(b) ST loop, same levers", args, lev_time, lev_times)
    lev_pps, lev_med = n_pairs / sum(lev_times), args.batch_size / float(np.median(lev_times))
    print(
        f"loop vs loop (same batches, frozen embeddings, same prompt, same loss, batch {args.batch_size}, fp32, "
        f"steps alternating): babelspace / ST {ours_pps / lev_pps:.2f}x (all steps), "
        f"{ours_med / lev_med:.2f}x (median steps)"
    )
    if args.levers:
        lever_table(args, teacher, pairs, tvec, ours_pps)
    peer, peer_time, peer_times = peer_run(args, pairs, used, tvec, leveled=False)
    report_peer("(c) ST recipe as written", args, peer_time, peer_times)
    peer_pps, peer_med = n_pairs / sum(peer_times), args.batch_size / float(np.median(peer_times))
    print(
        f"recipe vs recipe (each with its own defaults): babelspace / ST {ours_pps / peer_pps:.2f}x (all steps), "
        f"{ours_med / peer_med:.2f}x (median steps)"
    )

    if not args.skip_eval:
        held_out_after_same_budget(args, teacher, pairs, tvec, peer, peer_time, langs)


def peer_run(args, pairs, used, tvec, *, leveled: bool, between=None):
    """sentence-transformers' trainer, teacher vectors as labels. ``leveled``: frozen word embeddings
    and babelspace's public batch sampler (``balanced_batch_sampler``) over all ``pairs``, so it
    trains on babelspace's length-bucketed batches (the rows of ``used``, the same seed); else the
    recipe as written on the pairs ``used`` (trainable embeddings, shuffled batches, no prompt).
    ``between``: called after each step, its time left out (the other side's step).
    Returns the model, the training wall time (setup included) and each step's time (fetching and
    collating its batch included, as babelspace's)."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, losses
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments
    from transformers import TrainerCallback

    from babelspace.integrations.sentence_transformers.sampler import balanced_batch_sampler, pairs_dataset
    from babelspace.models.encoder import default_prompt
    from babelspace.resources import resolve_model

    class StepTimes(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self._t = 0.0
            self.between = 0.0  # time spent in ``between`` (not the peer's)

        def on_step_begin(self, *a, **k):  # type: ignore[no-untyped-def]
            self._t = time.perf_counter()

        def on_step_end(self, *a, **k):  # type: ignore[no-untyped-def]
            self.times.append(time.perf_counter() - self._t)
            if between is not None:
                t = time.perf_counter()
                between()
                self.between += time.perf_counter() - t

    class FetchTimedTrainer(SentenceTransformerTrainer):
        """The trainer, timing each step's batch fetch (collation included), which it does before
        ``on_step_begin``."""

        fetch_times: list[float]

        def get_batch_samples(self, *a, **k):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            out = super().get_batch_samples(*a, **k)
            self.fetch_times.append(time.perf_counter() - t)
            return out

    torch.manual_seed(0)
    peer = SentenceTransformer(resolve_model("e5-small"), device="cpu")
    peer.max_seq_length = args.max_seq_length
    if leveled:
        peer[0].auto_model.get_input_embeddings().requires_grad_(False)
        zero = np.zeros_like(next(iter(tvec.values())))
        # labels looked up as rows are read: the planned rows' teacher vectors (a row no batch holds
        # is read only for the model card's examples, and gets zeros)
        ds = pairs_dataset(pairs, lambda texts: np.stack([tvec.get(t, zero) for t in texts]))
        extra = {
            "batch_sampler": balanced_batch_sampler(pairs, bucket_by_length=True),
            "prompts": default_prompt(peer),  # babelspace prepends it (Objective.tokenize)
        }
    else:
        ds = Dataset.from_dict(
            {
                "english": [p.src for p in used],
                "non_english": [p.tgt for p in used],
                "label": [tvec[p.src].tolist() for p in used],
            }
        )
        extra = {}
    with tempfile.TemporaryDirectory() as tmp:
        targs = SentenceTransformerTrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=args.batch_size,
            learning_rate=args.lr,
            max_steps=args.steps,
            warmup_steps=0,
            save_strategy="no",
            logging_steps=10**6,
            report_to=[],
            dataloader_drop_last=True,
            use_cpu=True,
            seed=0,
            **extra,
        )
        timer = StepTimes()
        trainer = FetchTimedTrainer(
            model=peer, args=targs, train_dataset=ds, loss=losses.MSELoss(peer), callbacks=[timer]
        )
        trainer.fetch_times = []
        t = time.perf_counter()
        trainer.train()
        peer_time = time.perf_counter() - t - timer.between
    return peer, peer_time, [f + s for f, s in zip(trainer.fetch_times, timer.times, strict=False)]


def report_peer(name: str, args, wall: float, times: list[float]) -> None:
    """pairs/s over the steps (as (a)'s: each batch's fetch included), the median step, and the
    trainer's whole ``train()`` call (its setup included)."""
    med, steps = float(np.median(times)), sum(times)
    print(
        f"{name:26s}: {args.steps * args.batch_size / steps:6.2f} pairs/s  ({steps / args.steps:.2f} s/step); "
        f"median step {med:.2f} s = {args.batch_size / med:.2f} pairs/s; train() with its setup {wall:.1f} s"
    )


def held_out_after_same_budget(args, teacher, pairs, tvec, peer, peer_time: float, langs) -> None:
    """Both recipes get the peer's training wall time. babelspace spends it on its recipe: the
    closed-form projection fit (on ``--fit-pairs`` pairs, mean-centred teacher targets; its encoding
    time counts) and then distillation steps until the budget is used."""
    from babelspace.data.sampling import BalancedBatchSampler
    from babelspace.models.encoder import encode, make_student, pooled_encoder
    from babelspace.models.projection_fit import fit_projection
    from babelspace.objectives.distillation import DistillationObjective

    t0 = time.perf_counter()
    torch.manual_seed(0)
    student = make_student(
        "e5-small", teacher, projection="always", max_seq_length=args.max_seq_length, drop_normalize=True
    )
    rng = np.random.default_rng(1)
    fit = [pairs[i] for i in rng.choice(len(pairs), args.fit_pairs, replace=False)]
    missing = [p.src for p in fit if p.src not in tvec]
    if missing:
        tvec.update(zip(missing, encode(teacher, missing), strict=True))
    teach = np.stack([tvec[p.src] for p in fit])
    shift = teach.mean(0)
    pooled = pooled_encoder(student)
    fit_projection(
        student,
        encode(pooled, [p.src for p in fit], normalize=False),
        encode(pooled, [p.tgt for p in fit], normalize=False),
        teach,
        ridge=0.01,
        teacher_shift=shift,
        prior="zero",  # the plain ridge fit these figures were measured with
    )
    for p in student[0].auto_model.get_input_embeddings().parameters():
        p.requires_grad = False
    obj = DistillationObjective(
        student, lambda texts: np.stack([tvec[t] for t in texts]), teacher_shift=shift
    )
    params = [p for p in obj.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr)
    it = iter(BalancedBatchSampler(pairs, args.batch_size, bucket_by_length=True, seed=7, infinite=True))
    student.train()
    steps = 0
    fit_s = time.perf_counter() - t0
    while time.perf_counter() - t0 < peer_time:
        b = [pairs[i] for i in next(it)]
        missing = [p.src for p in b if p.src not in tvec]
        if missing:  # teacher vectors of the training sources are precomputed in a real run: not timed
            t_pause = time.perf_counter()
            tvec.update(zip(missing, encode(teacher, missing), strict=True))
            t0 += time.perf_counter() - t_pause
        loss = obj(obj.collate(b))["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        steps += 1
    student.eval()
    peer.eval()
    r_ours = held_out(student, teacher, langs, args.test_sentences)
    r_peer = held_out(peer, teacher, langs, args.test_sentences)
    print(
        f"held-out ({args.test_sentences} test verses x {len(langs)} langs) after the same {peer_time:.0f} s of "
        f"training: babelspace recipe = projection fit on {args.fit_pairs} pairs ({fit_s:.0f} s) + {steps} steps; "
        f"peer = {args.steps} steps"
    )
    print(f"  babelspace  xx>en {r_ours['xx>en']:.1f}  xx>T(en) {r_ours['xx>T(en)']:.1f}")
    print(f"  peer        xx>en {r_peer['xx>en']:.1f}  xx>T(en) {r_peer['xx>T(en)']:.1f}")


if __name__ == "__main__":
    main()
