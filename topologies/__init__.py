"""The topology model (switches, links, rates, hosts, tenants; AI servers, their GPUs and
NVLinks, and the ranks on them), its generators (fat-tree, Clos, leaf-spine, rail fabrics) and
the shipped YAML files. Near the bottom of the layers: it imports nothing of p4sim,
controlplane or the harness; they all may import it."""
