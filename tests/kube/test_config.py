"""Finding the cluster: explicit kubeconfig, $KUBECONFIG, in-cluster (TLS, rotating
token), ~/.kube/config, and a clear error when there is nothing."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from gangplace.kube import KubeConfigError, client_for, load_configuration, new_client
from gangplace.kube.resources import NODES

from tests.kubeapi import ApiServer
from tests.kubeapi.tls import server_tls


def kubeconfig(path: Path, server: str, token: str, context: str = "test") -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
async def secured() -> AsyncIterator[ApiServer]:
    async with ApiServer(tokens=frozenset({"t1", "t2", "t3"})) as server:
        yield server


async def _nodes(cfg: object) -> None:
    kube = client_for(cfg)  # type: ignore[arg-type]
    try:
        await kube.list(NODES)
    finally:
        await kube.close()


async def test_explicit_kubeconfig(secured: ApiServer, tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", secured.url, "t1")
    async with await new_client(path, environ={}) as kube:
        await kube.list(NODES)
    assert secured.log[-1].authorization == "Bearer t1"
    assert secured.log[-1].user_agent.startswith("corral/")


async def test_kubeconfig_context_choice(secured: ApiServer, tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", secured.url, "t2", context="prod")
    await _nodes(await load_configuration(path, context="prod", environ={}))
    with pytest.raises(KubeConfigError, match=r"kubeconfig .*kc \(context 'staging'\)"):
        await load_configuration(path, context="staging", environ={})


async def test_kubeconfig_env_with_several_files(secured: ApiServer, tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", secured.url, "t2")
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(path)])}
    await _nodes(await load_configuration(environ=env))
    assert secured.log[-1].authorization == "Bearer t2"
    with pytest.raises(KubeConfigError, match=r"\$KUBECONFIG=.*none of its files exist"):
        await load_configuration(environ={"KUBECONFIG": str(tmp_path / "nope")})


async def test_home_kubeconfig_is_the_last_resort(secured: ApiServer, tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", secured.url, "t3")
    await _nodes(
        await load_configuration(environ={}, home=tmp_path, service_account_dir=tmp_path / "sa")
    )
    assert secured.log[-1].authorization == "Bearer t3"


async def test_nothing_found_says_what_was_tried(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError) as err:
        await load_configuration(environ={}, home=tmp_path, service_account_dir=tmp_path / "sa")
    msg = str(err.value)
    for part in (
        "no Kubernetes configuration found",
        "--kubeconfig: not given",
        "$KUBECONFIG: not set",
        "in-cluster: not in a cluster",
        str(tmp_path / ".kube" / "config"),
    ):
        assert part in msg


async def test_bad_explicit_paths_and_files(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match=r"--kubeconfig .*missing: no such file"):
        await load_configuration(tmp_path / "missing", environ={})
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed")
    with pytest.raises(KubeConfigError, match=r"kubeconfig .*bad"):
        await load_configuration(bad, environ={})
    empty = tmp_path / "empty"
    empty.write_text(
        yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
        )
    )
    with pytest.raises(KubeConfigError, match=r"kubeconfig .*empty"):
        await load_configuration(empty, environ={})


async def test_in_cluster_over_tls_with_a_rotating_token(tmp_path: Path) -> None:
    ctx, ca = server_tls(tmp_path / "tls")
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "ca.crt").write_bytes(ca.read_bytes())
    (sa / "token").write_text("t1\n")
    async with ApiServer(tokens=frozenset({"t1", "t2"}), ssl_context=ctx) as api:
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port)}
        cfg = await load_configuration(environ=env, service_account_dir=sa, home=tmp_path)
        assert cfg.host == api.url and cfg.ssl_ca_cert == str(sa / "ca.crt")
        kube = client_for(cfg)
        try:
            await kube.list(NODES)
            # The kubelet swaps the token file atomically; the next request carries the new one.
            (sa / "token.new").write_text("t2")
            os.replace(sa / "token.new", sa / "token")
            await kube.list(NODES)
            # A token file gone mid-rotation keeps the last good token.
            (sa / "token").unlink()
            await kube.list(NODES)
        finally:
            await kube.close()
        assert [r.authorization for r in api.log] == ["Bearer t1", "Bearer t2", "Bearer t2"]
        # The CA is checked: a client that trusts another CA cannot connect.
        _, other_ca = server_tls(tmp_path / "other")
        (sa / "token").write_text("t1")
        (sa / "ca.crt").write_bytes(other_ca.read_bytes())
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await _nodes(await load_configuration(environ=env, service_account_dir=sa))


async def test_in_cluster_errors(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    sa = tmp_path / "sa"
    sa.mkdir()
    with pytest.raises(
        KubeConfigError, match=r"in-cluster: service-account token .*token does not exist"
    ):
        await load_configuration(environ=env, service_account_dir=sa, home=tmp_path)
    (sa / "token").write_text("")
    (sa / "ca.crt").write_text("")
    with pytest.raises(KubeConfigError, match=r"CA bundle .*ca.crt does not exist or is empty"):
        await load_configuration(environ=env, service_account_dir=sa, home=tmp_path)
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(KubeConfigError, match=r"token .*token is empty"):
        await load_configuration(environ=env, service_account_dir=sa, home=tmp_path)
    (sa / "token").write_text("tok")
    cfg = await load_configuration(environ=env, service_account_dir=sa, home=tmp_path)
    assert cfg.host == "https://10.0.0.1:443"
    v6 = await load_configuration(
        environ={**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}, service_account_dir=sa
    )
    assert v6.host == "https://[fd00::1]:443"


async def test_precedence(secured: ApiServer, tmp_path: Path) -> None:
    """An explicit path beats $KUBECONFIG, which beats in-cluster and ~/.kube/config."""
    explicit = kubeconfig(tmp_path / "explicit", secured.url, "t1")
    env_file = kubeconfig(tmp_path / "env", secured.url, "t2")
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", secured.url, "t3")
    env = {
        "KUBECONFIG": str(env_file),
        "KUBERNETES_SERVICE_HOST": "10.9.9.9",
        "KUBERNETES_SERVICE_PORT": "1",
    }
    await _nodes(await load_configuration(explicit, environ=env, home=tmp_path))
    await _nodes(await load_configuration(environ=env, home=tmp_path))
    assert [r.authorization for r in secured.log] == ["Bearer t1", "Bearer t2"]


def _service_account(folder: Path) -> Path:
    folder.mkdir()
    (folder / "token").write_text("pod-token")
    (folder / "ca.crt").write_text("not read before a request")
    (folder / "namespace").write_text("corral-system")
    return folder


async def test_in_cluster_beats_home_but_not_for_a_person(
    secured: ApiServer, tmp_path: Path
) -> None:
    """The components prefer the pod's service account; kubectl corral, like kubectl,
    prefers a ~/.kube/config the user wrote, even inside a pod."""
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", secured.url, "t3")
    sa = _service_account(tmp_path / "sa")
    env = {"KUBERNETES_SERVICE_HOST": "10.9.9.9", "KUBERNETES_SERVICE_PORT": "443"}
    pod = await load_configuration(environ=env, home=tmp_path, service_account_dir=sa)
    assert pod.host == "https://10.9.9.9:443"
    person = await load_configuration(
        environ=env, home=tmp_path, service_account_dir=sa, prefer_kubeconfig=True
    )
    await _nodes(person)
    assert [r.authorization for r in secured.log] == ["Bearer t3"]
