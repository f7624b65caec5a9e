"""Kubernetes knowledge: the kinds table (where each kind keeps its pod templates), workloads and their classes, label selectors, ResourceQuota scopes."""
