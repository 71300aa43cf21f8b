"""The checks of the kernels (autograd/kernels/reference.py): softmax, its backward,
log-softmax, LayerNorm's backward and Adam's step, each on several seeds and shapes, logits
spread over 1e4 and fully masked rows, against the numpy definitions."""

import numpy as np

from exercises.checks.end_to_end import judge_training
from exercises.checks.expected import expect
from exercises.checks.feedback import (FRESH, Judge, Wrong, cases, mistake, require_dtype, tolerance, untouched,
                                       with_fresh)

NO_SHIFT = ("max not subtracted", "exp overflows to inf for large logits (NaN after the division): subtract each "
            "row's max before exp")
MEAN_SHIFT = ("shifted by the mean", "subtracting the mean does not bound the exponents: a row spread over "
              "thousands still overflows; subtract the row's max, which makes every exponent <= 0")
GLOBAL_MAX = ("one max for the whole array", "each row needs its own max: with one max for all, a row far "
              "below it underflows to 0")
MASKED_NAN = ("fully masked row gives NaN", "a row of -inf must give zeros, but -inf - (-inf), 0 / 0 and "
              "log(0) - log(0) are NaN: shift such a row by 0 and give it zeros where its sum is 0")
WRONG_AXIS = ("normalised over the wrong axis", "softmax runs over the last axis: each row sums to 1")
NO_KEEPDIMS = ("row sums without keepdims", "sum(axis=-1) drops the axis, so the row sums line up along each row "
               "instead of down the rows: keepdims=True")
NAN_HIDDEN = ("NaN hidden", "a row holding NaN or +inf must come out NaN, as in PyTorch, so that a diverging model "
              "shows it: only a zero sum (a fully masked row) gives zeros")
WHOLE_SUM = ("summed over the whole array", "each row has its own sum: sum over the last axis only (keepdims=True)")


def changed(sent, returned):
    """Whether the arrays a child sent back, as the student's code left them, differ from the
    ones the judge sent: compared here, as nothing in the child judges (a comparison there,
    the student's code could replace)."""
    try:
        return len(returned) != len(sent) or any(not np.array_equal(np.asarray(back), np.asarray(given), equal_nan=True)
                                                 for back, given in zip(returned, sent))
    except (TypeError, ValueError):
        return True


def kernel_output(task, what, case, name, *arrays):
    """The child's reference.NAME(*arrays): its output, once the arrays it was given came back
    as the judge sent them (a kernel's caller still uses them)."""
    found = task.call("kernel", name, *arrays)
    return untouched(what, case, {"changed": changed(arrays, found["given"]), "out": found["out"]})


def logits():
    """(case, logits) from the smallest up, on several seeds."""
    found = []
    for seed, r in enumerate(cases()):
        found.append((f"a (1, 3) row, seed {seed}", r.standard_normal((1, 3)) * 3))
    found += [("(2, 5) logits", cases()[0].standard_normal((2, 5)) * 3),
              ("(3, 4, 7) logits", cases()[1].standard_normal((3, 4, 7)) * 3),
              ("(2, 5) logits near 1000", cases()[2].standard_normal((2, 5)) + 1000.0)]
    spread = cases()[0].uniform(-5000.0, 5000.0, (3, 6))
    spread[:, 0], spread[:, 1] = -5000.0, 5000.0                       # each row spans 1e4
    spread[2] -= 20000.0                                               # and one row far below the others
    masked = cases()[1].standard_normal((3, 4))
    masked[0], masked[1, :2] = -np.inf, -np.inf                        # a fully and a partly masked row
    square = ("(3, 3) logits", cases()[2].standard_normal((3, 3)) * 3)
    fresh = [(f"(4, 6) logits, seed {seed} (drawn for this grading)", np.random.default_rng(seed).standard_normal((4, 6))
              * 3) for seed in FRESH]
    return found[:3] + [square] + found[3:] + [("(3, 6) logits spread over 1e4, a row 20000 lower", spread),
                                              ("(3, 4) logits, row 0 fully masked (-inf), row 1 half", masked)] + fresh


