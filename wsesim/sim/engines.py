"""The executors of a program by name: the ``simulation.engine`` key of a training run and of a serving
run alike (``wsesim infer --engine`` sets it) reads this one table. Each entry is ``"module:function"``, a
function ``(plan, program, costs) -> Trace`` imported when a run first uses it (so the CLI can list the names
without importing an engine)."""

ENGINES: dict[str, str] = {
    "fast": "wsesim.sim.engine:simulate",  # the default
    # plain SimPy, to vouch for the fast one: same program and costs
    "reference": "wsesim.sim.reference:simulate",
}

__all__ = ["ENGINES"]
