"""The daemon: wires the stages of the data flow into one running agent and owns its event loop.

Owns: the composition root (`agent`: builds and starts everything, shutdown), the core task
(`core`: the one event queue's consumer and dispatcher; `events`: the bounded queue), the routing
state and its handlers (`routing`), the FIB writer thread hand-off and retries (`writer`), the
standalone config reload (`reload`), the Kubernetes commit path (`kube`), the node status
(`status`), `explain`, the read view the API sees (`view`), task supervision (`supervise`), the
private state directory (`statedir`) and the BGP runtime (`bgp`; `bgp_config`: what a BgpPeer
means for its parts; `bgp_views`: its read-only views).

May import every layer below it (see .importlinter): api, k8s, sources, speaker, config,
import/export, policy, fib, core. Nothing but `agent.cli` imports it. Only `agent.daemon.agent`
loads the keyword-named `agent.import` package; the others get it handed in.
"""
