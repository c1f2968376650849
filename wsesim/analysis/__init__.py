"""Pure functions over a finished trace: the run's result, the Chrome/Perfetto trace, wafer maps."""
