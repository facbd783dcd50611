"""The ``repflow`` command.

Every subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable taking the
parsed ``argparse.Namespace`` and returning an exit status). Adding a command means adding
its module name to :data:`COMMAND_MODULES`; no other file changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import NoReturn

from repflow.errors import UserError


class Terminated(KeyboardInterrupt):
    """Raised by a command's SIGTERM handler: unwinds like Ctrl-C (every cleanup runs), and
    :func:`main` then exits 143 (128 + SIGTERM), as a process killed by SIGTERM reports."""


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` that accepts no abbreviation of a long option
    (``allow_abbrev=False``): ``--schem`` is an error, not ``--scheme``, so a flag added later
    that shares a prefix cannot silently change what an old command line means. Subparsers
    made by :meth:`add_subparsers` are of this class too (argparse's default
    ``parser_class`` is the parent's class)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


class _DeprecatedAliases:
    """Mixin for argparse actions: using one of ``old`` prints a one-line note naming the
    current flag (the value is taken as usual)."""

    def __init__(self, *args, old: tuple[str, ...] = (), **kwargs) -> None:  # noqa: ANN002
        self.old = old
        super().__init__(*args, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # noqa: ANN001
        if option_string in self.old:
            new = next(o for o in self.option_strings if o not in self.old and o.startswith("--"))
            print(f"repflow: note: {option_string} is deprecated; use {new}", file=sys.stderr)
        super().__call__(parser, namespace, values, option_string)  # type: ignore[misc]


class DeprecatedStore(_DeprecatedAliases, argparse._StoreAction):
    """``store`` action with deprecated alias names (``old=(...)``)."""


class DeprecatedStoreTrue(_DeprecatedAliases, argparse._StoreTrueAction):
    """``store_true`` action with deprecated alias names (``old=(...)``)."""


class _HiddenAlias(argparse._StoreAction):
    """A deprecated flag name kept out of ``--help``: takes its value as the current flag
    ``new`` does and prints a one-line note naming ``new``."""

    def __init__(self, *args, new: str = "", **kwargs) -> None:  # noqa: ANN002
        self.new = new
        super().__init__(*args, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # noqa: ANN001
        print(f"repflow: note: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        super().__call__(parser, namespace, values, option_string)


def add_hidden_alias(parser: argparse.ArgumentParser, *old: str, new: str, dest: str,
                     type: object = None) -> None:  # noqa: A002  # fmt: skip
    """Accepts ``old`` flag names (not shown in ``--help``) as deprecated spellings of
    ``new``, which stores into ``dest``."""
    parser.add_argument(*old, dest=dest, action=_HiddenAlias, new=new, type=type,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # fmt: skip


def _one_line_error(parser: argparse.ArgumentParser) -> None:
    """Makes ``parser`` report a usage error as every other error is reported: one line,
    ``repflow: error: ...``, naming the help of the (sub)command it belongs to; exit 2."""

    def error(message: str) -> NoReturn:
        parser.exit(2, f"repflow: error: {message} (see `{parser.prog} --help`)\n")

    parser.error = error  # type: ignore[method-assign]
    # "-5Mbps" is a value (that the command's own check then names), not an unknown option.
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(r"^-\.?\d")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    if parser._subparsers is None:
        return {}
    for action in parser._subparsers._group_actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [parser]
    for sub in dict.fromkeys(_subparsers(parser).values()):
        out += _all_parsers(sub)
    return out


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace
               ) -> argparse.ArgumentParser:  # fmt: skip
    """The (sub)command parser that ``args`` were parsed by."""
    for dest in ("command", "testbed_command", "proxy_command"):
        subs = _subparsers(parser)
        name = getattr(args, dest, None)
        if name in subs:
            parser = subs[name]
    return parser


#: Subcommand modules, in the order their commands appear in ``repflow --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "sim",
    "bench",
    "model",
    "net",
    "proxy",
    "testbed",
    "experiments",
    "smartrep",
)


#: Commands whose parser sets ``huge_pages``: :func:`main` restarts them with a heap on huge
#: pages before it builds any parser (a test checks that the two agree).
HUGE_PAGE_COMMANDS: tuple[str, ...] = ("sim",)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the top-level parser with every available subcommand registered (``only``: that
    command alone, which is all a command line naming it needs — registering the other
    commands imports their modules, 0.2 s of every ``repflow sim``'s start)."""
    parser = Parser(
        prog="repflow",
        description="RepFlow: replicate short flows to cut data-center tail latency.",
    )
    from repflow.version import __version__

    parser.add_argument("--version", action="version", version=f"repflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES if only is None else (only,):
        try:
            module = importlib.import_module(f"repflow.cli.{name}")
        except ModuleNotFoundError as exc:
            # A command whose module is not part of this build is simply absent.
            if exc.name == f"repflow.cli.{name}":
                continue
            raise
        module.register(sub)
    for p in _all_parsers(parser):
        _one_line_error(p)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parses ``argv``; an argument no parser knows is reported by the subcommand it was
    given to (``repflow bench --out X`` names ``repflow bench --help``, not the top level)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _stdout_closed() -> bool:
    """Whether standard output's reader has gone (a broken pipe is then ours to ignore;
    one from a socket is an error)."""
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll, or no real file descriptor
        return False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``repflow`` console script."""
    given = sys.argv[1:] if argv is None else argv
    first = given[0] if given else ""
    if argv is None and first in HUGE_PAGE_COMMANDS and not {"-h", "--help"} & set(given):
        # A command that simulates in this process starts again with a heap on huge pages
        # (repflow.hugepages; REPFLOW_HUGE_PAGES=0 turns it off) — first thing, so that the
        # process it replaces has built no parser. (The command's parser declares it with
        # `huge_pages`; a test keeps HUGE_PAGE_COMMANDS equal to those that do.)
        from repflow import hugepages

        hugepages.restart_with_huge_pages()
    # A command line that starts with a command's name needs that command's parser alone
    # (anything else, such as `repflow --help`, gets them all).
    parser = build_parser(only=first if first in COMMAND_MODULES else None)
    if first in COMMAND_MODULES and first not in _subparsers(parser):
        parser = build_parser()  # a module whose commands have other names (`net`)
    args = parse_args(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # here, where a closed reader is caught below, not at exit
        return status
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        # The reader of our output went away (`repflow ... | head`): stop quietly, as Unix
        # tools do, and keep the interpreter's last flush from failing too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except UserError as exc:
        print(f"repflow: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # A file system error no command anticipated (a disk filling up, a directory removed
        # under us): one line naming the file, never a traceback.
        where = f"'{exc.filename}': " if exc.filename else ""
        print(f"repflow: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except Terminated:
        print("repflow: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("repflow: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
