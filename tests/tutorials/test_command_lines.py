"""p4sim takes the command lines of the p4lang tools it stands in for.

The option lists come from the real tools' own help text (the shared toolchain, when it sits
beside the repository), so an option BMv2 gains cannot slip past: every option of
`simple_switch_grpc --help` must parse with its arity on `p4sim switch` and leave the JSON file
name where it was; the same for `p4c-bm2-ss`'s common options on `p4sim compile`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from tutorial_support import ROOT

# "  -i [ --interface ] arg   <port-num>@..." / "  --pcap [=arg(=.)]  ..." / "  --no-p4  ..."
_BOOST_OPTION = re.compile(r"^  (?:-(\w) \[ )?(--[\w-]+)(?: \])?( \[=arg[^\]]*\]| arg)?")


def bmv2_options(help_text: str) -> dict[str, str]:
    """Every long option of a boost::program_options help text -> 'flag', 'value' or 'optional'."""
    out: dict[str, str] = {}
    for line in help_text.splitlines():
        m = _BOOST_OPTION.match(line)
        if not m:
            continue
        arity = m.group(3) or ""
        out[m.group(2)] = "optional" if "[=" in arity else "value" if arity else "flag"
        if m.group(1):
            out["-" + m.group(1)] = out[m.group(2)]
    return out


def _help(tool: str, env: dict[str, str]) -> str:
    proc = subprocess.run([tool, "--help"], capture_output=True, text=True, env=env, timeout=60)
    return proc.stdout + proc.stderr


def test_help_parser_reads_the_three_kinds() -> None:
    sample = ("  -i [ --interface ] arg      <port-num>@<interface-name>\n"
              "  --pcap [=arg(=.)]           Generate pcap files\n"
              "  --no-p4                     Enable the switch to start\n"
              "  --max-port-count arg (=512) Maximum number\n"
              "                              continuation --not-an-option\n")
    assert bmv2_options(sample) == {"--interface": "value", "-i": "value",
                                    "--pcap": "optional", "--no-p4": "flag",
                                    "--max-port-count": "value"}


# Values that every option of that arity accepts (numbers parse as ports, ids, counts, levels).
_SAMPLE_VALUE = {"--interface": "3@veth9", "-i": "3@veth9", "--log-level": "info",
                 "-L": "info", "--log-file": "/dev/null", "--grpc-server-addr": "127.0.0.1:1"}
_EXITS = {"--help", "-h", "--version", "-v", "--json-version"}


def test_every_simple_switch_grpc_option_parses(real_env: dict[str, str]) -> None:
    from p4sim.switch.main import parse_args

    options = bmv2_options(_help("simple_switch_grpc", real_env))
    # The help of 1.15.5 lists 37 options; far fewer means the help format changed.
    assert len(options) >= 30, f"help text not understood: {sorted(options)}"
    for name, arity in sorted(options.items()):
        if name in _EXITS:
            with pytest.raises(SystemExit) as stop:
                parse_args([name])
            assert stop.value.code == 0, name
            continue
        value = _SAMPLE_VALUE.get(name, "7")
        anchor = ["-i", "1@anchor"]
        if arity == "optional":
            # As BMv2 does, an optional value takes the next word: `--pcap DIR prog.json`.
            forms = [["prog.json", name, *anchor], [*anchor, f"{name}=out", "prog.json"],
                     [*anchor, name, "out", "prog.json"], [*anchor, "prog.json", name]]
        else:
            given = [name] if arity == "flag" else [name, value]
            forms = [["prog.json", *given, *anchor], [*anchor, *given, "prog.json"],
                     [*anchor, "prog.json", "--", *given]]
        for argv in forms:
            ns = parse_args(argv)
            assert ns.json == "prog.json" and "1@anchor" in ns.interface, (name, argv)


def test_tutorial_harness_command_line() -> None:
    """The command line p4lang/tutorials' P4RuntimeSwitch builds, word for word."""
    from p4sim.switch.main import parse_args

    line = ("-i 1@s1-eth1 -i 2@s1-eth2 --pcap /tmp/ex/pcaps --nanolog ipc:///tmp/bm-0-log.ipc "
            "--device-id 0 build/basic.json --log-console --thrift-port 9090 "
            "-- --grpc-server-addr 0.0.0.0:50051")
    ns = parse_args(line.split())
    assert ns.json == "build/basic.json" and ns.pcap == "/tmp/ex/pcaps"
    assert (ns.interface, ns.thrift_port) == (["1@s1-eth1", "2@s1-eth2"], 9090)
    assert ns.grpc_server_addr == "0.0.0.0:50051" and ns.log_console


