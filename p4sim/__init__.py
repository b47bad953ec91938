"""p4sim: cellfabric's embedded P4 toolchain (a P4_16 compiler to BMv2 JSON + P4Info, and a
BMv2-JSON software switch with simple_switch semantics and a P4Runtime server)."""
