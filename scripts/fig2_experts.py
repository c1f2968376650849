#!/usr/bin/env python3
"""BTA paper, Fig. 2: throughput vs number of experts at top_k 8, G=1 and tuned G.

    python scripts/fig2_experts.py [--out out/fig2] [--workers 2]
"""

from __future__ import annotations

from _paper import main

if __name__ == "__main__":
    main(__doc__, "fig2-experts", lambda point: point["model.top_k"] == 8, "out/fig2")
