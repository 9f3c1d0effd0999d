"""fusion-fetch-data: fetch the data the demo and the tests read (make data), checksums checked, into the cache.

  fusion-fetch-data                  # the data folder on stdout; fetched into the cache only where none exists
  fusion-fetch-data --dest DIR       # fetch into DIR (the layout of ../shared/data)
Reads FUSION_DATA (DATA=) and ../shared/data, read-only, before the cache (FUSION_DATA_CACHE, default
~/.cache/fairseq-fusion/data); FUSION_DATA_URL=URL fetches URL/<path in the layout> instead of the origins (a mirror).
A cut download resumes; a file with other bytes than the table's is refused. Origins, checksums and licences:
README.md (Where the data comes from).
"""
import argparse

from ..shared_data import fetch
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-fetch-data", description=description_of(__doc__))
    p.add_argument("--dest", default=None, metavar="DIR",
                   help="Fetch into DIR, added to (default: the data folder FUSION_DATA, ../shared/data or the cache "
                        "resolve to; the first two are only checked, never written).")
    p.add_argument("--quiet", action="store_true", help="No progress bar and no summary line on stderr.")
    return p


def cli_main():
    fetch.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
