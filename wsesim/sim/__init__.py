"""The simulation: the step plan, plain trace records, the off-wafer links and the event engine.

No I/O, no printing, no files: the engine returns a ``Trace`` that ``wsesim.analysis`` measures.
"""
