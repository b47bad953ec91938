"""The emulation driver: a fabric in Mininet, one switch process per switch, host programs as
processes in the hosts' namespaces, wall-clock time."""
