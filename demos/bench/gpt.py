"""The GPT half of demos/bench/train.py (`--model gpt`): our DecoderOnly against the same
GPT in PyTorch (demos/bench/torch_gpt.py), step time and, with --recipe, a whole training run;
with arch "llama" (`--model llama`) our Llama-style GPT against transformers' LlamaForCausalLM
holding the same weights (demos/bench/hf_llama.py)."""

import time

import numpy as np

from transformer.training.lm import LMTrainConfig

VOCAB = 101                       # the default corpus's vocabulary size


def _models(vocab, cfg, attention="fused", arch="gpt2", kv_heads=None):
    """Our GPT at the recipe's size (arch "gpt2": gpt_config's; "llama": llama_config's, with
    kv_heads key/value heads), its attention run as `attention`, and the PyTorch twin holding
    the very same weights (nanoGPT's GPT; transformers' LlamaForCausalLM)."""
    from autograd import manual_seed
    from transformer.families.decoder_only import DecoderOnly, gpt_config, llama_config

    manual_seed(cfg.seed)
    if arch == "llama":
        from demos.bench.hf_llama import transformers_twin
        ours = DecoderOnly(llama_config(vocab, cfg.block_size, attention=attention, n_kv_head=kv_heads))
        return ours, transformers_twin(ours)
    from demos.bench.torch_gpt import from_config, load_numpy_state
    from transformer.training.nanogpt import to_nanogpt
    ours = DecoderOnly(gpt_config(vocab, cfg.block_size, attention=attention))
    return ours, load_numpy_state(from_config(ours.config), to_nanogpt(ours))


def torch_engine(model, cfg):
    """(step, evaluate) for the PyTorch twin: the same recipe as transformer.training.lm.step_functions."""
    import torch
    params = list(model.parameters())
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=cfg.lr, betas=(0.9, cfg.beta2))
    vocab = model.lm_head.weight.shape[0]

    def loss_of(x, y):
        logits = model(torch.from_numpy(x))
        return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), torch.from_numpy(y).reshape(-1))

    def step(x, y, lr):
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = loss_of(x, y)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        return loss.item()

    def evaluate(x, y):
        model.eval()
        with torch.no_grad():
            loss = loss_of(x, y).item()
        model.train()
        return loss
    return step, evaluate


def _median_ratio(numerators, denominators):
    ratios = sorted(a / b for a, b in zip(numerators, denominators))
    return ratios[len(ratios) // 2]


def step_times(steps, rounds=9, profile=False, attention=("fused",), arch="gpt2", kv_heads=None):
    """Median ms per training step on one fixed batch of PyTorch's GPT and of ours with
    each kind of attention in `attention` ("fused", "composed"; the first is "ours"), all
    in `rounds` short interleaved rounds of steps // 3 steps.  Ratios are medians of the
    rounds' ratios: rounds a second apart see the same load, which can move every engine's
    median a good deal from one minute to the next.  With profile, then
    where our (first) step spends its time (bench_train.profile).  arch, kv_heads: _models'."""
    from autograd import kernels
    from demos.bench.train import _median
    from demos.bench.train import profile as print_profile
    from transformer.training.lm import step_functions

    cfg = LMTrainConfig()
    ours, theirs = _models(VOCAB, cfg, attention[0], arch, kv_heads)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, VOCAB, (cfg.batch_size, cfg.block_size)), rng.integers(0, VOCAB, (cfg.batch_size, cfg.block_size))
    result = {"logits_max_abs_diff": None}
    if theirs is not None:
        import torch
        with torch.no_grad():
            result["logits_max_abs_diff"] = float(np.abs(theirs(torch.from_numpy(x)).numpy() - ours(x).data).max())
    # the same starting weights for each kind of attention (only the time of a step is wanted here)
    steppers = {kind: step_functions(_models(VOCAB, cfg, kind, arch, kv_heads)[0], cfg)[0] for kind in attention}
    kernels.prepare(np.float32, fused_attention="fused" in attention)   # as the training loop does: steps timed here
    steppers["pytorch"] = torch_engine(theirs, cfg)[0]
    for step in steppers.values():
        for _ in range(5):               # warm-up: compilation, caches, allocator
            step(x, y, cfg.lr)
    by_round = {name: [] for name in steppers}
    for _ in range(rounds):
        for name, step in steppers.items():
            by_round[name].append(_median(lambda: step(x, y, cfg.lr), max(steps // 3, 1)) * 1e3)
    primary = attention[0]
    tokens = cfg.batch_size * cfg.block_size
    for name, times in by_round.items():
        key = "ours" if name == primary else name          # "pytorch", or a second kind of attention
        result[f"{key}_ms"] = times
        result[f"{key}_median_ms"] = float(np.median(times))
        result[f"{key}_tokens_per_s"] = tokens / result[f"{key}_median_ms"] * 1e3
    result["attention"] = primary
    result["ratio_vs_pytorch"] = _median_ratio(by_round[primary], by_round["pytorch"])
    for kind in attention[1:]:
        result[f"{kind}_ratio_vs_pytorch"] = _median_ratio(by_round[kind], by_round["pytorch"])
        result[f"ours_vs_{kind}"] = _median_ratio(by_round[primary], by_round[kind])
    if profile:
        print_profile(lambda: steppers[attention[0]](x, y, cfg.lr))
    return result


def recipe(data_path=None, attention="fused", arch="gpt2", kv_heads=None):
    """Both engines through the whole recipe from the same weights, batches and seed (ours
    with `attention`; arch, kv_heads: _models')."""
    from demos.gpt import load_corpus
    from transformer.data.text import TextDataset
    from transformer.training.lm import LMJob, step_functions, train_lm

    cfg = LMTrainConfig()
    text, source = load_corpus(data_path)
    data = TextDataset(text, cfg.block_size)
    ours, theirs = _models(len(data.vocab), cfg, attention, arch, kv_heads)
    runs = {}
    for name, (step, evaluate) in (("ours", step_functions(ours, cfg)[:2]), ("pytorch", torch_engine(theirs, cfg))):
        print(f"\n{name}: {cfg.max_iters} iterations on {source}")
        started = time.perf_counter()
        model = ours if name == "ours" else None                   # ours: the loop prepares its kernels
        history = train_lm(LMJob(data, step, evaluate, cfg, model), log=lambda line: print("  " + line, flush=True))
        runs[name] = {"val_loss": history["evals"][-1]["val"], "train_loss": history["evals"][-1]["train"],
                      "seconds": time.perf_counter() - started,
                      "evals": history["evals"]}
    runs["val_loss_difference"] = runs["ours"]["val_loss"] - runs["pytorch"]["val_loss"]
    return runs
