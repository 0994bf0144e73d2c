"""Command-line program ``noisealloc``: a thin dispatcher over the library.

Each sub-command lives in its own module ``noisealloc.commands.<name>`` that
defines ``add_arguments(parser)`` and ``run(args) -> int``.  Modules are
imported only when their sub-command runs, so ``noisealloc --help`` stays fast
and a heavy dependency of one command never slows another.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

# name -> (module, one-line help).  Order is the order shown by --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "schedules": ("noisealloc.commands.schedules", "the built-in heuristic schedules (EDM, cosine, ...): tabulate, "
                  "export, plot (plural: the fixed collection; `schedule` builds one from your data)"),
    "entropy": ("noisealloc.commands.entropy", "MMSE, conditional entropy and generative entropy rate of a data set"),
    "optimize": ("noisealloc.commands.optimize", "certified optimal noise allocation in the fully coupled regime"),
    "schedule": ("noisealloc.commands.schedule", "one entropic training schedule built from your data or from "
                 "measured losses (`schedules` lists the built-in heuristics)"),
    "verify": ("noisealloc.commands.verify", "numerical checks of every theorem (--quick or --full)"),
    "reproduce": ("noisealloc.commands.reproduce", "reproduce every figure and write REPORT.md"),
    "sweep": ("noisealloc.commands.sweep", "run an ablation sweep (TOML) on a Dask cluster"),
    "bench": ("noisealloc.commands.bench", "benchmarks with an in-run baseline"),
}


#: Paths a command writes, checked before any computation so that no work is thrown away because
#: an output path was bad: (command, argument dest) -> 'file' or 'dir'.
OUTPUTS: dict[tuple[str, str], str] = {
    ("schedules", "out"): "file", ("schedules", "plot"): "file",
    ("entropy", "out"): "file", ("entropy", "plot"): "file",
    ("optimize", "out"): "file", ("optimize", "plot"): "file",
    ("schedule", "out"): "file", ("schedule", "plot"): "file",
    ("verify", "out"): "file",
    ("reproduce", "out"): "dir",
    ("sweep", "out"): "dir",
}
#: Output folders that may be read-only when they already exist (a complete sweep cache can still
#: be summarised there; the command refuses by itself when it would have to write).
READ_ONLY_OUTPUTS: set[tuple[str, str]] = {("sweep", "out")}
#: Files a command reads, checked up front for the same reason: (command, dest) -> 'file'.
INPUTS: dict[tuple[str, str], str] = {
    ("schedule", "from_losses"): "file", ("schedule", "compare"): "file",
    ("sweep", "file"): "file",
}
#: Exit status of a run stopped by SIGINT (128 + 2, the shell's convention).
EXIT_INTERRUPTED = 130
#: Exit status of an unexpected internal error (a bug), distinct from bad input (2) and failed checks (1).
EXIT_INTERNAL = 3
#: Set this variable to a non-empty value to see the traceback of an internal error.
TRACEBACK_ENV_VAR = "NOISEALLOC_TRACEBACK"


def _option(dest: str) -> str:
    return dest if dest == "file" else "--" + dest.replace("_", "-")


def check_output_path(path, option: str, kind: str = "file") -> None:
    """Refuse an output path that cannot be written, before any computation.

    Parameters
    ----------
    path : str or os.PathLike
        The path given on the command line.
    option : str
        The option's name, for the message (``'--out'``).
    kind : {'file', 'dir'}
        A file is written into an existing folder (missing folders are never created, so a typo
        cannot scatter folders over the disk); a folder may be created, inside an existing one.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the option, the path and what is wrong.
    """
    text = os.fspath(path)
    if not text.strip():
        raise ValueError(f"{option} is empty; give a {'file' if kind == 'file' else 'folder'} path")
    target = os.path.abspath(text)
    parent = os.path.dirname(target)
    if kind == "file":
        if os.path.isdir(target):
            raise ValueError(f"{option} {text!r} is a folder; give a file path")
        from noisealloc.theory.output import output_kind

        try:
            found = output_kind(text)
        except ValueError as exc:
            raise ValueError(f"{option} {exc}") from None
        if found == "stream":  # a character device or FIFO the user names is written straight
            return
    elif os.path.exists(target) and not os.path.isdir(target):
        raise ValueError(f"{option} {text!r} exists and is not a folder")
    if kind == "dir" and os.path.isdir(target):
        if not os.access(target, os.W_OK | os.X_OK):
            raise ValueError(f"{option} {text!r}: the folder is not writable")
        return
    if not os.path.isdir(parent):
        raise ValueError(f"{option} {text!r}: the folder {parent!r} does not exist (it is not created for you)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {text!r}: the folder {parent!r} is not writable")
    name = os.path.basename(target)
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(name)) > name_max:
        raise ValueError(f"{option}: the file name is {len(os.fsencode(name))} bytes long; this file system "
                         f"takes at most {name_max} (name starts {name[:24]!r})")
    _probe_write(parent, name, option, text)  # a file, or the folder to be made


def _probe_write(parent: str, name: str, option: str, text: str) -> None:
    """Create and remove a temporary file beside the output (as atomic_write will): a folder that
    ``os.access`` calls writable can still refuse a file (``/proc``, a read-only mount, root)."""
    import tempfile

    from noisealloc.theory.output import _temp_prefix

    try:
        fd, probe = tempfile.mkstemp(prefix=f"{_temp_prefix(name)}{os.getpid()}-", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise ValueError(f"{option} {text!r}: cannot create a file in the folder {parent!r} "
                         f"({exc.strerror or type(exc).__name__})") from None
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass


#: File formats a plot may be written in (matplotlib's own list, without loading matplotlib); a
#: path without a suffix is written as PNG.
FIGURE_FORMATS = ("eps", "jpeg", "jpg", "pdf", "pgf", "png", "ps", "raw", "rgba", "svg", "svgz", "tif", "tiff",
                  "webp")


def check_figure_format(path, option: str) -> None:
    """Refuse a plot path whose suffix names no format matplotlib writes, before any computation.

    Raises
    ------
    ValueError
        Naming the option, the path and the formats allowed.
    """
    suffix = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    from noisealloc.theory.output import output_kind

    if suffix and suffix not in FIGURE_FORMATS and output_kind(path) != "stream":
        raise ValueError(f"{option} {os.fspath(path)!r}: unknown figure format {suffix!r}; allowed suffixes: "
                         f"{', '.join('.' + f for f in FIGURE_FORMATS)} (none: PNG)")


def check_input_path(path, option: str) -> None:
    """Refuse an input path that is missing, a folder or unreadable, before any computation.

    Parameters
    ----------
    path : str or os.PathLike
    option : str
        The option's name, for the message.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the option, the path and what is wrong.
    """
    text = os.fspath(path)
    if not os.path.exists(text):
        raise ValueError(f"{option} {text!r}: file not found")
    if os.path.isdir(text):
        raise ValueError(f"{option} {text!r} is a folder; give a file")
    import stat

    if not stat.S_ISREG(os.stat(text).st_mode):
        # a FIFO would block until a writer comes, a device (/dev/zero) never ends
        raise ValueError(f"{option} {text!r} is not a regular file (a device, FIFO or socket); give a file")
    if not os.access(text, os.R_OK):
        raise ValueError(f"{option} {text!r}: the file is not readable")


def check_paths(command: str, args) -> None:
    """Check every output and input path of ``command`` (tables :data:`OUTPUTS`, :data:`INPUTS`).

    Parameters
    ----------
    command : str
        Sub-command name.
    args : argparse.Namespace
        Its parsed arguments.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        The first bad path, or one output path given twice.
    """
    seen: dict[str, str] = {}
    for (cmd, dest), kind in OUTPUTS.items():
        value = getattr(args, dest, None) if cmd == command else None
        if value is None:
            continue
        if (cmd, dest) in READ_ONLY_OUTPUTS and os.path.isdir(os.fspath(value)):
            pass
        else:
            check_output_path(value, _option(dest), kind)
        key = os.path.abspath(os.fspath(value))
        if key in seen:
            raise ValueError(f"{_option(dest)} and {seen[key]} name the same file {os.fspath(value)!r}")
        seen[key] = _option(dest)
        if dest == "plot":
            check_figure_format(value, _option(dest))
    for (cmd, dest), _kind in INPUTS.items():
        value = getattr(args, dest, None) if cmd == command else None
        if value is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            check_input_path(item, _option(dest))


def _describe(exc: BaseException) -> str:
    """One line for an expected failure: the OS error with its file, or the exception's message."""
    import zipfile

    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename!s}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    if isinstance(exc, MemoryError):
        return "not enough memory for this request; ask for fewer levels, points or samples"
    if isinstance(exc, (zipfile.BadZipFile, EOFError)):
        return f"corrupt or truncated input file ({type(exc).__name__}: {exc})"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())  # one line, whatever the exception put in it


