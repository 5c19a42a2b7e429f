"""Recordings of a real control plane, and replaying them against the in-memory API server.

A recording (``tests/recordings/*.json``, copied from the handout) is a list of
requests with the real server's answers, plus objects observed along the way.
:class:`Replay` sends the same requests over real HTTP to an
:class:`~tests.kubeapi.ApiServer`, and :func:`assert_same` compares the answers after
:func:`normalise` has masked what differs from run to run (uids, resourceVersions,
timestamps, generated names, the node chosen): status codes, Status reasons and messages,
conditions, phases, deletionTimestamp, ownerReferences, finalizers and status fields must
be equal.

The control plane's other actors (kube-scheduler, the kubelet loop, the controllers) are
played by the test between steps: ``Replay.run(before={...})`` calls a hook before the
named step, and :meth:`Replay.settle` runs the replay's ``controllers`` (step functions
over the store, see :mod:`tests.kubeapi.kubelet`) until none has anything left to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tests.kubeapi.server import ApiServer
from tests.kubeapi.store import ApiStore

Json = dict[str, Any]

__all__ = [
    "ADMIN_TOKEN",
    "HANDOUT_RECORDINGS",
    "Answer",
    "Controller",
    "Observation",
    "Recording",
    "Replay",
    "Step",
    "assert_same",
    "differences",
    "load",
    "node",
    "normalise",
    "recordings_dir",
]

REPO = Path(__file__).resolve().parents[2]
# The project's copy (tests/recordings/README.md); the handout's, when it is beside the
# checkout, is checked to be the same by tests/contract/test_recordings_copy.py.
RECORDINGS = REPO / "tests" / "recordings"
HANDOUT_RECORDINGS = REPO.parent / "shared" / "recordings"

# The bearer token the replay's "admin" sends when the server authenticates (a static token
# of the server, allowed everything, like the recording's system:masters certificate).
ADMIN_TOKEN = "replay-admin-token"

# Keys whose values vary between runs: compared for presence, not value.
VARYING = frozenset(
    {
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "lastTransitionTime",
        "lastProbeTime",
        "lastHeartbeatTime",
        "lastUpdateTime",
        "startTime",
        "completionTime",
        "startedAt",
        "finishedAt",
        "renewTime",
        "acquireTime",
        "expirationTimestamp",
        "eventTime",
        "firstTimestamp",
        "lastTimestamp",
        "transitionID",
        "count",
        "nodeName",
        "token",
    }
)
# A disruptedPods map is keyed by pod name, valued by a time.
_TIME_MAPS = frozenset({"disruptedPods"})
_GENERATED_VOLUME = re.compile(r"\bkube-api-access-[a-z0-9]{5}\b")
_TOO_OLD = re.compile(r"too old resource version: (\d+) \((\d+)\)")


def recordings_dir() -> Path:
    """The recordings of a real control plane, as the project keeps them."""
    if not RECORDINGS.is_dir():
        raise FileNotFoundError(f"{RECORDINGS}: the recordings of a real control plane are missing")
    return RECORDINGS


@dataclass(frozen=True, slots=True)
class Step:
    index: int
    do: str
    t: float
    method: str
    path: str
    body: Any
    as_: str
    content_type: str
    status: int
    response: Any  # the body, or None for a watch
    stream: list[Json] | None
    headers: Mapping[str, str]

    @property
    def is_watch(self) -> bool:
        return self.stream is not None


@dataclass(frozen=True, slots=True)
class Observation:
    after: str
    t: float
    object: Any
    what: str


@dataclass(frozen=True, slots=True)
class Recording:
    name: str
    title: str
    what: str
    steps: tuple[Step, ...]
    observed: tuple[Observation, ...]
    notes: tuple[str, ...]

    def step(self, do: str) -> Step:
        """The one step whose ``do`` starts with ``do``."""
        found = [s for s in self.steps if s.do.startswith(do)]
        if len(found) != 1:
            raise KeyError(f"{self.name}: {len(found)} steps start with {do!r}")
        return found[0]

    def observation(self, after: str) -> Observation:
        """The first observation whose ``after`` starts with ``after``."""
        for o in self.observed:
            if o.after.startswith(after):
                return o
        raise KeyError(f"{self.name}: no observation after {after!r}")

    def namespaces(self) -> list[str]:
        """Namespaces the recording's requests use and which existed (not the subject of a
        namespace 404)."""
        missing = {
            s.response["details"]["name"]
            for s in self.steps
            if s.status == 404
            and isinstance(s.response, dict)
            and (s.response.get("details") or {}).get("kind") == "namespaces"
        }
        seen: list[str] = []
        for s in self.steps:
            m = re.search(r"/namespaces/([^/?]+)", s.path)
            if m and m.group(1) not in missing and m.group(1) not in seen:
                seen.append(m.group(1))
        return seen


def load(name: str) -> Recording:
    """A recording by name (``eviction-created``)."""
    path = recordings_dir() / f"{name}.json"
    raw = json.loads(path.read_text())
    steps = []
    for i, s in enumerate(raw["steps"]):
        req, resp = s["request"], s["response"]
        steps.append(
            Step(
                index=i,
                do=s["do"],
                t=float(s.get("t") or 0.0),
                method=req["method"],
                path=req["path"],
                body=req.get("body"),
                as_=req.get("as", "admin"),
                content_type=req.get("contentType", ""),
                status=int(resp["status"]),
                response=resp.get("body"),
                stream=resp.get("stream"),
                headers=resp.get("headers") or {},
            )
        )
    observed = tuple(
        Observation(
            o.get("after", ""), float(o.get("t") or 0.0), o.get("object"), o.get("what", "")
        )
        for o in raw.get("observed") or ()
    )
    return Recording(
        name, raw["title"], raw["what"], tuple(steps), observed, tuple(raw.get("notes") or ())
    )


# --- normalising and comparing ----------------------------------------------------------


def normalise(obj: Any, names: Mapping[str, str] | None = None) -> Any:
    """``obj`` with what varies between runs masked: values of :data:`VARYING` keys become
    ``"<set>"`` (null stays null), generated volume names and the N of "too old resource
    version" are masked, ``metadata.managedFields`` goes, and every string equal to (or
    quoting) a key of ``names`` gets its value instead (generated names, chosen nodes)."""
    subs = dict(names or {})

    def text(s: str) -> str:
        s = _GENERATED_VOLUME.sub("kube-api-access-<gen>", s)
        s = _TOO_OLD.sub(lambda m: f"too old resource version: {m.group(1)} (<N>)", s)
        if s in subs:
            return subs[s]
        for old, new in subs.items():
            s = s.replace(f'"{old}"', f'"{new}"')
        return s

    def walk(x: Any, key: str = "") -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k == "managedFields":
                    continue
                if k in VARYING and v is not None and not isinstance(v, (dict, list)):
                    out[k] = "<set>"
                elif k in _TIME_MAPS and isinstance(v, dict):
                    out[k] = {text(n): "<set>" for n in v}
                else:
                    out[k] = walk(v, k)
            return out
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, str):
            return text(x)
        return x

    return walk(copy.deepcopy(obj))


def _drop(obj: Any, path: str) -> None:
    """Remove a dotted path (``status.qosClass``; ``*`` for every list item) from obj."""
    head, _, rest = path.partition(".")
    if isinstance(obj, list):
        if head == "*":
            for item in obj:
                _drop(item, rest)
        return
    if not isinstance(obj, dict) or head not in obj:
        return
    if rest:
        _drop(obj[head], rest)
    else:
        del obj[head]


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Every place where ``actual`` differs from ``expected``, one line each."""
    out: list[str] = []
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in expected.keys() | actual.keys():
            p = f"{path}.{k}" if path else k
            if k not in actual:
                out.append(f"{p}: missing (recorded {_short(expected[k])})")
            elif k not in expected:
                out.append(f"{p}: not recorded, got {_short(actual[k])}")
            else:
                out.extend(differences(expected[k], actual[k], p))
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(differences(e, a, f"{path}[{i}]"))
    elif expected != actual:
        out.append(f"{path or '<root>'}: recorded {_short(expected)}, got {_short(actual)}")
    return sorted(out)


