"""Bradley–Terry strengths from pairwise wins and ties, fitted for many data sets at once.

Two tie models (the caller says which one it reports):

* ``"half"`` — a tie counts as half a win each way, then the Bradley–Terry model
  P(i beats j) = π_i / (π_i + π_j) (Bradley & Terry 1952; the tie rule as in `choix`'s notes);
* ``"davidson"`` — Davidson's model with a tie parameter ν (Davidson, JASA 1970):
  P(i beats j) = π_i / D, P(tie) = ν √(π_i π_j) / D, D = π_i + π_j + ν √(π_i π_j).

Strengths are log-strengths θ = ln π, identified up to a shift: every fit returns them centred
(mean 0). Data come as count matrices over policies: ``wins[..., i, j]`` = times i beat j and
``ties[..., i, j]`` = ``ties[..., j, i]`` = ties between i and j; leading axes are independent data
sets (the bootstrap fits 1 000 resampled data sets in one call).

The fitter is Newton's method on the log-likelihood, which is concave in (θ, ln ν) for both models
(a log-sum-exp of affine terms), with step halving; the gauge is fixed by the centring. The MLE
exists when the comparison digraph (i → j when i beat or tied j) is strongly connected
(`strongly_connected`; Zermelo 1929, Ford 1957), and for Davidson's ν when there is at least one tie
and one win. Where it does not exist (a policy that never lost, two pieces never compared, no ties)
the maximum is at infinity: those data sets are fitted with a Gaussian prior on θ (and on ln ν)
of precision `RIDGE` (a maximum a posteriori fit, as `choix`'s ``alpha``), and flagged.

`choix` (0.4.1) is not used: it has no tie model and no batched fitter, and on disconnected or
one-sided graphs its fitters raise, fail to converge or diverge silently; the checks here name
those cases instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.errors import EvalError

TIE_MODELS = ("davidson", "half")
#: Precision of the Gaussian prior used where the MLE does not exist (prior sd = 1/√0.1 ≈ 3.2 on
#: the log-strength scale: a policy that never lost gets a large but finite strength).
RIDGE = 0.1
MAX_ITERATIONS = 200
TOLERANCE = 1e-10


@dataclass(frozen=True)
class StrengthFit:
    """Fitted centred log-strengths of one or many data sets.

    Attributes:
        theta: centred log-strengths, shape [..., K].
        tie_parameter: Davidson's ν, shape [...] (None for the half-win model).
        regularized: True where the MLE does not exist and the prior was used, shape [...].
        iterations: Newton iterations used.
    """

    theta: NDArray[np.float64]
    tie_parameter: NDArray[np.float64] | None
    regularized: NDArray[np.bool_]
    iterations: int


def strongly_connected(wins: ArrayLike, ties: ArrayLike) -> NDArray[np.bool_]:
    """True where the comparison digraph (i → j when i beat or tied j) is strongly connected.

    Batched transitive closure by repeated boolean squaring of (A + I); shape [...] for inputs
    [..., K, K].
    """
    w, t = np.asarray(wins, dtype=float), np.asarray(ties, dtype=float)
    k = w.shape[-1]
    reach = ((w + t) > 0) | np.eye(k, dtype=bool)
    steps = max(1, int(np.ceil(np.log2(max(k, 2)))))
    for _ in range(steps):
        f = reach.astype(np.float32)
        reach = (f @ f) > 0
    return np.asarray(reach.all(axis=(-2, -1)))


def bradley_terry_loglik(theta: NDArray, wins: NDArray, ties: NDArray) -> NDArray:
    """Ties-as-half-wins Bradley–Terry log-likelihood (Bradley & Terry 1952):
    ℓ(θ) = Σ_{i≠j} a_ij ln σ(θ_i − θ_j), a_ij = w_ij + t_ij / 2, σ the logistic function."""
    a = wins + ties / 2.0
    d = theta[..., :, None] - theta[..., None, :]
    return np.asarray(-(a * np.logaddexp(0.0, -d)).sum(axis=(-2, -1)))


def davidson_probabilities(theta: NDArray, log_nu: NDArray) -> tuple[NDArray, NDArray]:
    """Davidson (1970): P(i beats j) = π_i / D and P(tie) = ν √(π_i π_j) / D with
    D = π_i + π_j + ν √(π_i π_j); returns (P(i beats j) [..., K, K], P(tie) [..., K, K])."""
    d = theta[..., :, None] - theta[..., None, :]
    g = np.asarray(log_nu)[..., None, None]
    lse = np.logaddexp(np.logaddexp(0.0, -d), g - d / 2.0)
    return np.exp(-lse), np.exp(g - d / 2.0 - lse)


def davidson_loglik(theta: NDArray, log_nu: NDArray, wins: NDArray, ties: NDArray) -> NDArray:
    """Davidson's log-likelihood: Σ_{i≠j} w_ij ln P(i beats j) + Σ_{i<j} t_ij ln P(tie)."""
    d = theta[..., :, None] - theta[..., None, :]
    g = np.asarray(log_nu)[..., None, None]
    lse = np.logaddexp(np.logaddexp(0.0, -d), g - d / 2.0)
    return np.asarray(
        (-(wins * lse)).sum(axis=(-2, -1)) + 0.5 * (ties * (g - d / 2.0 - lse)).sum(axis=(-2, -1))
    )