def _expected_errors():
    import zipfile

    from noisealloc.theory._optional import MissingExtraError

    return (ValueError, TypeError, OSError, zipfile.BadZipFile, EOFError, MemoryError, MissingExtraError)


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class Parser(argparse.ArgumentParser):
    """argparse with the program's error convention and numbers as values.

    * A usage error is one line on stderr, ``PROG: error: MESSAGE (see PROG --help)``, status 2 (not the
      usage block and the error: up to 10 lines).
    * ``--lam-min -1e4`` is a negative number, not an unknown option: argparse only recognises ``-12``
      and ``-1.5`` as numbers; here also exponents, ``-inf`` and ``-nan``.  (Sub-parsers made by
      ``add_subparsers`` are of the same class.)
    """

    def __init__(self, *args, **kwargs):
        import re

        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|nan)$", re.I)

    def error(self, message):
        text = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {text} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with one sub-parser per available command."""
    from noisealloc import __version__

    parser = Parser(
        prog="noisealloc",
        description="Optimal noise allocation for diffusion training (log-SNR lambda is the canonical coordinate).",
    )
    parser.add_argument("--version", action="version", version=f"noisealloc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        if not _available(module):
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the program; return the process exit code.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success; 1 when a check the command runs fails; 2 for bad input or an expected
        fault (a bad or unwritable path, a corrupt file, an OS error, not enough memory), printed
        as one line naming the thing; 130 when interrupted (SIGINT or SIGTERM), one line; 3 for an
        internal error (a bug), one line (the traceback with ``NOISEALLOC_TRACEBACK=1``).
        Output and input paths are checked before any computation starts.  Without ``argv`` (the
        console script, ``python -m noisealloc``) the process ends in here with that status
        (``os._exit`` after flushing stdout and stderr), so that a signal can never catch it in the
        interpreter's teardown; a caller in Python passes ``argv`` and gets the status back.
    """
    import signal
    import warnings

    _INTERRUPT_SEEN[0] = False
    as_program = argv is None  # the console script or python -m noisealloc, not a caller in Python
    prefix = "noisealloc"
    previous = None
    try:
        # SIGTERM unwinds like SIGINT, so that finally-blocks remove temporary files; installed
        # first, so that a SIGTERM while the parser loads the commands also ends with status 130.
        # The program (not a caller in Python) also stops the garbage collector on an interrupt:
        # a collection over numba's objects during the unwinding took up to a second.
        handler = _interrupt_program if as_program else _raise_interrupt
        previous = signal.signal(signal.SIGTERM, handler)
        if as_program:
            signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (an embedding program): leave its handlers alone
        previous = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "_module", None) is None:
            parser.print_help()
            return _status(2)
        prefix = f"noisealloc {args.command}"
        check_paths(args.command, args)
        module = importlib.import_module(args._module)
        # Warnings (numpy's RuntimeWarnings, the toolkit's own) are held back: an error is then the one
        # line of the README, and after a finished run each is one line of its own.
        with warnings.catch_warnings(record=True) as caught:
            status = int(module.run(args) or 0)
        _print_warnings(prefix, caught)
        return _status(status)
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        if as_program:
            _exit_now(EXIT_INTERRUPTED)
        return _status(EXIT_INTERRUPTED)
    except _expected_errors() as exc:
        print(f"{prefix}: error: {_describe(exc)}", file=sys.stderr)
        return _status(2)
    except Exception as exc:
        if _INTERRUPT_SEEN[0]:
            # the interrupt was raised where it could not propagate (numba's compiler swallows an
            # exception of its ctypes callbacks and fails with a RuntimeError of its own): still an interrupt
            print(f"{prefix}: interrupted", file=sys.stderr)
            if as_program:
                _exit_now(EXIT_INTERRUPTED)
            return _status(EXIT_INTERRUPTED)
        if os.environ.get(TRACEBACK_ENV_VAR):
            raise
        print(f"{prefix}: internal error (a bug, please report it): {type(exc).__name__}: {_describe(exc)} "
              f"(set {TRACEBACK_ENV_VAR}=1 for the traceback)", file=sys.stderr)
        return _status(EXIT_INTERNAL)
    finally:
        if as_program and previous is not None:
            # The work is over.  The program ends here with the run's status: Python's teardown puts
            # the default SIGTERM action back, and a signal then killed a finished run (status -15).
            signal.signal(signal.SIGTERM, _exit_on_late_signal)
            signal.signal(signal.SIGINT, _exit_on_late_signal)
            if sys.exc_info()[0] is None:  # a status is being returned (not argparse's SystemExit)
                _exit_now(_LAST_STATUS[0])
        elif previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _print_warnings(prefix: str, caught) -> None:
    seen = set()
    for w in caught:
        line = f"{prefix}: warning: {w.category.__name__}: {' '.join(str(w.message).split())}"
        if line not in seen:
            seen.add(line)
            print(line, file=sys.stderr)


#: Set by the SIGTERM handler: an error after an interrupt is reported as the interrupt.
_INTERRUPT_SEEN = [False]


def _raise_interrupt(signum, frame):
    _INTERRUPT_SEEN[0] = True
    raise KeyboardInterrupt


def _interrupt_program(signum, frame):
    import gc

    _INTERRUPT_SEEN[0] = True
    gc.disable()  # the process ends with os._exit after the unwinding: nothing needs collecting
    raise KeyboardInterrupt


#: The status main() returned, for a signal that arrives after it (the program's teardown).
_LAST_STATUS = [0]


def _status(code: int) -> int:
    _LAST_STATUS[0] = code
    return code


def _exit_on_late_signal(signum, frame):
    _exit_now(_LAST_STATUS[0])


def _exit_now(code: int) -> None:
    """End the program at once after an interrupt: temporaries are already removed (the unwinding
    ran every ``finally``); the interpreter's teardown (a garbage collection over numba's and the
    data's objects, a second or more) and a worker thread still inside a C call are skipped."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