def _short(x: Any) -> str:
    s = orjson.dumps(x).decode()
    return s if len(s) <= 300 else s[:297] + "..."


def assert_same(
    recorded: Any,
    actual: Any,
    *,
    names: Mapping[str, str] | None = None,
    ignore: Iterable[str] = (),
    what: str = "",
) -> None:
    """Fail, listing every difference, unless ``actual`` is what was recorded once both are
    normalised. ``ignore`` names dotted paths left out on both sides: each is a known,
    stated difference of the fake (the test says why)."""
    exp, act = normalise(recorded, names), normalise(actual, names)
    for p in ignore:
        _drop(exp, p)
        _drop(act, p)
    diffs = differences(exp, act)
    if diffs:
        head = f"{what}: " if what else ""
        raise AssertionError(
            f"{head}the in-memory API server differs from the recording:\n  " + "\n  ".join(diffs)
        )


# --- replaying --------------------------------------------------------------------------

# A controller: one pass over the store, returning how many writes it made.
Controller = Callable[[ApiStore], int]
Hook = Callable[["Replay"], Awaitable[None] | None]


@dataclass(slots=True)
class Answer:
    status: int
    body: Any  # JSON, or the raw text when it is not JSON
    headers: Mapping[str, str]
    lines: list[bytes] = field(default_factory=list)  # a watch's streamed lines

    @property
    def events(self) -> list[Json]:
        return [orjson.loads(line) for line in self.lines if line.strip()]