def poisoned():
    """(case, logits) with a NaN in row 0 and a +inf in row 1 (row 2 plain)."""
    x = cases()[2].standard_normal((3, 4))
    x[0, 1], x[1, 2] = np.nan, np.inf
    return "(3, 4) logits, a NaN in row 0, +inf in row 1", x


def float32_logits():
    """(case, logits) in float32: the result must stay float32."""
    return "(2, 5) float32 logits", cases()[0].standard_normal((2, 5)).astype(np.float32) * 3


def check_softmax(task):
    judge = Judge()
    with np.errstate(all="ignore"):
        for case, x in logits() + [poisoned(), float32_logits()]:
            got = kernel_output(task, "softmax", case, "softmax", x)
            judge.compare("softmax: exp(x - row max) / row sum, each row summing to 1", case, got, expect("softmax", x),
                          [(*NO_SHIFT, expect("softmax_unshifted", x)), (*MEAN_SHIFT, expect("softmax_mean_shift", x)),
                           (*GLOBAL_MAX, expect("softmax_global_max", x)),
                           (*GLOBAL_MAX, expect("softmax_global_max_guarded", x)),
                           (*MASKED_NAN, expect("softmax_masked_nan", x)), (*WRONG_AXIS, expect("softmax_columns", x)),
                           (*NO_KEEPDIMS, expect("softmax_no_keepdims", x)),
                           *[(*WHOLE_SUM, expect("softmax_whole_sum", x, shifted)) for shifted in (False, True)],
                           (*NAN_HIDDEN, expect("softmax_nan_hidden", x))], **tolerance(x))
            require_dtype("softmax: the logits' dtype", case, got, x.dtype)
    return "three seeds, 2-D and 3-D, logits near 1000, spread over 1e4, fully and partly masked rows, NaN and " \
        "+inf, float32"


def check_softmax_backward(task):
    judge = Judge()
    every = logits()
    for case, x in [every[3]] + every[:3] + every[4:6] + [float32_logits()] + every[8:]:
        y = expect("softmax", x).astype(x.dtype)
        dy = np.random.default_rng(x.size).standard_normal(x.shape).astype(x.dtype)
        got = kernel_output(task, "softmax_backward", case, "softmax_backward", y, dy)
        require_dtype("softmax_backward: y's dtype", case, got, x.dtype)
        judge.compare("softmax_backward: dx_i = y_i (dy_i - sum_j dy_j y_j)", f"y = softmax of {case}, random dy",
                      got, expect("softmax_backward", y, dy),
                      [("no subtraction", "every output depends on every input: dx_i = y_i (dy_i - sum_j dy_j y_j)",
                        expect("softmax_backward_no_subtraction", y, dy)),
                       ("sum not weighted by y", "the sum is sum_j dy_j y_j, each upstream gradient weighted by its y",
                        expect("softmax_backward_unweighted_sum", y, dy)),
                       ("leading y missing", "the whole bracket is multiplied by y_i",
                        expect("softmax_backward_no_leading_y", y, dy)),
                       ("diagonal of the Jacobian only", "y_i (1 - y_i) is only dy_i/dx_i; the off-diagonal "
                        "-y_i y_j terms count too", expect("softmax_backward_diagonal", y, dy)),
                       ("summed over the wrong axis", "sum_j runs over each row, the last axis: sum(axis=-1, "
                        "keepdims=True)", expect("softmax_backward_first_axis", y, dy)),
                       (*WHOLE_SUM, expect("softmax_backward_whole_sum", y, dy)),
                       (*NO_KEEPDIMS, expect("softmax_backward_no_keepdims", y, dy)),
                       ("mean instead of sum", "sum_j dy_j y_j is a sum over the row, not a mean",
                        expect("softmax_backward_mean", y, dy))], **tolerance(x))
    return "three seeds, square, 2-D and 3-D, float32, random upstream gradients"


