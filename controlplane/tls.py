"""How the control plane opens its gRPC channels: plaintext, TLS, or mutual TLS.

The options are p4runtime-shell 0.0.6's (``--ssl``, ``--cacert``, ``--cert``,
``--private-key``) with its rules: TLS only with ``--ssl``; without ``--cacert`` the server is
verified against gRPC's default roots; ``--cert`` and ``--private-key`` (both or neither) are
the client's certificate for a switch started with ``--grpc-server-with-client-auth``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from controlplane.errors import ControlPlaneError


@dataclass(frozen=True)
class ClientTls:
    """A TLS client: the CA to verify switches against, and optionally its own certificate."""

    cacert: Path | None = None
    cert: Path | None = None
    private_key: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.private_key is None):
            raise ControlPlaneError("give both --cert and --private-key (a client certificate "
                                    "needs its key), or neither")

    @property
    def mutual(self) -> bool:
        return self.cert is not None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            _read(self.cacert, "--cacert") if self.cacert else None,
            _read(self.private_key, "--private-key") if self.private_key else None,
            _read(self.cert, "--cert") if self.cert else None)

    def shell_args(self) -> list[str]:
        """The same settings as p4runtime-shell's command-line options."""
        argv = ["--ssl"]
        for flag, path in (("--cacert", self.cacert), ("--cert", self.cert),
                           ("--private-key", self.private_key)):
            if path is not None:
                argv += [flag, str(path)]
        return argv


def _read(path: Path, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise ControlPlaneError(f"{flag} {path}: cannot read ({err.strerror})") from None


def open_channel(addr: str, tls: ClientTls | None,
                 options: Sequence[tuple[str, int | str]] = ()) -> grpc.Channel:
    """A channel to ``addr``: plaintext when ``tls`` is None."""
    if tls is None:
        return grpc.insecure_channel(addr, options=list(options))
    return grpc.secure_channel(addr, tls.credentials(), options=list(options))


def unreachable_reason(channel: grpc.Channel, tls: bool, timeout: float = 2.0) -> str | None:
    """Why gRPC cannot reach the switch, from one RPC that needs no arbitration, with what
    it usually means for a refused TLS handshake; None when it says nothing useful."""
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    try:
        p4runtime_pb2_grpc.P4RuntimeStub(channel).Capabilities(
            p4runtime_pb2.CapabilitiesRequest(), timeout=timeout)
    except grpc.RpcError as err:
        return _explain_handshake(err.details() or "", tls)
    return None


def _explain_handshake(details: str, tls: bool) -> str | None:
    # gRPC's text: "failed to connect to all addresses; last error: CODE: ipv4:ADDR: WHAT"
    what = details.rpartition("last error: ")[2].strip()
    what = re.sub(r"^[A-Z_]+: ", "", what)
    what = re.sub(r"^ipv[46]:\S+: ", "", what).removesuffix(": OK")
    what = what.rpartition("OPENSSL_internal:")[2] or what
    if not what:
        return None
    if "Connection refused" in what:
        hint = ""
    elif not tls:
        hint = "; the switch may serve TLS only: try --ssl" if "Socket closed" in what else ""
    elif "Socket closed" in what:
        hint = ("; the switch closed the handshake: it wants a client certificate of its CA "
                "(--cert/--private-key)")
    elif "WRONG_VERSION_NUMBER" in what:
        hint = "; the switch does not serve TLS: try without --ssl"
    else:
        hint = "; the switch's certificate does not verify against --cacert"
    return what + hint


def add_tls_options(parser: argparse.ArgumentParser) -> None:
    """p4runtime-shell's TLS options, on ``parser``."""
    parser.add_argument("--ssl", action="store_true",
                        help="connect over TLS (as p4runtime-shell's --ssl)")
    parser.add_argument("--no-ssl", dest="ssl", action="store_false",
                        help="plaintext (the default)")
    parser.add_argument("--cacert", help="PEM CA certificate to verify the switch against "
                        "(default: gRPC's roots)")
    parser.add_argument("--cert", help="PEM client certificate, for mutual TLS")
    parser.add_argument("--private-key", help="PEM key of --cert")


def tls_from_args(args: argparse.Namespace) -> ClientTls | None:
    """The options of ``add_tls_options`` as a ClientTls (None: plaintext); p4runtime-shell's
    rule: the PEM options make no sense without --ssl."""
    pems = {"--cacert": args.cacert, "--cert": args.cert, "--private-key": args.private_key}
    if not args.ssl:
        for flag, value in pems.items():
            if value:
                raise ControlPlaneError(f"{flag} makes no sense if SSL/TLS is disabled, did "
                                        "you mean to use --ssl?")
        return None
    return ClientTls(*(Path(v) if v else None for v in pems.values()))
