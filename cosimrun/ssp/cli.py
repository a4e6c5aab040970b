"""Import an SSP system: cosimrun ssp import SYSTEM.ssp DIR writes it as an experiment with its FMUs.

The experiment goes to DIR/experiment/NAME.yaml (NAME: --name, else the archive's
stem) and the FMUs to DIR/fmus/NAME/; run it with
cosimrun --config-dir DIR +experiment=NAME (overrides such as run.dt=0.001 or
master=jacobi work as for any experiment). Components, connections (with units,
suppressUnitConversion and LinearTransformation as scale and offset), parameter
values from SSV files and parameter bindings, and the DefaultExperiment are
imported; annotations are ignored (listed once by type); anything else in the
SSD is refused with one line naming the element, and nothing is written then.
"""

from __future__ import annotations

import argparse

from cosimrun.ssp.importer import import_ssp


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = __doc__.split("\n", 2)[2]
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    imp = actions.add_parser("import", help="write an SSP system as an experiment with its FMUs",
                             description=__doc__.splitlines()[0],
                             epilog=parser.epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    imp.add_argument("ssp", metavar="SYSTEM.ssp", help="the SSP archive")
    imp.add_argument("directory", metavar="DIR", help="the config directory to write into (created if missing)")
    imp.add_argument("--name", help="the experiment's name (default: the archive's file name without .ssp)")
    imp.add_argument("--force", action="store_true", help="replace an experiment of that name and its FMUs")


def run(args: argparse.Namespace) -> int:
    result = import_ssp(args.ssp, args.directory, args.name, force=args.force)
    root = result.experiment.parent.parent
    print(f"ssp import: wrote {result.experiment} and {len(result.fmus)} "
          f"FMU{'' if len(result.fmus) == 1 else 's'} in {result.fmus[0].parent if result.fmus else root}")
    for note in result.notes:
        print(f"  {note}")
    if result.annotation_notice:
        print(f"  {result.annotation_notice}")
    if result.unused_entries:
        print(f"  not imported (the SSD does not refer to them): {', '.join(result.unused_entries)}")
    print(f"run it with: cosimrun --config-dir {root} +experiment={result.experiment.stem}")
    return 0
