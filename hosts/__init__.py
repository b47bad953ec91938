"""cellfabric end hosts: RoCEv2 cells over raw sockets, reordering, rate control, failover.

Modules: ``wire`` (every wire constant: the contract with fabric.p4), ``layers`` (Scapy layers
for ImmDt, SACK, INT-MD v2.1, Telemetry Report v2.0), ``cells`` (segmentation, frame templates,
fast parsing), ``sack`` (ACK/SACK/NAK/grant and CNP bodies), ``reorder`` (reorder buffer and
message assembly), ``transport`` (sender reliability), ``ratelimit`` (token bucket), ``cc``
(the rate-control registry: none/dcqcn/hpcc/credit), ``config`` (sender and receiver settings,
each field its own flag via ``knobs``), ``nic`` (the port protocol and the AF_PACKET port),
``program`` (the host-program contract), ``sender``, ``receiver``, ``collector`` and ``cli``
(``cellfabric host send|recv|collect``). Imports neither controlplane nor p4sim.
"""
