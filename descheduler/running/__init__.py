"""The descheduler's running part: reads the cluster, carries a plan out one gang at a
time through the evictor, keeps the ledger and the metrics.

Its decisions come from :mod:`descheduler.planning`; what it does to a cluster goes
through the port in :mod:`descheduler.running.runner_port`.
"""
