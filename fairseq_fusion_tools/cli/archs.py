"""fusion-archs: the named architectures, the technique flags of each, and which techniques combine.

  fusion-archs                      every fusion_transformer arch: paper, equations, the flags it sets
  fusion-archs ARCH                 every technique flag a user can add to ARCH, grouped by technique
  fusion-archs --conflicts          which techniques combine and which refuse each other, with the reason
  fusion-archs --readme README.md   rewrite the README's architecture table (what --format markdown prints)

The flags an arch sets are computed (its preset against fusion_transformer's); paper, equations and notes are
declared with @describe next to each preset (fairseq_fusion/models/archs_*.py). fairseq-train shows the technique
flags under their technique titles only when it knows the model: fairseq-train --user-dir $(fusion-user-dir) --arch
ARCH --help. The commands it prints name the plugin by its absolute folder, which works from any directory.
"""
import argparse

from ..archs import command


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-archs", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2])
    p.add_argument("arch", nargs="?", help="A fusion_transformer arch: list every technique flag a user can add "
                                           "to it, with the value the arch sets.")
    p.add_argument("--conflicts", action="store_true",
                   help="Show which pairs of techniques combine and which refuse each other, with the reason "
                        "(the seams they claim; the tests build every pair as a tiny model and find the same).")
    p.add_argument("--format", choices=["text", "markdown", "json"], default="text",
                   help="Output format (default: text). The markdown of the arch list is the README's table.")
    p.add_argument("--readme", metavar="FILE",
                   help="Rewrite the architecture table between the ARCH TABLE markers of FILE (e.g. README.md).")
    return p


def cli_main():
    command.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
