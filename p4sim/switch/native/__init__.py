"""The native (C) data plane of p4sim: BMv2 JSON compiled per program to C, built with the
system compiler, loaded through cffi, held byte for byte to the Python path (the reference)."""
