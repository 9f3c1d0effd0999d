"""Console scripts of fairseq-fusion (see setup.py)."""
