"""`cellfabric sweep`: a grid of ordinary `sim`/`run` commands on local processes or a Dask
cluster, resumable, with one table and one set of plots at the end."""