def check_log_softmax(task):
    judge = Judge()
    with np.errstate(all="ignore"):
        for case, x in logits() + [poisoned(), float32_logits()]:
            got = kernel_output(task, "log_softmax", case, "log_softmax", x)
            require_dtype("log_softmax: the logits' dtype", case, got, x.dtype)
            judge.compare("log_softmax: (x - max) - log sum exp(x - max)", case, got, expect("log_softmax", x),
                          [("log of softmax", "log(softmax(x)) is -inf where softmax underflows to 0 (a row spread "
                            "over 1e4): compute (x - max) - log sum exp(x - max) directly",
                            expect("log_of_softmax", x)),
                           (*NO_SHIFT, expect("log_softmax_unshifted", x)),
                           ("max dropped from the result", "x - log sum exp(x - max) forgets the max: the result is "
                            "(x - max) - log sum exp(x - max)", expect("log_softmax_max_dropped", x)),
                           ("fully masked row gives NaN", "a row of -inf gives 0 (no key to attend to), not NaN: "
                            "shift it by 0", expect("log_softmax_masked_nan", x)),
                           ("fully masked row gives -inf", "a row of -inf gives 0 (no key to attend to, as its "
                            "softmax gives 0 weights), not -inf", expect("log_softmax_masked_minus_inf", x)),
                           ("log-sum-exp added", "the log-sum-exp is subtracted: (x - max) - log sum exp(x - max)",
                            expect("log_softmax_added", x)), *[(*GLOBAL_MAX, expect("log_softmax_global_max", x, spelling))
                             for spelling in ("plain", "log_one", "zeroed")],
                           (*WHOLE_SUM, expect("log_softmax_whole_sum", x))], **tolerance(x))
    judge_training(judge, task)
    return "three seeds, 2-D and 3-D, logits near 1000, spread over 1e4, fully and partly masked rows, NaN and +inf, " \
        "float32, and a seeded training run"


ROW_MEAN = ("averaged over the rows", "the weight and bias are used by every row: their gradients add up the "
            "rows' contributions (sum over axis 0), not their mean")


def layer_norm_forward(x, eps):
    """(xhat, rstd) of LayerNorm over the rows of x: what its forward saves for the backward."""
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    return (x - mean) * rstd, rstd


def check_layer_norm_backward(task):
    judge = Judge()
    for seed, shape in with_fresh(((1, 4), (3, 5), (4, 7), (2, 2)), again=2):
        r = np.random.default_rng(seed)
        x, w = r.standard_normal(shape) * 3 + 1, r.standard_normal(shape[1])
        r.standard_normal(shape[1])                                    # (a bias, which the backward does not need)
        g = r.standard_normal(shape)
        xhat, rstd = layer_norm_forward(x, 1e-5)
        case = f"x {shape}, random weight and upstream gradient (seed {seed})"
        dx, dw, db = kernel_output(task, "LayerNorm's backward", case, "layer_norm_backward", g, xhat, rstd, w)
        judge.compare("LayerNorm's dx = rstd (g w - mean(g w) - xhat mean(g w xhat))", case, dx,
                      expect("layer_norm_dx", g, xhat, rstd, w),
                      [("mean terms missing", "x enters every output of its row through the mean and the variance",
                        expect("layer_norm_dx_no_means", g, xhat, rstd, w)),
                       ("variance term missing", "the term - xhat mean(g w xhat) comes from the variance",
                        expect("layer_norm_dx_no_xhat_term", g, xhat, rstd, w)),
                       ("weight missing from dx", "the gradient reaching xhat is g * weight",
                        expect("layer_norm_dx_no_weight", g, xhat, rstd, w)),
                       ("rstd missing from dx", "xhat = (x - mean) * rstd, so every path to x is multiplied by rstd",
                        expect("layer_norm_dx_no_rstd", g, xhat, rstd, w)),
                       ("sums instead of means", "the mean and the variance average over the row: mean(g w) and "
                        "mean(g w xhat), not their sums", expect("layer_norm_dx_sums", g, xhat, rstd, w)),
                       ("sign of the xhat term", "the variance's term is subtracted: - xhat mean(g w xhat)",
                        expect("layer_norm_dx_plus_xhat_term", g, xhat, rstd, w)),
                       ("means over the wrong axis", "the mean and the variance are each row's: mean(axis=1)",
                        expect("layer_norm_dx_column_means", g, xhat, rstd, w))], **tolerance(x))
        judge.compare("LayerNorm's dweight = sum over rows of g xhat", case, dw, expect("layer_norm_dweight", g, xhat),
                      [("dweight and dbias swapped", "dweight sums g * xhat, dbias sums g",
                        expect("layer_norm_dbias", g)),
                       ("dweight multiplied by the weight", "out = xhat w + b, so d out / d w is xhat: dweight sums "
                        "g xhat, with no w", expect("layer_norm_dweight_times_weight", g, xhat, w)),
                       (*ROW_MEAN, expect("layer_norm_dweight_mean", g, xhat))], **tolerance(x))
        judge.compare("LayerNorm's dbias = sum over rows of g", case, db, expect("layer_norm_dbias", g),
                      [("dweight and dbias swapped", "dweight sums g * xhat, dbias sums g",
                        expect("layer_norm_dweight", g, xhat)), (*ROW_MEAN, expect("layer_norm_dbias_mean", g))], **tolerance(x))
    _judge_float32(task)
    judge_rms_norm_dx(judge, task)
    judge_training(judge, task)
    return ("four shapes, 1 row to 4, random weight and upstream gradient, in float64 and float32, RMSNorm's dx "
            "on three, and a seeded training run")


