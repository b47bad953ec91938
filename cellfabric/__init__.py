"""The harness: what wires switches, controller and hosts into an experiment (DESIGN.md).

``core`` holds what both drivers share (run configuration, workloads, host plans, the metric
model, validity, report, plots); ``emulation`` runs a fabric in Mininet with real processes,
``sim`` in virtual time in one process; ``sweep`` runs grids of either. ``sim`` imports nothing
of ``emulation`` (and so nothing of Mininet).
"""
