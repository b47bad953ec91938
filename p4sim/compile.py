"""`p4sim compile`: a stand-in for p4c-bm2-ss on v1model (same flags, BMv2 JSON + P4Info)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass, field

from p4sim.frontend.errors import CompileError

USAGE = """usage: p4sim compile PROG.p4 [-o OUT.json] [--p4runtime-files F[,F...]]
                     [-I DIR] [-D NAME[=VALUE]] [--std p4-16] [--arch v1model]
                     [--target bmv2] [--p4runtime-format text|binary|json] [--p4v 16]
                     [--Werror]"""


@dataclass
class Options:
    source: str = ""
    output: str | None = None
    p4info_files: list[str] = field(default_factory=list)
    p4info_format: str | None = None
    includes: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    warnings_are_errors: bool = False  # --Werror
    disabled: set[str] = field(default_factory=set)  # --Wdisable[=KIND] ("" = all)


class UsageError(Exception):
    pass


def parse_args(argv: list[str]) -> Options:
    o = Options()
    i = 0

    def value(flag: str) -> str:
        nonlocal i
        if "=" in argv[i] and argv[i].startswith("--"):
            return argv[i].split("=", 1)[1]
        if argv[i] != flag and argv[i].startswith(flag) and len(flag) == 2:
            return argv[i][2:]
        i += 1
        if i >= len(argv):
            raise UsageError(f"{flag} needs a value")
        return argv[i]

    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            raise UsageError("")
        if a == "-o" or (a.startswith("-o") and len(a) > 2 and not a.startswith("--")):
            o.output = value("-o")
        elif a.startswith("--p4runtime-files") or a.startswith("--p4runtime-file"):
            o.p4info_files += [f for f in value(a.split("=")[0]).split(",") if f]
        elif a.startswith("--p4runtime-format"):
            o.p4info_format = value("--p4runtime-format")
        elif a.startswith("-I"):
            o.includes.append(value("-I"))
        elif a.startswith("-D"):
            d = value("-D")
            name, _, v = d.partition("=")
            o.defines[name] = v if _ else "1"
        elif a.startswith("--p4v"):
            if value("--p4v") not in ("16", "1.6"):
                raise UsageError("only --p4v 16 is supported")
        elif a.startswith("-U"):
            o.defines.pop(value("-U"), None)
        elif a == "--Werror":
            o.warnings_are_errors = True
        elif a == "--maxErrorCount":
            value("--maxErrorCount")  # p4sim stops at its first error
        elif a == "--version":
            raise UsageError("version")
        elif a.startswith("--Wdisable"):
            o.disabled.add(a.partition("=")[2])
        elif a in ("-v", "--emit-externs", "--nocpp") or a.startswith(
                ("--Wwarn", "--Winfo", "--Werror=", "-O")):
            pass  # accepted for p4c-bm2-ss compatibility; p4sim has no verbosity levels
        elif a.startswith("--std"):
            if value("--std") not in ("p4-16", "p4_16"):
                raise UsageError("only --std p4-16 is supported")
        elif a.startswith("--arch"):
            if value("--arch") != "v1model":
                raise UsageError("only --arch v1model is supported")
        elif a.startswith("--target"):
            if value("--target") != "bmv2":
                raise UsageError("only --target bmv2 is supported")
        elif a.startswith("-") and a != "-":
            raise UsageError(f"unknown option {a}")
        else:
            if o.source:
                raise UsageError("only one source file may be given")
            o.source = a
        i += 1
    if not o.source:
        raise UsageError("no source file given")
    return o


def compile_program(opts: Options, warnings: list[str] | None = None
                    ) -> tuple[dict, object, object]:
    """Runs every pass; returns (bmv2 json, P4Info message, builder). Raises CompileError
    (for the first warning too, with --Werror); each warning's text goes into `warnings`."""
    from p4sim.backend.json_program import build_json
    from p4sim.backend.p4info import build_p4info
    from p4sim.frontend.lexer import tokenize
    from p4sim.frontend.parser import parse
    from p4sim.frontend.preprocess import Preprocessor
    from p4sim.frontend.typecheck import typecheck

    pre = Preprocessor(opts.includes, opts.defines)
    try:
        pp = pre.run(opts.source)
    except CompileError as e:
        e.sources = pre.sources  # type: ignore[attr-defined]
        raise
    try:
        prog = parse(tokenize(pp))
        checker = typecheck(prog)
        seen: set[str] = set()
        covered = _report_p4c_warnings(prog, pp.sources, opts, warnings)
        for w in checker.warnings:
            if w.loc in covered or "" in opts.disabled:
                continue  # p4c's own wording of it was given
            text = w.render(pp.sources, opts.source, kind="warning")
            if text in seen:
                continue  # one constant checked twice (an overload tried, then chosen)
            seen.add(text)
            if opts.warnings_are_errors:
                raise w
            if warnings is not None:
                warnings.append(text)
        doc, builder = build_json(checker, prog, pp.sources, opts.source)
        info = build_p4info(builder.control_plane_model())
    except CompileError as e:
        e.sources = pp.sources  # type: ignore[attr-defined]
        raise
    return doc, info, builder


