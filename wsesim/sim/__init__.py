"""The simulation, in three rooms: what a workload is (``programs``: ops as data and the builders that write
them), what it costs (``cost``: the cost pass, run once before execution) and how it runs (``executors``: the
engines and serving's scheduler).

No I/O, no printing, no files: an executor returns a ``Trace`` that ``wsesim.analysis`` measures.
"""
