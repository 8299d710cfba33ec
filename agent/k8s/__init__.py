"""Kubernetes adapters: the thin layer between the official `kubernetes` client and the agent.

DOC: `reflector` lists and watches one resource in a daemon thread and hands batches of changed
objects (plain dicts turned into the consumer's values) to a callback; `testapi` is an in-process
API server speaking the same HTTP the client uses, for tests and benchmarks.
"""