def _report_p4c_warnings(prog: object, sources: dict[str, list[str]], opts: Options,
                         warnings: list[str] | None) -> set[object]:
    """p4c's warnings (p4sim.frontend.warnings) into ``warnings``; raises the first as an
    error with --Werror. Returns the places reported, so the checker's own notes of the same
    literal are not repeated."""
    from p4sim.frontend.warnings import p4c_warnings

    covered: set[object] = set()
    for n, group in enumerate(p4c_warnings(prog, sources)):  # type: ignore[arg-type]
        errors: list[str] = []
        for d in group:
            if "" in opts.disabled or d.option in opts.disabled:
                continue
            covered.add(d.origin or d.loc)
            if opts.warnings_are_errors and d.level == "warning":
                errors.append(dataclasses.replace(d, level="error").render(sources))
            elif warnings is not None:
                warnings.append(d.render(sources))
        if errors:  # p4c reports the pass's every one as an error, then stops (its parser
            # with a count of them)
            tail = [f"[--Werror=overlimit] error: {len(errors)} errors encountered, aborting "
                    "compilation"] if n == 0 else []
            raise _RenderedErrors([*errors, *tail])
    return covered


class _RenderedErrors(CompileError):
    """p4c's warnings turned errors by --Werror, already in p4c's words."""

    def __init__(self, texts: list[str]) -> None:
        super().__init__(None, texts[0].splitlines()[0])
        self.texts = texts

    def render(self, sources: dict[str, list[str]], fallback: str = "",
               kind: str = "error") -> str:
        return "\n".join(self.texts)


def write_p4info(info: object, path: str, fmt: str | None) -> None:
    from google.protobuf import json_format, text_format

    kind = fmt or ("binary" if path.endswith(".bin") else "json" if path.endswith(".json")
                   else "text")
    if kind == "binary":
        with open(path, "wb") as f:
            f.write(info.SerializeToString())  # type: ignore[attr-defined]
        return
    with open(path, "w", encoding="utf-8") as f:
        if kind == "json":
            f.write(json_format.MessageToJson(info))  # type: ignore[arg-type]
        else:
            # p4c heads its text format with protobuf's file/message comments.
            f.write("# proto-file: p4/config/v1/p4info.proto\n"
                    "# proto-message: p4.config.v1.P4Info\n\n")
            f.write(text_format.MessageToString(info))  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = parse_args(args)
    except UsageError as e:
        if str(e) == "version":
            print("p4sim compile (p4c-bm2-ss 1.2.5 command line)")
            return 0
        if str(e):
            print(f"p4sim compile: error: {e}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2 if str(e) else 0
    try:
        if not os.path.isfile(opts.source):
            print(f"{opts.source}: error: no such file", file=sys.stderr)
            return 1
        warnings: list[str] = []
        doc, info, _ = compile_program(opts, warnings)
        for text in warnings:
            print(text, file=sys.stderr)
        out = opts.output or os.path.splitext(os.path.basename(opts.source))[0] + ".json"
        with open(out, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        for path in opts.p4info_files:
            write_p4info(info, path, opts.p4info_format)
        return 0
    except CompileError as e:
        print(e.render(getattr(e, "sources", {}), opts.source), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{e.filename or opts.source}: error: {e.strerror or e}", file=sys.stderr)
        return 1
    except RecursionError:
        print("error: internal: program nested too deeply", file=sys.stderr)
        return 1
    except Exception as e:  # never a traceback: one line naming the internal failure
        print(f"error: internal: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
