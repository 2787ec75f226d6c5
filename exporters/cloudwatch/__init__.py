"""Amazon CloudWatch publishing: in-process (`--cloudwatch-namespace`) and as a pipeline
(`neuron-monitor-cloudwatch`).  boto3 is imported only when publishing is switched on."""
