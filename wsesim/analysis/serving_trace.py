"""A serving run as a Chrome/Perfetto trace: one thread per pipeline stage, one span per request's
token (prefill or decode) that the stage served, in microseconds."""

from __future__ import annotations

from typing import Any

from ..sim.serving import ServeTrace

__all__ = ["serving_chrome_trace"]


def serving_chrome_trace(trace: ServeTrace, clock_hz: float, stages: int) -> dict[str, Any]:
    """The trace-event JSON object of a finished serving run."""
    us = 1e6 / clock_hz
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "pipeline stages"}},
        *({"name": "thread_name", "ph": "M", "pid": 1, "tid": s + 1, "args": {"name": f"stage {s}"}}
          for s in range(stages))]
    for _track, name, start, end, args in trace.spans:
        events.append({"name": f"{name} r{args['request']} t{args['token']}", "cat": str(name), "ph": "X", "pid": 1,
                       "tid": args["stage"] + 1, "ts": start * us, "dur": (end - start) * us, "args": dict(args)})
    return {"traceEvents": events, "displayTimeUnit": "ns"}
