"""The cross-field rules of a model's layer kinds (docs/model.md §3.6): an MoE model has experts, top_k
and their width; a dense model (``experts: 0``) has none of them and a dense FFN in every layer; an MoE
model may have dense layers first. ``problem(field, value, fields)`` says what is wrong with ``field``
given the fields validated before it, or ''."""

from __future__ import annotations

from typing import Any


def problem(field: str, value: int, fields: dict[str, Any]) -> str:
    experts, layers, dense = fields.get("experts"), fields.get("layers"), fields.get("dense_layers")
    if experts is None:
        return ""
    if field == "top_k":
        if value > experts:
            return f"expected at most experts ({experts}), got {value}"
        return (f"expected 1 to experts ({experts}) in a model with experts, got {value}"
                if experts and not value else "")
    if field == "expert_intermediate":
        if experts and not value:
            return f"expected a positive width in a model with experts ({experts}), got {value}"
        return (f"expected 0 without experts (experts 0: a dense model), got {value}"
                if not experts and value else "")
    if field == "shared_expert_intermediate" and not experts and value:  # it would be ignored
        return f"expected 0 without experts (experts 0: a dense model has no shared expert), got {value}"
    if field == "dense_layers" and layers is not None:
        if not experts and value not in (0, layers):
            return (f"expected 0 or layers ({layers}) in a dense model (experts 0: every layer is dense), "
                    f"got {value}")
        if experts and value >= layers:
            return (f"expected fewer than layers ({layers}) in a model with experts (all dense: set experts "
                    f"to 0), got {value}")
    if field == "ffn_intermediate" and dense is not None:
        has_dense = not experts or dense > 0
        if has_dense and not value:
            kind = "experts 0" if not experts else f"dense_layers {dense}"
            return f"expected a positive width: the model has dense layers ({kind}), got {value}"
        if not has_dense and value:
            return f"expected 0 in a model without dense layers (dense_layers 0), got {value}"
    return ""
