"""Test and benchmark fixtures, outside the shipped `agent` package.

DOC: `netns` (network namespaces, interfaces, polling with deadlines, starting the real agent),
`bird` (BIRD 2 peers with their own config and control socket), `k8sapi` (an in-process
Kubernetes API server: list/watch, resourceVersions, bookmarks, 410, status, RBAC call record),
`rbac` (evaluates `deploy/rbac.yaml` like the API server does), `demo` (what `scripts/demo.sh`
runs), and the benchmarks' lab: `benchlab` (two namespaces, a BIRD peer, agent and ExaBGP
start-up, repeats and the last-line JSON), `fibwatch` (the kernel route watcher process),
`feed` (an Internet-like table and the BIRD configuration announcing it), `procstat` (CPU, RSS
and write counters from /proc), `tables` (reads the CLI's text tables back, checking that
they line up). Used by `tests/`, `netns-tests/`, `bench/` and the demo; never imported by `agent`.
"""
