"""How a costed program runs: the executor base (``executor``), the fast engine (``engine``) and the
plain-SimPy reference that vouches for it (``reference``), both named in one table (``engines``); the
off-wafer links and a cluster's trees as SimPy resources (``links``, ``cluster``), the experts phase
(``experts``), and serving's iteration-level scheduler with its admission, KV pool and shortcut
(``scheduler``, ``admission``, ``kv_pool``, ``run_ahead``) that both engines' batching loops drive
(``batching``, ``reference_batching``)."""
