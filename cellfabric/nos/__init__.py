"""The switch's own network OS pieces: what runs per switch when the fabric routes itself
(``--routing bgp``), beside FRR in the switch's namespace."""
