"""The kernels' vocabulary (wsesim.kernels.kinds): every kind has a default among its algorithms, the
tables that run the algorithms are keyed by exactly these members, the names are their own strings, an
unknown kind or algorithm is one ``ConfigError`` listing the valid names, and the serving spec's
``Literal`` fields (the config layer may not import kernels) offer the same names."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.inference import InferenceSpec
from wsesim.config.loader import load_hardware
from wsesim.kernels import DEFAULT_ALGORITHM, run_kernel
from wsesim.kernels.gemm import GEMM_ALGORITHMS
from wsesim.kernels.gemv import GEMV_ALGORITHMS, ROW_TREES
from wsesim.kernels.kinds import (
    MATMULS,
    GemmAlgorithm,
    GemvAlgorithm,
    KernelKind,
    ReduceAlgorithm,
    algorithms,
    choice,
)
from wsesim.kernels.lines import TOPOLOGIES
from wsesim.kernels.stream import STREAM_ALGORITHMS

HW = load_hardware("tiny8")
KINDS = "expected one of gemm, gemv, reduce, allreduce, broadcast, alltoall"


def test_the_default_table_covers_every_kind_and_each_default_is_one_of_its_algorithms() -> None:
    assert set(DEFAULT_ALGORITHM) == set(KernelKind)
    for kind in KernelKind:
        assert DEFAULT_ALGORITHM[kind] in algorithms(kind)
        assert choice(kind) == (kind, DEFAULT_ALGORITHM[kind]) == choice(kind.value, "")


def test_the_defaults_are_the_ones_the_docs_give() -> None:
    """Not the first of each list: GEMV's default is WaferLLM's MeshGEMV, listed after the vendor's."""
    assert {str(k): str(a) for k, a in DEFAULT_ALGORITHM.items()} == {
        "gemm": "summa", "gemv": "meshgemv", "reduce": "chain", "allreduce": "chain",
        "broadcast": "multicast", "alltoall": "transpose"}
    assert algorithms("gemv")[0] != DEFAULT_ALGORITHM[KernelKind.GEMV]


def test_each_kind_lists_its_algorithms_in_the_stated_order() -> None:
    assert [[str(a) for a in algorithms(k)] for k in KernelKind] == [
        ["summa", "cannon", "meshgemm", "stream", "stream-dw"], ["pipeline", "meshgemv"], ["chain", "star", "tree", "two-phase"],
        ["chain", "star", "tree", "two-phase", "ring", "ktree"], ["multicast"], ["transpose"]]
    assert [str(a) for a in ReduceAlgorithm] == ["chain", "star", "tree", "two-phase", "ring", "ktree"]
    assert [str(k) for k in KernelKind] == ["gemm", "gemv", "reduce", "allreduce", "broadcast", "alltoall"]


def test_the_tables_that_run_them_are_keyed_by_exactly_these_members() -> None:
    assert [*GEMM_ALGORITHMS, *STREAM_ALGORITHMS] == list(algorithms(KernelKind.GEMM))
    assert list(GEMV_ALGORITHMS) == list(algorithms(KernelKind.GEMV)) == list(ROW_TREES)
    # every tree an allreduce runs (the reduce's, then the K-tree, whose entry gives its links and routes);
    # the ring is not a tree, and the K-tree is not a reduce
    assert list(TOPOLOGIES) == [*algorithms(KernelKind.REDUCE), ReduceAlgorithm.KTREE]
    assert [a for a in algorithms(KernelKind.ALLREDUCE) if a != ReduceAlgorithm.RING] == list(TOPOLOGIES)
    assert ReduceAlgorithm.KTREE not in algorithms(KernelKind.REDUCE)
    assert set(ROW_TREES.values()) <= set(TOPOLOGIES) & set(algorithms(KernelKind.ALLREDUCE))
    assert ROW_TREES == {GemvAlgorithm.PIPELINE: ReduceAlgorithm.CHAIN,
                         GemvAlgorithm.MESHGEMV: ReduceAlgorithm.KTREE}
    assert sorted(MATMULS) == [KernelKind.GEMM, KernelKind.GEMV]