def node(name: str, gpus: int = 8) -> Json:
    """A Ready node as the recordings' (32 CPUs, 256Gi, ``gpus`` GPUs)."""
    cap = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": dict(cap),
            "allocatable": dict(cap),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


class Replay:
    """Replays a :class:`Recording` against ``api`` over HTTP. ``controllers`` are what
    :meth:`settle` runs (the kubelet model, the Job controller...). Requests ``as`` a
    ServiceAccount carry the token the fake minted at the recording's TokenRequest step."""

    NODES = ("n1", "n2", "n3")

    def __init__(
        self,
        recording: Recording,
        api: ApiServer,
        *,
        controllers: Sequence[Controller] = (),
    ) -> None:
        self.recording = recording
        self.api = api
        self.controllers = list(controllers)
        self.answers: dict[int, Answer] = {}
        self.tokens: dict[str, str] = {}  # "serviceaccount:NS/NAME" -> token
        self.names: dict[str, str] = {n: "<node>" for n in self.NODES}
        self.values: dict[str, str] = {}  # recorded uid/resourceVersion -> this run's
        self._session: aiohttp.ClientSession | None = None

    @property
    def store(self) -> ApiStore:
        return self.api.store

    async def __aenter__(self) -> Replay:
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def setup(self, extra: Iterable[Json] = ()) -> None:
        """The recording's cluster before its first step: nodes n1..n3 (32 cpu, 256Gi, 8
        GPUs, Ready), the namespaces it uses, and ``extra`` objects."""
        ns = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
            for n in self.recording.namespaces()
        ]
        self.store.load([*(node(n) for n in self.NODES), *ns, *extra])

    def settle(self, rounds: int = 50) -> int:
        """Run the controllers until none writes anything; how many writes they made."""
        total = 0
        for _ in range(rounds):
            n = sum(c(self.store) for c in self.controllers)
            total += n
            if not n:
                return total
        raise AssertionError(f"the controllers did not settle in {rounds} rounds")

    def bind(self, namespace: str, name: str, node: str = "n1") -> None:
        """What a scheduler does once it has chosen: POST the pod's Binding."""
        self.store.bind(
            namespace,
            name,
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )

    def bind_all(self, node: str = "n1", scheduler: str = "default-scheduler") -> int:
        """Bind every unbound pod of ``scheduler`` to ``node`` (kube-scheduler's part in
        the recordings where where a pod lands does not matter); how many."""
        n = 0
        for pod in list(self.store.items(self.store.resource("pods"))):
            spec, meta = pod.get("spec") or {}, pod["metadata"]
            if not spec.get("nodeName") and spec.get("schedulerName") == scheduler:
                self.bind(meta["namespace"], meta["name"], node)
                n += 1
        return n

    def get(self, plural: str, namespace: str, name: str, group: str = "") -> Json:
        """An object as the store holds it now."""
        return self.store.get(self.store.resource(plural, group), namespace, name)

    @asynccontextmanager
    async def watching(self, path: str) -> AsyncIterator[list[Json]]:
        """``async with r.watching("/api/v1/namespaces/x/pods?watch=1") as events:`` --
        the events a watch of ``path`` (as admin) streams while the block runs, read until
        a moment after it ends."""
        assert self._session is not None, "use `async with Replay(...)`"
        events: list[Json] = []
        resp = await self._session.get(
            self.api.url + path, headers={"Accept": "application/json", **self._auth("admin")}
        )

        async def read() -> None:
            async for line in resp.content:
                if line.strip():
                    events.append(orjson.loads(line))

        task = asyncio.create_task(read())
        try:
            yield events
            await asyncio.sleep(0.05)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await task
            resp.close()

    def _auth(self, as_: str) -> dict[str, str]:
        if as_ == "admin":
            return {"Authorization": f"Bearer {ADMIN_TOKEN}"} if self.api.settings.tokens else {}
        m = re.fullmatch(r"bearer token '(.*)'", as_)
        if m:
            return {"Authorization": f"Bearer {m.group(1)}"}
        if as_ in self.tokens:
            return {"Authorization": f"Bearer {self.tokens[as_]}"}
        raise KeyError(f"no token for {as_!r}: replay its TokenRequest step first")

    async def send(
        self,
        step: Step,
        *,
        path: str | None = None,
        body: Any = ...,
        watch_seconds: float = 5.0,
    ) -> Answer:
        """Send a step's request (``path``/``body`` override the recorded ones, e.g. a
        resourceVersion of this run) and return the answer; a watch is read until the
        server ends it or ``watch_seconds`` pass."""
        assert self._session is not None, "use `async with Replay(...)`"
        headers = {"Accept": "application/json", **self._auth(step.as_)}
        payload = self.translate(step.body) if body is ... else body
        data = None
        if payload is not None:
            data = orjson.dumps(payload)
            headers["Content-Type"] = step.content_type or "application/json"
        url = self.api.url + (path or step.path)
        async with self._session.request(step.method, url, data=data, headers=headers) as r:
            if step.is_watch:
                lines: list[bytes] = []
                try:
                    async with asyncio.timeout(watch_seconds):
                        async for line in r.content:
                            lines.append(line)
                except TimeoutError:
                    pass
                answer = Answer(r.status, None, dict(r.headers), lines)
            else:
                raw = await r.read()
                try:
                    parsed: Any = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    parsed = raw.decode(errors="replace")
                answer = Answer(r.status, parsed, dict(r.headers))
        self.answers[step.index] = answer
        self._learn(step, answer)
        return answer

    def _learn(self, step: Step, answer: Answer) -> None:
        """Keep what later steps need: a minted token, generated names."""
        if step.path.endswith("/token") and answer.status == 201 and isinstance(answer.body, dict):
            m = re.search(r"/namespaces/([^/]+)/serviceaccounts/([^/]+)/token", step.path)
            token = (answer.body.get("status") or {}).get("token")
            if m and token:
                self.tokens[f"serviceaccount:{m.group(1)}/{m.group(2)}"] = token
        self._pair(step.response, answer.body)

    def _pair(self, recorded: Any, mine: Any) -> None:
        """Walk a recorded answer beside this run's: learn which uid and resourceVersion
        of this run stand for the recorded ones, and the generated names."""
        if isinstance(recorded, dict) and isinstance(mine, dict):
            for k in ("uid", "resourceVersion"):
                a, b = recorded.get(k), mine.get(k)
                if isinstance(a, str) and isinstance(b, str):
                    self.values[a] = b
                    if k == "uid" and a not in self.names:
                        # A uid also appears as a value (controller-uid labels, selectors).
                        self.names[a] = self.names[b] = f"<uid-{len(self.values)}>"
            if recorded.get("generateName") and recorded.get("name") and mine.get("name"):
                placeholder = f"{recorded['generateName']}<gen>"
                self.names[recorded["name"]] = placeholder
                self.names[mine["name"]] = placeholder
            for k, v in recorded.items():
                if k in mine:
                    self._pair(v, mine[k])
        elif isinstance(recorded, list) and isinstance(mine, list) and len(recorded) == len(mine):
            for a, b in zip(recorded, mine, strict=True):
                self._pair(a, b)

    def translate(self, body: Any) -> Any:
        """A recorded request body with the recording's uids and resourceVersions replaced
        by this run's (a PUT of what was read, a precondition)."""
        if isinstance(body, dict):
            return {
                k: self.values.get(v, v)
                if k in ("uid", "resourceVersion") and isinstance(v, str)
                else self.translate(v)
                for k, v in body.items()
            }
        if isinstance(body, list):
            return [self.translate(v) for v in body]
        return body

    def check(self, step: Step, answer: Answer, *, ignore: Iterable[str] = ()) -> None:
        """The answer has the recorded status code and (normalised) body."""
        where = f"{self.recording.name} step {step.index} ({step.do})"
        assert answer.status == step.status, (
            f"{where}: status {answer.status}, recorded {step.status}: {_short(answer.body)}"
        )
        if not step.is_watch:
            assert_same(step.response, answer.body, names=self.names, ignore=ignore, what=where)

    async def run(
        self,
        *,
        before: Mapping[int | str, Hook] | None = None,
        ignore: Mapping[int | str, Iterable[str]] | None = None,
        check: bool = True,
        until: int | None = None,
    ) -> dict[int, Answer]:
        """Replay every step (up to, not including, index ``until``), calling
        ``before[key]`` first where ``key`` is the step's index or a prefix of its ``do``,
        and checking each answer unless ``check`` is false. ``ignore`` lists per step the
        paths left out of the comparison."""
        hooks = before or {}
        ignores = ignore or {}
        for step in self.recording.steps[:until]:
            for key, hook in hooks.items():
                if _selects(key, step):
                    result = hook(self)
                    if inspect.isawaitable(result):
                        await result
            answer = await self.send(step)
            if check:
                skip = [p for key, ps in ignores.items() if _selects(key, step) for p in ps]
                self.check(step, answer, ignore=skip)
        return self.answers


def _selects(key: int | str, step: Step) -> bool:
    return key == step.index if isinstance(key, int) else step.do.startswith(key)
