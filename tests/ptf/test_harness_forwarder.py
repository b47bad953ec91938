"""PTF smoke test of the harness itself, against the trivial port-pair forwarder.

Run with ``python -m netlab.ptf_runner --dut forwarder test_harness_forwarder``: it checks
that frames reach the device under test over the veths and come back where the DUT sends them,
and that PTF notices a frame that does not arrive, so a broken harness cannot pass silently.
"""

DUT = "forwarder"

import ptf.testutils as tu  # noqa: E402
from ptf.base_tests import BaseTest  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402


class ForwarderTest(BaseTest):
    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = __import__("ptf").dataplane_instance
        self.dataplane.flush()

    def _frame(self, n: int) -> Ether:
        return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1000 + n, dport=4791)
                / bytes(range(32)))


class PairForwarding(ForwarderTest):
    """Port 0 <-> 1 and 2 <-> 3, byte for byte, and nothing anywhere else."""

    def runTest(self) -> None:
        for n, (ingress, egress) in enumerate([(0, 1), (1, 0), (2, 3), (3, 2)]):
            pkt = self._frame(n)
            tu.send_packet(self, ingress, pkt)
            tu.verify_packet(self, pkt, egress)
        tu.verify_no_other_packets(self)


class MissingFrameIsDetected(ForwarderTest):
    """Expecting a frame on the wrong port must fail: the harness can see absence."""

    def runTest(self) -> None:
        pkt = self._frame(7)
        tu.send_packet(self, 0, pkt)
        with self.assertRaises(AssertionError):
            tu.verify_packet(self, pkt, 2, timeout=0.5)
        tu.verify_packet(self, pkt, 1)