def _judge_float32(task):
    """A float32 model's LayerNorm gets float32 gradients back (a float64 dx once passed)."""
    r = np.random.default_rng(5)
    x, w, g = r.standard_normal((3, 5)) * 3 + 1, r.standard_normal(5), r.standard_normal((3, 5))
    xhat, rstd = layer_norm_forward(x, 1e-5)
    arrays = [a.astype(np.float32) for a in (g, xhat, rstd, w)]
    case = "x (3, 5), weight and upstream gradient in float32"
    found = kernel_output(task, "LayerNorm's backward", case, "layer_norm_backward", *arrays)
    for name, got in zip(("dx", "dweight", "dbias"), found):
        require_dtype(f"LayerNorm's {name}: a float32 model's dtype", case, got, np.float32)


def judge_rms_norm_dx(judge, task):
    """The exercise's second region, RMSNormFn.backward's dx (autograd/ops/norm.py), through the op;
    then without a weight, rms_norm(x) + rms_norm(z), where both backwards get the same upstream
    array: one that writes into it changes the other's gradient."""
    for seed, shape in enumerate(((3, 5), (2, 7), (1, 4))):         # N != 1 and N != D first
        r = np.random.default_rng(100 + seed)
        x, w, g = r.standard_normal(shape) * 3 + 1, r.standard_normal(shape[1]), r.standard_normal(shape)
        got = task.call("rms_norm_dx", x, w, g, 1e-6)
        judge.compare("RMSNorm's dx = rstd (g w - xhat mean(g w xhat)), no mean taken",
                      f"x {shape}, RMSNorm (autograd/ops/norm.py), seed {seed}", got, expect("rms_norm_dx", x, w, g, 1e-6),
                      [("RMSNorm's dx with LayerNorm's mean term", "RMSNorm subtracts no mean in its forward, so "
                        "its dx has no - mean(g w) term", expect("rms_norm_dx_with_mean", x, w, g, 1e-6)),
                       ("RMSNorm's dx without rstd", "xhat = x rstd: the chain rule multiplies dx by rstd",
                        expect("rms_norm_dx_no_rstd", x, w, g, 1e-6)),
                       ("sums instead of means", "the projection is the row's mean of dL/dxhat * xhat, not its sum",
                        expect("rms_norm_dx_summed", x, w, g, 1e-6)),
                       ("divided by the rows, not the width", "the projection is each row's mean over its D "
                        "features: divide by xhat.shape[1], not by the number of rows",
                        expect("rms_norm_dx_over_rows", x, w, g, 1e-6)),
                       ("weight missing from dx", "the gradient reaching xhat is g * weight (grad_xhat)",
                        expect("rms_norm_dx", x, np.ones_like(w), g, 1e-6))], atol=1e-8)
    for seed, shape in enumerate(((3, 5), (2, 4))):
        r = np.random.default_rng(110 + seed)
        x, z, g = r.standard_normal(shape) * 2 + 1, r.standard_normal(shape) * 2 - 1, r.standard_normal(shape)
        got, ones = task.call("rms_norm_sum", x, z, g, 1e-6), np.ones(shape[1])
        both = [got["x"], got["z"]]
        try:
            judge.compare("RMSNorm's dx without a weight, of rms_norm(x) + rms_norm(z): both get the same upstream "
                          "gradient", f"x and z {shape}, no weight, seed {seed}",
                          np.concatenate([np.ravel(a) for a in both]) if all(a is not None for a in both) else
                          np.zeros(0), np.concatenate([np.ravel(expect("rms_norm_dx", a, ones, g, 1e-6)) for a in (x, z)]),
                          atol=1e-8)
        except Wrong:
            if changed([g], [got["upstream"]]):
                raise Wrong(f"RMSNorm's dx without a weight, x and z {shape}, seed {seed}: {IN_PLACE_UPSTREAM}") from None
            raise


