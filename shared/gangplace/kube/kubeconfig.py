"""Where to find the API server and how to authenticate.

Lookup order, first match wins (as kubectl and controller tooling do):

1. an explicit ``--kubeconfig`` path (it must exist);
2. ``$KUBECONFIG`` (one or more paths separated by ``:``);
3. in-cluster: ``$KUBERNETES_SERVICE_HOST``/``PORT`` and the service-account token and CA;
4. ``~/.kube/config``.

A program run by a person (``kubectl corral``) passes ``prefer_kubeconfig``: then
``~/.kube/config`` comes before in-cluster, as kubectl has it, so inside a pod a
kubeconfig the user wrote wins over the pod's service account.

Nothing found is a :class:`KubeConfigError` that lists every place that was tried.

In-cluster, the kubelet rotates the projected service-account token (about hourly). The
token file is re-read whenever it changes on disk (checked with one ``stat`` per request),
so a long-running descheduler or webhook never sends an expired token.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_kube_config

from gangplace import __version__
from gangplace.kube.client import KubeClient

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "KubeConfigError",
    "RotatingToken",
    "client_for",
    "in_cluster_configuration",
    "load_configuration",
    "new_client",
]

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Watches hold a connection each; leave plenty for lists, evictions and leases beside them.
_MIN_POOL = 64


class KubeConfigError(RuntimeError):
    """No usable cluster configuration; the message says what was tried and why it failed."""


@dataclass(slots=True)
class RotatingToken:
    """A bearer token read from a file, re-read whenever the file changes.

    Used as the client's ``refresh_api_key_hook``: the client calls it before each request.
    A file that disappears or reads empty mid-rotation keeps the last good token.
    """

    path: Path
    token: str = ""
    _stamp: tuple[int, int, int] | None = None

    def read(self) -> str:
        try:
            st = os.stat(self.path)
        except OSError as e:
            if not self.token:
                raise KubeConfigError(f"service-account token {self.path}: {e.strerror}") from e
            log.warning("token file %s: %s; keeping the last token", self.path, e.strerror)
            return self.token
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            text = self.path.read_text().strip()
            if text:
                self.token, self._stamp = text, stamp
            elif not self.token:
                raise KubeConfigError(f"service-account token {self.path} is empty")
        return self.token

    def __call__(self, configuration: Configuration) -> None:
        configuration.api_key["BearerToken"] = self.read()


def in_cluster_configuration(
    environ: Mapping[str, str] | None = None, service_account_dir: Path | None = None
) -> Configuration:
    """The in-cluster configuration; :class:`KubeConfigError` if not in a cluster."""
    env = os.environ if environ is None else environ
    sa_dir = SERVICE_ACCOUNT_DIR if service_account_dir is None else service_account_dir
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeConfigError(
            "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"
        )
    token_path, ca_path = sa_dir / "token", sa_dir / "ca.crt"
    if not token_path.is_file():
        raise KubeConfigError(f"in-cluster: service-account token {token_path} does not exist")
    if not ca_path.is_file() or ca_path.stat().st_size == 0:
        raise KubeConfigError(f"in-cluster: CA bundle {ca_path} does not exist or is empty")
    token = RotatingToken(token_path)
    token.read()
    cfg = Configuration()
    bracket = ":" in host  # an IPv6 address
    cfg.host = f"https://[{host}]:{port}" if bracket else f"https://{host}:{port}"
    cfg.ssl_ca_cert = str(ca_path)
    cfg.api_key_prefix["BearerToken"] = "Bearer"
    cfg.api_key["BearerToken"] = token.token
    cfg.refresh_api_key_hook = token
    return cfg


async def _from_kubeconfig(path: str, context: str | None) -> Configuration:
    cfg = Configuration()
    try:
        await load_kube_config(
            config_file=path, context=context, client_configuration=cfg, persist_config=False
        )
    except (ConfigException, yaml.YAMLError, OSError, KeyError, TypeError, ValueError) as e:
        ctx = f" (context {context!r})" if context else ""
        raise KubeConfigError(f"kubeconfig {path}{ctx}: {e}") from e
    if not cfg.host:
        raise KubeConfigError(f"kubeconfig {path}: the selected cluster has no server")
    return cfg


async def load_configuration(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path | None = None,
    home: Path | None = None,
    prefer_kubeconfig: bool = False,
) -> Configuration:
    """The client configuration, found in the order of the module docstring."""
    env = os.environ if environ is None else environ
    tried: list[str] = []
    default = (Path.home() if home is None else home) / ".kube" / "config"
    if kubeconfig is not None:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise KubeConfigError(f"--kubeconfig {path}: no such file")
        cfg = await _from_kubeconfig(str(path), context)
    elif env.get("KUBECONFIG"):
        paths = [p for p in env["KUBECONFIG"].split(os.pathsep) if p]
        existing = [p for p in paths if Path(p).expanduser().is_file()]
        if not existing:
            raise KubeConfigError(f"$KUBECONFIG={env['KUBECONFIG']}: none of its files exist")
        cfg = await _from_kubeconfig(os.pathsep.join(existing), context)
    elif prefer_kubeconfig and default.is_file():
        cfg = await _from_kubeconfig(str(default), context)
    else:
        tried.append("--kubeconfig: not given")
        tried.append("$KUBECONFIG: not set")
        try:
            cfg = in_cluster_configuration(env, service_account_dir)
        except KubeConfigError as e:
            tried.append(f"in-cluster: {e}")
            if not default.is_file():
                tried.append(f"{default}: does not exist")
                raise KubeConfigError(
                    "no Kubernetes configuration found; tried " + "; ".join(tried)
                ) from None
            cfg = await _from_kubeconfig(str(default), context)
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, _MIN_POOL)
    return cfg


async def new_client(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    request_timeout: float = 30.0,
    **kw: Any,
) -> KubeClient:
    """A :class:`KubeClient` on the configuration :func:`load_configuration` finds.
    The caller closes it (``async with await new_client() as kube:``)."""
    cfg = await load_configuration(kubeconfig, context=context, **kw)
    return client_for(cfg, request_timeout=request_timeout)


def client_for(cfg: Configuration, *, request_timeout: float = 30.0) -> KubeClient:
    """A :class:`KubeClient` on an explicit configuration (tests, tools)."""
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, _MIN_POOL)
    api = ApiClient(cfg)
    api.user_agent = f"corral/{__version__}"
    return KubeClient(api, request_timeout=request_timeout)
