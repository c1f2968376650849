"""Files and pictures: atomic writes and plotting (the only importer of matplotlib)."""
