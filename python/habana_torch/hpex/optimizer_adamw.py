"""``torch.ops.hpu.optimizer_adamw``: Gaudi's fused AdamW step, the op
DeepSpeed's FusedAdam calls on the hpu (deepspeed/ops/op_builder/hpu/
fused_adam.py), over our fused Adam kernel (the one behind
``torch._fused_adamw_``).

The caller folds the bias corrections into the step: it passes
``neg_step = -lr * sqrt(1 - beta2**t) / (1 - beta1**t)`` as a one-element
tensor and the decoupled weight decay as ``1 - lr * weight_decay``. Each
parameter then gets::

    exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad**2
    param      = param * modified_weight_decay + neg_step * exp_avg / (sqrt(exp_avg_sq) + eps)

Two forms, as DeepSpeed calls them: in lazy mode the weight decay factor is
a float; in eager mode (overload ``wd_tensor``) it is a one-element tensor
plus a flag saying whether to apply it.

Our kernel computes the bias corrections from a step count t itself. With
t = +inf they are 1 - beta**inf = 1 exactly (0 <= beta < 1), so the kernel's
step size is the lr we give it: we pass lr = -neg_step and the weight decay
whose decoupled factor 1 - lr * wd is the caller's. The step size is read
to the host (one sync), as ``_fused_adamw_``'s tensor-lr form does.
"""
import math

import torch

_lib = torch.library.Library("hpu", "FRAGMENT")
_ARGS = ("Tensor[] gradient_vec, Tensor(a!)[] weight_vec, Tensor(b!)[] exp_avg_vec, "
         "Tensor(c!)[] exp_avg_sq_vec, Tensor neg_step_t, float beta1, float beta2, float epsilon, ")
_lib.define("optimizer_adamw(" + _ARGS + "float modified_weight_decay) -> ()")
_lib.define("optimizer_adamw.wd_tensor(" + _ARGS + "Tensor modified_weight_decay, bool do_weight_decay) -> ()")


def _one_value(name, t):
    if not isinstance(t, torch.Tensor) or t.numel() != 1:
        raise ValueError(f"optimizer_adamw: {name} must be a one-element tensor, got "
                         f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    return float(t.item())


def _step(grads, params, exp_avgs, exp_avg_sqs, neg_step_t, beta1, beta2, eps, modified_wd):
    n = len(params)
    for what, lst in (("gradient_vec", grads), ("exp_avg_vec", exp_avgs), ("exp_avg_sq_vec", exp_avg_sqs)):
        if len(lst) != n:
            raise ValueError(f"optimizer_adamw: {what} has {len(lst)} tensors, weight_vec has {n}")
    for i, b in enumerate((beta1, beta2)):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"optimizer_adamw: beta{i + 1} must be in [0, 1), got {b}")
    if n == 0:
        return
    lr = -_one_value("neg_step_t", neg_step_t)
    if not math.isfinite(lr) or not math.isfinite(modified_wd):
        raise ValueError(f"optimizer_adamw: the step ({-lr}) and the weight decay factor ({modified_wd}) "
                         "must be finite")
    if lr == 0.0:
        # No update; the kernel's decay factor 1 - lr * wd cannot express a
        # decay without a step, so it is applied on its own.
        if modified_wd != 1.0:
            torch._foreach_mul_(list(params), modified_wd)
        return
    wd = (1.0 - modified_wd) / lr
    # _fused_adamw_ takes a step count per parameter (read, not written):
    # +inf turns the kernel's bias corrections into 1 (module docstring).
    inf = {}
    steps = [inf.setdefault(p.device, torch.full((), math.inf, dtype=torch.float32, device=p.device))
             for p in params]
    torch._fused_adamw_(list(params), list(grads), list(exp_avgs), list(exp_avg_sqs), [], steps, lr=lr,
                        beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False, maximize=False)


def _optimizer_adamw(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2, epsilon,
                     modified_weight_decay):
    _step(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2, epsilon,
          modified_weight_decay)


def _optimizer_adamw_wd_tensor(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2,
                               epsilon, modified_weight_decay, do_weight_decay):
    wd = _one_value("modified_weight_decay", modified_weight_decay) if do_weight_decay else 1.0
    _step(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2, epsilon, wd)


_lib.impl("optimizer_adamw", _optimizer_adamw, "HPU")
_lib.impl("optimizer_adamw.wd_tensor", _optimizer_adamw_wd_tensor, "HPU")
