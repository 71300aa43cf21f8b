"""Optimizers with PyTorch's update formulas.  They work on the numpy arrays `p.data` and
`p.grad` directly, so a step never builds a graph.  Adam's update is one fused kernel
(autograd.kernels.adam_step, with a numpy twin), applied to p.data in place."""

import numpy as np

from autograd import kernels


class Optimizer:
    """Holds parameter groups (`param_groups`, each a dict with 'params' and hyper-parameters)
    and per-parameter state; subclasses define `_update(p, grad, group, state)`."""

    defaults = {}

    def __init__(self, params, **hyper):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for group in groups:
            unknown = set(group) - {"params"} - set(self.defaults)
            if unknown:
                raise TypeError(f"{type(self).__name__}: unknown hyper-parameters {sorted(unknown)}")
            self.param_groups.append({**self.defaults, **hyper, **group, "params": list(group["params"])})
        for group in self.param_groups:
            if group["lr"] < 0:
                raise ValueError(f"{type(self).__name__}: learning rate must be >= 0, got {group['lr']}")
        self.state = {}   # id(param) -> dict of arrays

    def _params(self):
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self):
        for p in self._params():
            p.grad = None

    def step(self):
        """Update every parameter that has a gradient.  All gradients are checked first, so a
        bad one leaves every parameter as it was."""
        for p in self._params():
            if p.grad is not None and np.shape(p.grad) != p.data.shape:
                raise ValueError(f"{type(self).__name__}.step: a gradient of shape {np.shape(p.grad)} "
                                 f"does not match its parameter of shape {p.data.shape}; nothing was updated")
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, p.grad, group, self.state.setdefault(id(p), {}))

    def _update(self, p, grad, group, state):
        raise NotImplementedError

    def state_dict(self):
        """{'state': {index: {name: array}}, 'param_groups': [hyper-parameters, 'params': indices]}."""
        index = {id(p): i for i, p in enumerate(self._params())}
        state = {index[k]: {name: np.array(v) for name, v in s.items()} for k, s in self.state.items()}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore state and hyper-parameters saved by state_dict() (possibly through nn.save/load,
        which turns numbers into arrays and keys into strings).  Checked before anything changes."""
        params = self._params()
        groups = state_dict["param_groups"]
        groups = [groups[k] for k in sorted(groups, key=int)] if isinstance(groups, dict) else list(groups)
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: {len(groups)} parameter groups in the "
                             f"state dict, the optimizer has {len(self.param_groups)}")
        for saved, own in zip(groups, self.param_groups):
            if len(np.atleast_1d(saved["params"])) != len(own["params"]):
                raise ValueError(f"{type(self).__name__}.load_state_dict: a group holds "
                                 f"{len(np.atleast_1d(saved['params']))} parameters, expected {len(own['params'])}")
        new_state = {}
        for key, s in state_dict["state"].items():
            i = int(key)
            if not 0 <= i < len(params):
                raise ValueError(f"{type(self).__name__}.load_state_dict: state for parameter {i}, "
                                 f"but there are only {len(params)}")
            for name, value in s.items():
                if np.ndim(value) > 0 and np.shape(value) != params[i].data.shape:
                    raise ValueError(f"{type(self).__name__}.load_state_dict: state '{name}' of parameter {i} "
                                     f"has shape {np.shape(value)}, the parameter has {params[i].data.shape}")
            new_state[id(params[i])] = {name: np.array(v) for name, v in s.items()}
        for saved, own in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    own[k] = _as_python(v)
        self.state = new_state


def _as_python(value):
    array = np.asarray(value)
    if array.ndim == 0:
        return array.item()
    return tuple(array.tolist())


class SGD(Optimizer):
    """p -= lr * d, where d = g + weight_decay * p, and with momentum m:
    buf = m * buf + (1 - dampening) * d (buf = d on the first step), d = buf
    (or d + m * buf with nesterov)."""

    defaults = {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False}

    def _update(self, p, grad, group, state):
        d = grad + group["weight_decay"] * p.data if group["weight_decay"] else grad
        if group["momentum"]:
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = np.array(d)
            else:
                state["momentum_buffer"] = group["momentum"] * state["momentum_buffer"] + (1 - group["dampening"]) * d
            buf = state["momentum_buffer"]
            d = d + group["momentum"] * buf if group["nesterov"] else buf
        p.data = (p.data - group["lr"] * d).astype(p.data.dtype, copy=False)


class Adam(Optimizer):
    """Adam (Kingma & Ba), with g = grad + weight_decay * p (L2, coupled):
        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
        p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)"""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0}
    decoupled = False

    def _update(self, p, grad, group, state):
        b1, b2 = group["betas"]
        if "step" not in state:
            state["step"] = np.array(0)
            state["exp_avg"] = np.zeros_like(p.data)
            state["exp_avg_sq"] = np.zeros_like(p.data)
        state["step"] = state["step"] + 1
        if not p.data.flags.c_contiguous or not p.data.flags.writeable:
            p.data = np.array(p.data)                 # updated in place below
        kernels.adam_step(p.data, grad, state["exp_avg"], state["exp_avg_sq"], group["lr"], b1, b2,
                          group["eps"], group["weight_decay"], self.decoupled, int(state["step"]))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr * weight_decay
    before the Adam step, and the decay never enters m or v."""

    defaults = {**Adam.defaults, "weight_decay": 1e-2}
    decoupled = True


def clip_grad_norm_(parameters, max_norm):
    """Scale all gradients together, in place, so their global L2 norm is at most max_norm;
    returns the norm before clipping (PyTorch's torch.nn.utils.clip_grad_norm_)."""
    grads = [p.grad for p in parameters if p.grad is not None]      # (parameters may be a generator)
    total = float(np.sqrt(sum(kernels.sum_of_squares(g) for g in grads)))   # accumulated in float64
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            g *= g.dtype.type(scale)
    return total
