"""What both drivers share: run configuration, workloads, host plans, the metric model,
validity, report and plots."""
