#!/usr/bin/env python3
"""BTA paper, Fig. 3: throughput vs top_k at 128 experts, G=1 and tuned G.

    python scripts/fig3_topk.py [--out out/fig3] [--workers 2]
"""

from __future__ import annotations

from _paper import main

if __name__ == "__main__":
    main(__doc__, "fig3-top-k", lambda point: point["model.experts"] == 128, "out/fig3")
