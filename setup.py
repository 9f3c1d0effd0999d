# The metadata is pyproject.toml's; this file keeps fairseq users' habits working (`python setup.py develop`, pips
# older than PEP 660's editable installs). `make install` (pip install -e .) does not need it.
from setuptools import setup

setup()
