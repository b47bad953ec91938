"""`cellfabric sim`: the same fabric.p4, controller plan and host transports on a discrete-event
engine in virtual nanoseconds (see DESIGN.md, "Two clocks, one fabric")."""
