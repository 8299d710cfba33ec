"""A fake netlink of plain dicts (Cilium keeps one like it): applies ops to a table and counts writes."""

import errno

from agent.fib.types import Op, OpError, OpKind


class FakeNetlink:
    def __init__(self, routes=None, fail=None):
        self.routes = dict(routes or {})  # prefix -> KernelRoute (ours)
        self.writes = 0
        self.fail = fail or {}  # prefix -> errno

    def apply(self, ops):
        errors = []
        for op in ops:
            self.writes += 1
            if op.prefix in self.fail:
                errors.append(OpError(op, self.fail[op.prefix], "injected"))
                continue
            if op.kind == OpKind.DELETE:
                self.routes.pop(op.prefix, None)
            elif op.kind == OpKind.ADD and op.prefix in self.routes and self.routes[op.prefix].metric == op.route.metric:
                errors.append(OpError(op, errno.EEXIST, "File exists"))
            else:
                self.routes[op.prefix] = op.route
        return errors
