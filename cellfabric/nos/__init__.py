"""The switch's own network OS pieces: what runs per switch when the fabric routes itself
(``--routing bgp``): FRR (BGP, BFD) in the switch's namespace, in band over fabric.p4, and the
route agent that programs what it learns."""
