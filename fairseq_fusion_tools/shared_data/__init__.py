"""The shared data a fresh machine lacks: the table of its files (``files.py``) and fusion-fetch-data (``fetch.py``)."""