IN_PLACE_UPSTREAM = mistake("upstream gradient changed in place", "without a weight, grad_xhat is the upstream "
                            "gradient itself, which the other branch of the sum also reads: compute dx into a new "
                            "array (dx = grad_xhat - ...), not with -= on grad_xhat")


NOT_MOVED = ("parameters did not move", "p must change in place (p -= ..., not p = p - ..., which rebinds a local "
             "name), by a step made with m and v already updated by this step's g")
ADAM_MISTAKES = {"v_of_signed_g": ("v from g, not g^2", "v averages the squared gradient g * g"),
                 "betas_swapped": ("betas swapped", "m decays by beta1, v by beta2"),
                 "m_hat_only": ("v not bias-corrected", "v starts at 0 too: v_hat = v / (1 - beta2^t)"),
                 "sqrt_then_correct": ("v corrected outside the square root", "correct v before the root: "
                                       "sqrt(v / (1 - beta2^t)), not sqrt(v) / (1 - beta2^t)"),
                 "no_decay": ("moments not decayed", "m = beta1 m + (1 - beta1) g: multiply the old m by beta1 first "
                              "(and v by beta2)"),
                 "p_not_in_place": NOT_MOVED, "old_moments": NOT_MOVED}
ADAM_VARIANTS = ("right", "no_correction", "eps_inside", "v_of_g", "step_from_zero", "not_in_place", *ADAM_MISTAKES)


def check_adam_step(task):
    judge = Judge()
    for seed, (size, lr, b1, b2, eps) in with_fresh(((3, 0.1, 0.9, 0.999, 1e-8), (7, 0.01, 0.8, 0.99, 1e-3))):
        r = np.random.default_rng(seed)
        p0, grads = r.standard_normal(size), r.standard_normal((4, size)) * 0.3
        p, m, v = p0.copy(), np.zeros(size), np.zeros(size)
        for step, g in enumerate(grads, 1):
            found = task.call("adam_step", p, g, m, v, lr, b1, b2, eps, step)
            untouched("Adam: the gradient", f"step {step}", {"changed": changed([g], [found["grad"]]), "out": None})
            p, m, v = found["p"], found["m"], found["v"]
            got = np.stack([p, m, v])
            variant = {name: expect("adam", p0, grads[:step], lr, b1, b2, eps, name) for name in ADAM_VARIANTS}
            judge.compare("Adam: [parameters, m, v] after each step", f"{size} parameters, lr {lr}, betas ({b1}, "
                          f"{b2}), eps {eps}, step {step}", got, variant["right"],
                          [("no bias correction", "m and v start at 0: divide them by 1 - beta1^t and 1 - beta2^t",
                            variant["no_correction"]),
                           ("eps inside the square root", "p -= lr m_hat / (sqrt(v_hat) + eps)", variant["eps_inside"]),
                           ("v from |g|", "v averages g^2, not |g|", variant["v_of_g"]),
                           ("steps counted from 0", "step is 1 at the first update: correct by 1 - beta^step",
                            variant["step_from_zero"]),
                           ("m and v not updated in place", "m = ... rebinds a local name; the optimizer keeps the "
                            "arrays it passed: update them in place (m *= beta1; m += ...)", variant["not_in_place"])]
                          + [(*ADAM_MISTAKES[name], variant[name]) for name in ADAM_MISTAKES], **tolerance(p0))
    judge_training(judge, task)
    return "two settings, four steps each: parameters and both moments, and a seeded training run"