def test_members_are_their_own_strings() -> None:
    """Equal, hashing alike, printing and serialising as the plain name: a plain string finds a member's
    table entry, and JSON, CSV and f-strings read as before the enums."""
    for member in [*KernelKind, *GemmAlgorithm, *GemvAlgorithm, *ReduceAlgorithm]:
        plain = member.value
        assert member == plain and hash(member) == hash(plain) and {plain: 1}[member] == 1
        assert str(member) == f"{member}" == plain and json.dumps(member) == json.dumps(plain)
    assert GEMM_ALGORITHMS["summa"] is GEMM_ALGORITHMS[GemmAlgorithm.SUMMA]
    assert ", ".join(algorithms("reduce")) == "chain, star, tree, two-phase"


def test_run_kernel_takes_plain_names_and_members_alike() -> None:
    plain = run_kernel(HW, "allreduce", 4, 4, algorithm="two-phase", wavelets=3).to_dict()
    member = run_kernel(HW, KernelKind.ALLREDUCE, 4, 4, algorithm=ReduceAlgorithm.TWO_PHASE,
                        wavelets=3).to_dict()
    assert json.dumps(plain) == json.dumps(member)
    assert (plain["kind"], plain["algorithm"]) == ("allreduce", "two-phase")
    assert run_kernel(HW, "gemv", 4, 4, shape=(1, 16, 16)).algorithm == "meshgemv"


@pytest.mark.parametrize(("kind", "algorithm", "path", "message"), [
    ("gemx", None, "kind", f'{KINDS}, got "gemx"'),
    ("GEMM", "summa", "kind", f'{KINDS}, got "GEMM"'),
    ("reduce", "ring", "algorithm", 'expected one of chain, star, tree, two-phase for reduce, got "ring"'),
    ("reduce", "ktree", "algorithm", 'expected one of chain, star, tree, two-phase for reduce, got "ktree"'),
    ("allreduce", "multicast", "algorithm",
     'expected one of chain, star, tree, two-phase, ring, ktree for allreduce, got "multicast"'),
    ("gemv", "summa", "algorithm", 'expected one of pipeline, meshgemv for gemv, got "summa"'),
    ("gemm", "strassen", "algorithm", 'expected one of summa, cannon, meshgemm, stream, stream-dw for gemm, got "strassen"'),
    ("broadcast", "chain", "algorithm", 'expected one of multicast for broadcast, got "chain"'),
    ("alltoall", "chain", "algorithm", 'expected one of transpose for alltoall, got "chain"')])
def test_an_unknown_kind_or_algorithm_lists_the_valid_names(kind: str, algorithm: str | None, path: str,
                                                            message: str) -> None:
    with pytest.raises(ConfigError) as e:
        run_kernel(HW, kind, 1, 8, algorithm=algorithm, shape=(1, 8, 8))
    assert (e.value.path, e.value.message) == (path, message)


@pytest.mark.parametrize(("field", "kind"), [("gemm", KernelKind.GEMM), ("gemv", KernelKind.GEMV),
                                             ("allreduce", KernelKind.ALLREDUCE)])
def test_the_serving_specs_choices_are_the_kernels_algorithms(field: str, kind: KernelKind) -> None:
    """``inference.gemm``, ``.gemv`` and ``.allreduce`` are ``Literal``s (config is the lowest layer and
    may not import kernels): they offer exactly the kernel layer's names, and default to one of them —
    but the streamed GEMMs, whose weights come from off the wafer (a served model's are resident)."""
    annotation = InferenceSpec.model_fields[field].annotation
    assert set(get_args(annotation)) == set(algorithms(kind)) - set(STREAM_ALGORITHMS)
    assert InferenceSpec.model_fields[field].default in algorithms(kind)
