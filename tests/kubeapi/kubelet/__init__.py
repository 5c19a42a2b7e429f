"""Test models of the control plane's other actors, run over an
:class:`~tests.kubeapi.store.ApiStore`: each is a step function (one pass, returning how many
writes it made) that a test calls between requests, or runs in a loop beside a live
component with :func:`run_loop`."""

from tests.kubeapi.kubelet.kubelet import Kubelet
from tests.kubeapi.kubelet.loop import run_loop

__all__ = ["Kubelet", "run_loop"]
