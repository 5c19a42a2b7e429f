"""Run the in-memory API server on 127.0.0.1 (a random port) and make clients for it."""

from __future__ import annotations

import ssl
from types import TracebackType

from aiohttp import web
from gangplace.kube import KubeClient, client_for
from kubernetes_asyncio.client import Configuration

from tests.kubeapi.admitted import Validator
from tests.kubeapi.app import DENIED, LOG, WRITES, Settings, make_app
from tests.kubeapi.faults import Faults, RequestRecord
from tests.kubeapi.store import ApiStore
from tests.kubeapi.versions import Versions
from tests.kubeapi.volcano_admission import VolcanoPodValidation
from tests.kubeapi.webhooks import ADMIN, AdmissionChain

__all__ = ["CLIENT_HEADER", "ApiServer"]

# The header a test client carries so that faults can single it out.
CLIENT_HEADER = "X-Test-Client"


class ApiServer:
    """``async with ApiServer() as api:`` -- ``api.url``, ``api.store``, ``api.faults``,
    ``api.log`` (every request), ``api.client()`` (a real kubernetes-asyncio client).
    ``versions``: the stack it plays (default: Kubernetes 1.28, Volcano 1.7)."""

    def __init__(
        self,
        store: ApiStore | None = None,
        *,
        faults: Faults | None = None,
        bookmark_interval: float = 1.0,
        tokens: frozenset[str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
        versions: Versions | None = None,
    ) -> None:
        self.store = store or ApiStore(versions=versions)
        if versions is not None:
            self.store.versions = versions
        self.faults = faults or Faults()
        self.settings = Settings(bookmark_interval=bookmark_interval, tokens=tokens)
        self.app = make_app(self.store, self.faults, self.settings)
        self.ssl_context = ssl_context
        self.host = host
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._clients: list[KubeClient] = []

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def admission(self) -> AdmissionChain:
        """The mutating webhook chain: ``map_service``, ``reviews``."""
        return self.app[WRITES].chain

    @property
    def validators(self) -> list[Validator]:
        """The in-process validating admission steps (run after the validating
        webhooks); append to add one."""
        return self.app[WRITES].validators

    @property
    def volcano_admission(self) -> VolcanoPodValidation | None:
        """Volcano's ``/pods/validate`` when this stack runs it (its ``denied``)."""
        for v in self.app[WRITES].validators:
            if isinstance(v, VolcanoPodValidation):
                return v
        return None

    @property
    def log(self) -> list[RequestRecord]:
        return self.app[LOG]

    @property
    def denied(self) -> list[RequestRecord]:
        """Every request RBAC refused (403)."""
        return self.app[DENIED]

    def requests(self, method: str | None = None, path_contains: str = "") -> list[RequestRecord]:
        return [
            r
            for r in self.log
            if (method is None or r.method == method) and path_contains in r.path
        ]

    async def start(self, port: int = 0) -> ApiServer:
        """Listen on ``port`` (0: any free one; :attr:`port` says which)."""
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=0.25)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port, ssl_context=self.ssl_context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        for c in self._clients:
            await c.close()
        self._clients.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ApiServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def accept(self, *tokens: str) -> ApiServer:
        """Know ``tokens`` as an administrator's static tokens (a token the server does
        not know is 401, as in a real cluster); requests without one stay the admin's."""
        for token in tokens:
            self.settings.users.setdefault(token, dict(ADMIN))
        return self

    def configuration(self, token: str | None = None) -> Configuration:
        cfg = Configuration(host=self.url)
        if token is not None:
            cfg.api_key["BearerToken"] = token
            cfg.api_key_prefix["BearerToken"] = "Bearer"
        return cfg

    def client(
        self, name: str = "", *, token: str | None = None, request_timeout: float = 10.0
    ) -> KubeClient:
        """A client over real HTTP; ``name`` goes into the :data:`CLIENT_HEADER` header.
        Closed when the server stops."""
        kube = client_for(self.configuration(token), request_timeout=request_timeout)
        if name:
            kube.api.set_default_header(CLIENT_HEADER, name)
        self._clients.append(kube)
        return kube
