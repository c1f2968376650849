"""Files and pictures: atomic writes and pictures (``mpl.py`` is the only importer of matplotlib)."""
