"""gangplace: the gang-placement engine shared by corral's webhook and descheduler.

``gangplace.engine`` is pure (numpy and pydantic only, no I/O); ``gangplace.kube`` is
the Kubernetes edge both components use.
"""

__version__ = "0.1.0"
