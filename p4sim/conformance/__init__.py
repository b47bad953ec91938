"""p4c STF packet tests against p4sim, real BMv2, or a mix of the two (`p4sim conformance`)."""