def _objective(model: str, x: NDArray, w: NDArray, t: NDArray, ridge: NDArray) -> NDArray:
    k = w.shape[-1]
    theta = x[..., :k]
    pen = 0.5 * ridge * (x * x).sum(axis=-1)
    if model == "half":
        return bradley_terry_loglik(theta, w, t) - pen
    return davidson_loglik(theta, x[..., k], w, t) - pen


def _newton_system(
    model: str, x: NDArray, w: NDArray, t: NDArray, ridge: NDArray
) -> tuple[NDArray, NDArray]:
    """(gradient [B, P], negative Hessian [B, P, P]) of the penalised log-likelihood."""
    b, k = w.shape[0], w.shape[-1]
    theta = x[:, :k]
    eye = np.eye(x.shape[-1])
    if model == "half":
        a = w + t / 2.0
        n = a + np.swapaxes(a, -1, -2)
        p = 1.0 / (1.0 + np.exp(-(theta[:, :, None] - theta[:, None, :])))
        grad = (a - n * p).sum(axis=-1)
        m = n * p * np.swapaxes(p, -1, -2)
        neg_h = -m
    else:
        pw, pt = davidson_probabilities(theta, x[:, k])
        n = w + np.swapaxes(w, -1, -2) + t
        u = pw + pt / 2.0
        grad_t = (w + t / 2.0 - n * u).sum(axis=-1)
        grad_g = 0.5 * (t - n * pt).sum(axis=(-2, -1))
        grad = np.concatenate([grad_t, grad_g[:, None]], axis=-1)
        m = n * (u * np.swapaxes(u, -1, -2) - pt / 4.0)
        neg_h = np.zeros((b, k + 1, k + 1))
        neg_h[:, :k, :k] = -m
        cross = (n * pt * (0.5 - u)).sum(axis=-1)
        neg_h[:, :k, k] = cross
        neg_h[:, k, :k] = cross
        neg_h[:, k, k] = 0.5 * (n * pt * (1.0 - pt)).sum(axis=(-2, -1))
    idx = np.arange(k)
    neg_h[:, idx, idx] = 0.0
    neg_h[:, idx, idx] = m.sum(axis=-1) - m[:, idx, idx]
    grad = grad - ridge[:, None] * x
    neg_h = neg_h + ridge[:, None, None] * eye
    # Gauge: the likelihood ignores a common shift of θ; adding 11ᵀ on the θ block fixes the step
    # to the centred subspace without changing it there (the gradient is orthogonal to 1).
    neg_h[:, :k, :k] += 1.0
    return grad, neg_h


