"""The Kubernetes adapter: API client, one reflector per resource, status and Event writer.

DOC: the thin I/O layer of cluster mode. It builds one `kubernetes.client.ApiClient` (in-cluster
service account when ``KUBERNETES_SERVICE_HOST`` is set, else a kubeconfig: ``--kubeconfig``,
``$KUBECONFIG`` or ``~/.kube/config``) and starts a `Reflector` (list, then watch; relist and
mark-and-sweep on 410 Gone; reconnect with backoff; bookmarks) for each resource of
`agent.k8s.cluster.RESOURCES`: the six routeagent.io configuration kinds, all Nodes (this node's
labels, pod CIDRs and addresses; the others' pod CIDRs for the guard), Services, EndpointSlices and
ServiceCIDRs. Objects are reduced at ingest (`agent.k8s.objects`) so 10,000 Services cost a few
megabytes. Batches go to `put` from the reflector threads; the agent's core task applies them to
its `ClusterState`.

Writes go through one writer thread, never the core task, so a slow API server cannot stall
routing:

* `publish_status(status)`: a JSON patch replacing ``status`` of ``routeagentnodestates/<node>``
  as a whole; the object is created (``spec.nodeName``) when it does not exist, owned by the Node
  (an ``ownerReference`` with the Node's uid, read with one GET: the garbage collector deletes it
  with the Node, and deploy/admission-policy.yaml checks that the owner is the writing agent's own
  node). The agent calls it at a bounded rate (every
  `STATUS_SECONDS` at most, and only when something changed), and a newer status replaces one
  still queued.
* `event(reason, message, warning)`: a core/v1 Event about the Node (in namespace ``default``,
  where kubelet puts node events; ``involvedObject`` with the Node's uid, so ``kubectl describe
  node`` lists it), e.g. ``BgpSessionUp``, ``BgpSessionDown``,
  ``MaxPrefixExceeded``. The same reason and message is sent at most once per `EVENT_REPEAT`
  seconds (a flapping session must not flood the API server).

This node's RouteAgentNodeState is watched too (a reflector with a ``metadata.name`` field
selector, its batches are not cluster resources): when someone deletes it, the agent writes it
again at once instead of at the next status change.

Calls the agent makes, which `deploy/rbac.yaml` must allow (tested against the test API server's
record): list/watch of every resource above; get of its Node; create/get/list/watch of
routeagentnodestates; patch of routeagentnodestates/status; create of events.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.client.rest import ApiException

from . import objects
from .cluster import CONFIG_RESOURCES, GROUP, RESOURCES, VERSION
from .reflector import Reflector

log = logging.getLogger("route_agent.k8s")

STATUS_SECONDS = 10.0
EVENT_REPEAT = 60.0
MAX_PENDING_EVENTS = 100  # Event writes waiting for a slow or hung API server; more are dropped
EVENT_NAMESPACE = "default"
NODE_STATE = "routeagentnodestates"
WRITE_TIMEOUT = (10, 30)  # connect, read: a hung API server must not hold the writer thread for ever


def api_client(kubeconfig: str | None = None) -> kclient.ApiClient:
    cfg = kclient.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        kconfig.load_incluster_config(client_configuration=cfg)
    else:
        kconfig.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    # one open watch per reflector plus the writer: the default pool (5 per CPU) can be too small
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 2 * len(RESOURCES) + 2)
    return kclient.ApiClient(cfg)


class KubeSource:
    def __init__(self, node_name: str, put: Callable[[object], None], *, kubeconfig: str | None = None,
                 watch_timeout: int = 300) -> None:
        self.node_name = node_name
        self.api = api_client(kubeconfig)
        core = kclient.CoreV1Api(self.api)
        custom = kclient.CustomObjectsApi(self.api)
        self.custom = custom
        self.core = core
        specs: list[tuple[str, Callable, Callable | None]] = [
            (plural, functools.partial(custom.list_cluster_custom_object, GROUP, VERSION, plural), None)
            for plural in CONFIG_RESOURCES
        ]
        specs += [
            ("nodes", core.list_node, objects.node_from),
            ("services", core.list_service_for_all_namespaces, objects.service_from),
            ("endpointslices", kclient.DiscoveryV1Api(self.api).list_endpoint_slice_for_all_namespaces,
             objects.slice_from),
            ("servicecidrs", kclient.NetworkingV1Api(self.api).list_service_cidr, objects.service_cidrs_from),
        ]
        self.reflectors = [
            Reflector(name, fn, put, **({"transform": tf} if tf else {}), watch_timeout=watch_timeout)
            for name, fn, tf in specs
        ]
        # this node's own RouteAgentNodeState: deleted -> written again at once (KubeSync.handle)
        self.reflectors.append(Reflector(
            NODE_STATE, functools.partial(custom.list_cluster_custom_object, GROUP, VERSION, NODE_STATE),
            put, transform=lambda obj: obj["metadata"]["name"], watch_timeout=watch_timeout,
            list_kwargs={"field_selector": f"metadata.name={node_name}"}))
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="k8s-writer")
        self._lock = threading.Lock()
        self._pending_status: dict | None = None
        self._status_queued = False
        self._state_created = False
        self._node_uid: str | None = None  # of this node's Node object, for owner and Event references
        self._events_sent: dict[tuple[str, str], float] = {}
        self.status_writes = 0
        self.write_errors = 0
        self._events_pending = 0
        self.events_dropped = 0  # Events not written because MAX_PENDING_EVENTS were waiting

    def start(self) -> None:
        for r in self.reflectors:
            r.start()

    def stop(self) -> None:
        for r in self.reflectors:
            r.stop()
        self._writer.shutdown(wait=False, cancel_futures=True)

    # ---- status ----
    def publish_status(self, status: dict) -> None:
        with self._lock:
            self._pending_status = status
            if self._status_queued:
                return  # the queued write will take the newest status
            self._status_queued = True
        self._writer.submit(self._write_status)

    def _write_status(self) -> None:
        with self._lock:
            status, self._pending_status = self._pending_status, None
            self._status_queued = False
        if status is None:
            return
        try:
            if not self._state_created:
                self._ensure_state()
            # a JSON patch replacing the whole status: a merge patch would keep keys of an older
            # status that the new one no longer has (advertised.ipv4 of a peer since removed)
            self.custom.patch_cluster_custom_object_status(
                GROUP, VERSION, "routeagentnodestates", self.node_name,
                [{"op": "add", "path": "/status", "value": status}],
                _content_type="application/json-patch+json", _request_timeout=WRITE_TIMEOUT)
            self.status_writes += 1
        except ApiException as exc:
            if exc.status == 404:
                self._state_created = False  # deleted meanwhile: created again next time
            self.write_errors += 1
            log.warning("status update failed: %s %s", exc.status, exc.reason)
        except Exception as exc:  # the API server is away: the next period tries again
            self.write_errors += 1
            log.warning("status update failed: %s", exc)

    def _read_node_uid(self) -> str:
        """The uid of this node's Node (a GET; raises when the API server cannot say)."""
        self._node_uid = self.core.read_node(self.node_name).metadata.uid
        return self._node_uid

    def state_deleted(self) -> None:
        """The RouteAgentNodeState was deleted: the next status write creates it again."""
        self._state_created = False

    def _ensure_state(self) -> None:
        # read again each time: a Node deleted and registered again has a new uid (and the old
        # state object went with the old Node)
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": self._read_node_uid()}
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RouteAgentNodeState",
                "metadata": {"name": self.node_name, "labels": {"app.kubernetes.io/name": "route-agent"},
                             "ownerReferences": [owner]},
                "spec": {"nodeName": self.node_name}}
        try:
            self.custom.create_cluster_custom_object(GROUP, VERSION, "routeagentnodestates", body,
                                                     _request_timeout=WRITE_TIMEOUT)
        except ApiException as exc:
            if exc.status != 409:  # 409: it exists (an earlier run of this agent)
                raise
        self._state_created = True

    # ---- events ----
    def event(self, reason: str, message: str, warning: bool = False) -> None:
        now = time.monotonic()
        key = (reason, message)
        if now - self._events_sent.get(key, -EVENT_REPEAT) < EVENT_REPEAT:
            return
        self._events_sent[key] = now
        if len(self._events_sent) > 1000:
            self._events_sent = {k: t for k, t in self._events_sent.items() if now - t < EVENT_REPEAT}
        with self._lock:
            if self._events_pending >= MAX_PENDING_EVENTS:
                # the API server is slow or hung: Events are informational, routing must not
                # queue them without bound (the status object carries the current state)
                self.events_dropped += 1
                return
            self._events_pending += 1
        self._writer.submit(self._write_event, reason, message, warning)

    def _write_event(self, reason: str, message: str, warning: bool) -> None:
        try:
            self._create_event(reason, message, warning)
        finally:
            with self._lock:
                self._events_pending -= 1

    def _event_node_uid(self) -> str | None:
        """The Node's uid for an Event's involvedObject (without it `kubectl describe node`, which
        selects events by uid, does not show the Event); None if it cannot be read now."""
        if self._node_uid is None:
            try:
                self._read_node_uid()
            except Exception as exc:  # the Event is still worth sending
                log.debug("node uid not known for an event: %s", exc)
        return self._node_uid

    def _create_event(self, reason: str, message: str, warning: bool) -> None:
        stamp = datetime.datetime.now(datetime.timezone.utc)
        body = kclient.CoreV1Event(
            metadata=kclient.V1ObjectMeta(generate_name=f"{self.node_name}.route-agent.",
                                          namespace=EVENT_NAMESPACE),
            involved_object=kclient.V1ObjectReference(kind="Node", name=self.node_name, api_version="v1",
                                                      uid=self._event_node_uid()),
            reason=reason, message=message[:1024], type="Warning" if warning else "Normal",
            source=kclient.V1EventSource(component="route-agent", host=self.node_name),
            reporting_component="route-agent", reporting_instance=socket.gethostname(),
            first_timestamp=stamp, last_timestamp=stamp, count=1)
        try:
            self.core.create_namespaced_event(EVENT_NAMESPACE, body, _request_timeout=WRITE_TIMEOUT)
        except Exception as exc:
            self.write_errors += 1
            log.warning("event %s not recorded: %s", reason, exc)
