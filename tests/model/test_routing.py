"""Zipf routing at the steepest alpha a spec admits (100): the weights of all but the first ranks
underflow a double, and the top-k cap must still spread the excess (it divided 0 by 0, and numpy's
multinomial refused the NaN shares: an internal error for a valid configuration)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from wsesim.config.loader import load_model
from wsesim.config.specs import TrainingSpec
from wsesim.model.routing import route_tokens


@pytest.mark.parametrize(("experts", "top_k"), [(4, 2), (4096, 2048), (65_536, 8)])
def test_the_steepest_zipf_routes_every_slot(experts: int, top_k: int) -> None:
    model = load_model("tiny-moe", {"model.experts": experts, "model.top_k": top_k})
    training = TrainingSpec.model_validate({"routing": "zipf:100"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or divide warnings on stderr either
        counts = route_tokens(model, training, 64, np.random.default_rng(0))
    assert counts.shape == (model.layers, experts)
    assert (counts.sum(axis=1) == 64 * top_k).all()
    assert counts.min() >= 0 and counts.max() <= 64  # top-k picks distinct experts: at most every token
