"""wsesim's version, in the lowest layer so that anything may read it (``wsesim.__version__`` re-exports it;
``output.manifest`` records it) without importing the package's lazy API."""

__version__ = "0.1.0"