def fit_strengths(
    wins: ArrayLike,
    ties: ArrayLike,
    model: str = "davidson",
    *,
    ridge: ArrayLike | None = None,
    start: StrengthFit | None = None,
) -> StrengthFit:
    """Maximum-likelihood centred log-strengths (and Davidson's ν) of each data set.

    Args:
        wins: [..., K, K], wins[i, j] = times policy i beat j (diagonal ignored).
        ties: [..., K, K], symmetric tie counts.
        model: "davidson" or "half" (ties as half wins).
        ridge: prior precision per data set (shape [...]); default: 0 where the MLE exists,
            `RIDGE` where it does not (see the module docstring).
        start: a fit to start Newton's method from (e.g. the point estimate, for bootstrap
            resamples near it); it changes the iterations needed, not the answer.

    Returns:
        StrengthFit with the batch shape of the inputs.
    """
    if model not in TIE_MODELS:
        raise EvalError(f"ties: {model!r} is not one of {', '.join(TIE_MODELS)}", key="ties")
    w = np.asarray(wins, dtype=float)
    t = np.asarray(ties, dtype=float)
    if w.shape != t.shape or w.ndim < 2 or w.shape[-1] != w.shape[-2]:
        raise EvalError("wins and ties must be square count matrices of one shape", key="wins")
    if np.any(w < 0) or np.any(t < 0) or not np.allclose(t, np.swapaxes(t, -1, -2)):
        raise EvalError("wins and ties must be non-negative, ties symmetric", key="ties")
    batch, k = w.shape[:-2], w.shape[-1]
    w = w.reshape((-1, k, k)).copy()
    t = t.reshape((-1, k, k)).copy()
    idx = np.arange(k)
    w[:, idx, idx] = 0.0
    t[:, idx, idx] = 0.0
    b = w.shape[0]
    if model == "davidson":
        # A tie does not bound two strengths apart in Davidson's model (ν can grow with the
        # gap), so the wins alone must connect every policy both ways, and ν needs a tie.
        n_ties, n_all = t.sum(axis=(-2, -1)) / 2.0, w.sum(axis=(-2, -1)) + t.sum(axis=(-2, -1)) / 2
        exists = strongly_connected(w, np.zeros_like(t)) & (n_ties > 0)
    else:
        exists = strongly_connected(w, t)
    lam = (
        np.where(exists, 0.0, RIDGE)
        if ridge is None
        else np.broadcast_to(np.asarray(ridge, dtype=float), batch).reshape(-1).copy()
    )
    x = np.zeros((b, k + (model == "davidson")))
    if model == "davidson":
        share = np.clip(n_ties / np.maximum(n_all, 1.0), 0.05, 0.95)
        x[:, k] = np.log(2.0 * share / (1.0 - share))
    if start is not None:
        x[:, :k] = np.asarray(start.theta, dtype=float).reshape(-1, k)
        if model == "davidson" and start.tie_parameter is not None:
            x[:, k] = np.log(np.asarray(start.tie_parameter, dtype=float).reshape(-1))
    obj = _objective(model, x, w, t, lam)
    iterations = 0
    active = np.ones(b, dtype=bool)
    for iterations in range(1, MAX_ITERATIONS + 1):  # noqa: B007
        sel = np.flatnonzero(active)
        grad, neg_h = _newton_system(model, x[sel], w[sel], t[sel], lam[sel])
        try:
            step = np.linalg.solve(neg_h, grad[..., None])[..., 0]
        except np.linalg.LinAlgError:  # only with a caller's ridge of 0 on non-existent MLEs
            jitter = 1e-9 * np.eye(neg_h.shape[-1])
            step = np.stack([np.linalg.lstsq(h + jitter, g, rcond=None)[0]
                             for h, g in zip(neg_h, grad, strict=True)])  # fmt: skip
        base = obj[sel]
        scale = np.ones(sel.size)
        todo = np.ones(sel.size, dtype=bool)
        for _ in range(40):  # step halving keeps every step an ascent step
            trial = x[sel] + scale[:, None] * step
            new = _objective(model, trial, w[sel], t[sel], lam[sel])
            ok = todo & (new >= base - 1e-12 * (1.0 + np.abs(base)))
            x[sel[ok]] = trial[ok]
            obj[sel[ok]] = new[ok]
            todo &= ~ok
            if not todo.any():
                break
            scale[todo] /= 2.0
        done = np.abs(scale[:, None] * step).max(axis=-1) < TOLERANCE
        active[sel[done | todo]] = False
        if not active.any():
            break
    theta = x[:, :k] - x[:, :k].mean(axis=-1, keepdims=True)
    nu = np.exp(x[:, k]).reshape(batch) if model == "davidson" else None
    return StrengthFit(theta.reshape((*batch, k)), nu, (lam > 0).reshape(batch), iterations)
