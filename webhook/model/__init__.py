"""The data every layer passes on: Resource and its origin, findings, JSON pointers and patches, quantities, the cluster-facts protocol. No I/O; imports nothing of aiadmit's."""
