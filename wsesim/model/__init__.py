"""Pure models, without SimPy: parameter, FLOP and byte counts per layer, op costs, the SRAM model,
routing and expert load."""
