"""Configuration: every kind's model, reading YAML files, the rules between objects, the CRDs.

DOC: the package owns the schema of the agent's configuration, modelled once in pydantic and
used for both sources: YAML files standalone, CRDs in a cluster. Modules:

* `base`: field types, the model base, `Resource` (apiVersion/kind/metadata/spec), `Metadata`,
  `LabelSelector`, error helpers;
* one module per kind family: `agentconfig` (AgentConfig), `static` (StaticRoutes), `bgp`
  (BgpPeer, BgpSpeaker, MD5 secret files), `policy` (RoutePolicy), `advertisement`
  (Advertisement), `nodestate` (RouteAgentNodeState, written not read); `kinds` joins them;
* `resolve`: the whole `Config`, the rules between objects, one node's view, RIB inputs;
* `yamldoc` (YAML parsing with bounds on size, depth and aliases, and line numbers),
  `fieldpath` (pydantic errors as YAML field paths), `files` (bounded, non-blocking reads of
  regular files: configuration files, MD5 password files) and `loader` (files to a validated
  `Config` or every `Problem`, never any other exception);
* `crds` (kind names, CRD documents and files) and `crd_schema` (pydantic JSON schema to a
  structural CRD schema); `reference` (``docs/configuration.md`` from the same schemas).

May import: `agent.policy`, `agent.import`/`agent.export`, `agent.fib`, `agent.core` (the layers
below; see `.importlinter`); never the daemon, the API, Kubernetes, the sources or the speaker.
Import the modules themselves: this package re-exports nothing.
"""
