"""The ConvMlp's BatchNorm folded into its conv: the folded conv gives what conv then BatchNorm gives, with
running variances small enough that the epsilon decides the scale (trained BN layers have such channels; the
random test models' variances near 1 hide a wrong epsilon below the parity gate)."""

from __future__ import annotations

import numpy as np

from fastvlm.convert.arch import BATCH_NORM_EPS
from fastvlm.convert.vision_graph import fold_batch_norm


def test_the_folded_conv_is_conv_then_batch_norm():
    rng = np.random.default_rng(0)
    c = 4
    w = rng.normal(size=(c, 1, 3, 3))  # depthwise, no bias
    bn_w, bn_b, mean = rng.normal(size=c), rng.normal(size=c), rng.normal(size=c)
    var = np.array([1e-6, 1e-5, 0.5, 2.0])
    patch = rng.normal(size=(c, 1, 3, 3))  # one output position: conv is sum(w * patch) per channel
    conv = (w * patch).sum(axis=(1, 2, 3))
    batch_norm = bn_w * (conv - mean) / np.sqrt(var + BATCH_NORM_EPS) + bn_b  # torch's eval-mode formula
    fw, fb = fold_batch_norm(w, bn_w, bn_b, mean, var)
    assert fw.shape == w.shape
    np.testing.assert_allclose((fw * patch).sum(axis=(1, 2, 3)) + fb, batch_norm, rtol=1e-12)
