"""fusion-archs's run: the command line checked, then the arch list, one arch's flags, the conflicts or the README.
"""
import difflib

from .arch_flags import show_arch
from .arch_list import list_archs
from .conflicts import show_conflicts
from .readme import update_readme
from fairseq_fusion_tools.user_files import fail
from fairseq_fusion.models import catalog

def unknown_arch(arch):
    archs = catalog.fusion_archs()
    nearest = difflib.get_close_matches(arch, archs, n=3, cutoff=0.0)
    fail(f"{arch}: not a fusion_transformer arch; nearest: {', '.join(nearest)} (fusion-archs lists all {len(archs)})")


def main(args):
    if args.readme and (args.arch or args.conflicts):
        fail("--readme writes the arch list: give it without ARCH and --conflicts")
    if args.arch and args.conflicts:
        fail("ARCH and --conflicts: give one of them")
    if args.arch and args.arch not in catalog.fusion_archs():
        unknown_arch(args.arch)
    if args.readme:
        update_readme(args.readme, catalog.readme_table())
        print(f"fusion-archs: wrote the table of {len(catalog.fusion_archs())} archs into {args.readme}")
    elif args.conflicts:
        print(show_conflicts(args.format))
    elif args.arch:
        print(show_arch(args.arch, args.format))
    else:
        print(list_archs(args.format))