# p4c-bm2-ss's options that a build uses (preprocessor, language, P4Runtime outputs, output,
# diagnostics); the compiler-debugging ones (--top4, --dump, -T, ...) are not about the program.
_P4C_COMMON = ("-I", "-D", "-U", "-E", "--std", "--nocpp", "--Wdisable", "--Winfo", "--Wwarn",
               "--Werror", "--maxErrorCount", "--p4runtime-file", "--p4runtime-files",
               "--p4runtime-format", "--target", "--arch", "-O", "--emit-externs", "-o",
               "--p4v", "--help", "--version")


def test_p4c_common_options_exist_in_real_help(real_env: dict[str, str]) -> None:
    text = _help("p4c-bm2-ss", real_env)
    listed = set(re.findall(r"^(-{1,2}[\w-]+)", text, re.M))
    # --p4v is an alias p4c takes without listing it (the tutorials' Makefile passes it).
    missing = [o for o in _P4C_COMMON if o not in listed and o != "--p4v"]
    assert not missing, f"p4c-bm2-ss --help no longer lists {missing}"


def test_p4c_common_options_compile(tmp_path: Path) -> None:
    from p4sim.compile import main as compile_main

    src = ROOT / "tests" / "unit" / "cp_fixtures" / "cp_test.p4"
    out = tmp_path / "p.json"
    argv = [str(src), "--p4v", "16", "--std", "p4-16", "--target", "bmv2", "--arch", "v1model",
            "-I", str(tmp_path), "-D", "X=1", "-U", "Y", "--Wdisable", "--Wwarn=unused",
            "--maxErrorCount", "5", "-O", "--emit-externs",
            "--p4runtime-files", str(tmp_path / "p.p4info.txtpb"), "-o", str(out)]
    assert compile_main(argv) == 0
    assert out.stat().st_size > 0 and (tmp_path / "p.p4info.txtpb").stat().st_size > 0


def test_simple_switch_cli_queue_commands_of_the_tutorials(tmp_path: Path) -> None:
    """mri's README sets queues with `simple_switch_CLI --thrift-port 9090` and
    `set_queue_depth N` / `set_queue_rate N` typed in; the drop-in's simple_switch_CLI takes
    them on standard input against a running p4sim switch."""
    from p4sim.dropin import write_dropin
    from p4sim.switch.admin import AdminServer
    from p4sim.switch.dataplane import DataPlane

    bin_dir, _ = write_dropin(tmp_path)
    dp = DataPlane()
    admin = AdminServer(dp, 0)
    admin.start()
    try:
        proc = subprocess.run([str(bin_dir / "simple_switch_CLI"), "--thrift-port",
                               str(admin.port)], input="set_queue_depth 30 2\n"
                              "set_queue_rate 120 2\n", capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert dp.tm.queue(2).depth == 30 and dp.tm.rate(2) == 120
    finally:
        admin.stop()


def test_dropin_tools_run_p4sim(tmp_path: Path) -> None:
    from p4sim.dropin import write_dropin

    bin_dir, py_dir = write_dropin(tmp_path)
    out = subprocess.run([str(bin_dir / "simple_switch_grpc"), "--json-version"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "2.24"
    probe = subprocess.run([sys.executable, "-c", "from p4.tmp import p4config_pb2 as m; "
                            "from p4.v1 import p4runtime_pb2; c = m.P4DeviceConfig(); "
                            "c.reassign = True; c.device_data = b'{}'; "
                            "print(c.SerializeToString().hex())"],
                           env={"PYTHONPATH": str(py_dir), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=60)
    # field 1 varint 1, field 3 two bytes "{}": PI's wire format of the message
    assert probe.stdout.strip() == "08011a027b7d", probe.stderr
