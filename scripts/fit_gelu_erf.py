"""Fits the rational erf used by gelu (csrc/kernels/pw_math.h, pw_erf_gelu):
erf(z) ~= z * P(z^2) / Q(z^2) on [0, C], Q(0) = 1, by linearised least squares
(z P - erf Q, divided by the previous Q) with Lawson weights pushing towards
the minimax error. Prints the coefficients rounded to float and the error of
the float evaluation (Horner with fused multiply-adds, emulated in double).

    python3 scripts/fit_gelu_erf.py [deg_p=6] [deg_q=4] [C=3.925]
"""
import sys

import numpy as np
from scipy.special import erf

dp = int(sys.argv[1]) if len(sys.argv) > 1 else 6
dq = int(sys.argv[2]) if len(sys.argv) > 2 else 4
C = float(sys.argv[3]) if len(sys.argv) > 3 else 3.925  # erf(C) rounds to 1.0f

z = np.unique(np.concatenate([np.linspace(0, C, 20000),
                              C * (1 - np.cos(np.linspace(0, np.pi / 2, 5000)))]))
s, f = z * z, erf(z)
w, qprev = np.ones_like(z), np.ones_like(z)
for _ in range(60):
    A = np.hstack([z[:, None] * s[:, None] ** np.arange(dp + 1),
                   -f[:, None] * s[:, None] ** np.arange(1, dq + 1)])
    W = w / qprev
    sol = np.linalg.lstsq(A * W[:, None], f * W, rcond=None)[0]
    p, q = sol[:dp + 1], np.concatenate([[1.0], sol[dp + 1:]])
    qprev = np.polyval(q[::-1], s)
    err = z * np.polyval(p[::-1], s) / qprev - f
    w = w * np.sqrt(np.abs(err) / np.abs(err).max()) + 1e-12
    w /= w.max()
print(f"max error in double: {np.abs(err).max():.3e}")

f32 = np.float32


def fma(a, b, c):
    return f32(np.float64(a) * np.float64(b) + np.float64(c))


def erf_f32(zz, pf, qf):
    az = np.minimum(np.abs(zz), f32(C)).astype(f32)
    ss = (az * az).astype(f32)
    P = np.full_like(ss, pf[-1])
    for c in pf[-2::-1]:
        P = fma(P, ss, c)
    Q = np.full_like(ss, qf[-1])
    for c in qf[-2::-1]:
        Q = fma(Q, ss, c)
    r = np.minimum(((az * P).astype(f32) / Q).astype(f32), f32(1))
    return np.copysign(r, zz)


pf, qf = p.astype(f32), q.astype(f32)
zz = np.linspace(0, 6, 2000001).astype(f32)
e = erf_f32(zz, pf, qf).astype(np.float64) - erf(zz.astype(np.float64))
small = (zz > 0) & (zz < 0.5)
print(f"max error in float: {np.abs(e).max():.3e} at z={zz[np.abs(e).argmax()]:.4f}; "
      f"relative below 0.5: {np.abs(e[small] / erf(zz[small].astype(np.float64))).max():.3e}")
print("P (z^0 first):", ", ".join(f"{v:.9e}f" for v in pf))
print("Q (z^0 first):", ", ".join(f"{v:.9e}f" for v in qf))
# pw_gelu_erf evaluates the polynomials at s = h^2, h = x / 2 = z / sqrt(2):
# P(z^2) = P(2 s), and the numerator also takes the sqrt(2) of z = sqrt(2) h.
print("as used (h = x/2): clamp |h| at", repr(f32(C / np.sqrt(2))))
print("P':", ", ".join(f"{v:.9e}f" for v in (pf.astype(np.float64) * np.sqrt(2) * 2.0 ** np.arange(dp + 1)).astype(f32)))
print("Q':", ", ".join(f"{v:.9e}f" for v in (qf.astype(np.float64) * 2.0 ** np.arange(dq + 1)).astype(f32)))
