"""The rule that splits a global batch over micro-batches and tiles (docs/model.md §2.4)."""

from __future__ import annotations


def split_problem(global_batch: int, G: int, B: int | str, N: int | str, systems: int = 1) -> str:
    """Why ``global_batch`` does not split into ``systems`` × ``N`` micro-batches of ``G`` tiles of ``B``
    ("auto": any), or ''."""
    split = systems * G * (1 if N == "auto" else int(N)) * (1 if B == "auto" else int(B))
    what = " × ".join([*([f"systems ({systems})"] if systems > 1 else []), f"tiles ({G})",
                       *([] if N == "auto" else [f"micro_batches ({N})"]),
                       *([] if B == "auto" else [f"batch_per_tile ({B})"])])
    exact = B != "auto" and N != "auto"
    if global_batch % split == 0 and (not exact or global_batch == split):
        return ""
    return (f"expected {'exactly' if exact else 'a multiple of'} {what} = {split}, got {global_batch}: "
            "the global batch must split into whole micro-batches of whole tiles on every system")
