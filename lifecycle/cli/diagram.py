"""``lifecycle diagram`` (one machine, or a dumped object on its machine) and
``lifecycle diagrams`` (every generated diagram and reference page of a checkout)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lifecycle.cli import UsageError, machine_of
from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.discover import import_modules, kinds_in, machines_in
from lifecycle.diagrams.files import project_root, stale_files, write_generated
from lifecycle.diagrams.live import load_object, machine_for
from lifecycle.diagrams.model import LiveObject
from lifecycle.diagrams.offline import standalone_html
from lifecycle.diagrams.render import FORMATS, SUFFIXES, render

__all__ = ["CLI_FORMATS", "CLI_SUFFIXES", "output_format", "register"]

#: What ``lifecycle diagram`` writes: the formats of :func:`render`, and ``html``, a page
#: drawing the Mermaid diagram with the bundled Mermaid script (offline).
CLI_FORMATS = (*FORMATS, "html")
#: File suffix -> format, for ``-o``.
CLI_SUFFIXES = {**SUFFIXES, ".html": "html", ".htm": "html"}


def register(subparsers: Any) -> None:
    """Add the ``diagram`` and ``diagrams`` subcommands."""
    one = subparsers.add_parser(
        "diagram",
        help="draw a machine class (or a live object on its machine)",
        description="Draw every state and transition of a machine class as DOT, Mermaid, "
                    "SVG or PNG, or as an HTML page that draws the Mermaid diagram in a "
                    "browser without the network (Mermaid's script is bundled and inlined). "
                    "With --object, draw a resource dumped as YAML or JSON on its machine, its "
                    "current state highlighted and its history numbered.",
    )
    one.add_argument("machine", nargs="?", metavar="MACHINE|KIND",
                     help="MODULE:NAME of a machine class, a Kind (drawn as its machine) or a "
                          "Registration, e.g. lifecycle.machines.managed:ManagedResourceMachine; "
                          "or a registered kind's name such as DatabaseInstance (optional with "
                          "--object: found from the object's registered kind)")
    one.add_argument("-f", "--format", choices=CLI_FORMATS,
                     help="output format: dot, mermaid, svg, png or html (default: from the "
                          "suffix of -o, else dot; svg and png need Graphviz; html is a page "
                          "drawing the Mermaid diagram offline)")
    one.add_argument("-o", "--output", metavar="PATH",
                     help="write here instead of stdout (default: stdout); the suffix .dot, "
                          ".gv, .mmd, .mermaid, .svg, .png or .html chooses the format and "
                          "must agree with -f")
    one.add_argument("--object", metavar="FILE",
                     help="a YAML or JSON dump of one object (kubectl get -o yaml), drawn on "
                          "its machine (default: none, the bare machine)")
    one.add_argument("--name",
                     help="with --object: pick this object from a List (default: the only one)")
    one.set_defaults(func=_diagram_command)
    many = subparsers.add_parser(
        "diagrams",
        help="regenerate diagrams/ and docs/reference/ of a checkout",
        description="Write SVG, DOT and Mermaid of every machine into diagrams/ and its "
                    "reference page into docs/reference/, under the current directory (run it "
                    "from the project's checkout) or --root. Without MODULE arguments the "
                    "machines are those of the registered kinds and the machines they extend.",
    )
    many.add_argument("modules", nargs="*", metavar="MODULE",
                      help="draw every machine class defined in these modules instead "
                           "(a package stands for its modules; default: the machines of the "
                           "registered kinds and the machines they extend)")
    many.add_argument("--root", metavar="DIR",
                      help="project root holding diagrams/ and docs/ (default: the current "
                           "directory)")
    many.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 listing stale files (default: write "
                           "every file)")
    many.set_defaults(func=_diagrams_command)


#: Suffixes of file formats no -f can write: a DOT or Mermaid text (or an SVG) must never land
#: in a file whose name says it is one of these.
_FOREIGN = frozenset({".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".pdf",
                      ".eps", ".ps", ".ico", ".avif", ".heic"})


def output_format(fmt: str | None, output: str | None) -> str:
    """The format to write: ``-f`` or the suffix of ``-o`` (default dot), which must agree.

    A :class:`UsageError` when ``-o`` names a suffix of another format than ``-f``'s, an
    image format lifecycle does not write (``x.jpg``), or, without ``-f``, a suffix that
    names no format.
    """
    suffix = Path(output).suffix.lower() if output else ""
    known = ", ".join(sorted(CLI_SUFFIXES))
    if suffix in CLI_SUFFIXES:
        named = CLI_SUFFIXES[suffix]
        if fmt is not None and fmt != named:
            raise UsageError(f"-o {output} names a {named} file but -f is {fmt}; "
                             f"drop -f or give the file a {fmt} suffix")
        return named
    if suffix in _FOREIGN:
        raise UsageError(f"-o {output}: lifecycle does not write {suffix[1:]} images; use one "
                         f"of {known} (or -f FORMAT with a suffix of that format)")
    if suffix and fmt is None:
        raise UsageError(f"-o {output}: cannot tell the format from the suffix {suffix}; use "
                         f"one of {known}, or name the format with -f")
    return fmt or "dot"


def _diagram_command(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    machine: type[LifecycleMachine] | None = None
    if args.machine:
        machine = machine_of(args.machine, "machine")
    elif not args.object:
        raise UsageError("name a machine as MODULE:CLASS, or an object dump with --object")
    live = None
    if args.object:
        obj = load_object(args.object, args.name)
        machine = machine or machine_for(obj)
        live = LiveObject.from_dict(obj, machine)
    assert machine is not None
    data = standalone_html(machine, live) if fmt == "html" else render(machine, fmt, live)
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def _diagrams_command(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else project_root()
    if args.root and not root.is_dir():  # never made: a typo must not grow a tree
        raise UsageError(f"--root {args.root}: no such directory (it must hold the project's "
                         f"diagrams/ and docs/)")
    machines: list[type[LifecycleMachine]] | None = None
    kinds: list[Any] | None = None
    if args.modules:
        modules = import_modules(args.modules)
        machines, kinds = machines_in(modules), kinds_in(modules)
        if not machines:
            raise UsageError(f"no machine class with states in {', '.join(args.modules)}")
    if args.check:
        stale = stale_files(root, machines, kinds)
        for path in stale:
            print(f"stale: {path}")
        if stale:
            again = " ".join(["lifecycle diagrams", *args.modules])
            print(f"run `{again}` to regenerate", file=sys.stderr)
        return 1 if stale else 0
    for written in write_generated(root, machines, kinds):
        print(written.relative_to(root))
    return 0
