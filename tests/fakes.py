"""A fake netlink of plain dicts (Cilium keeps one like it): applies ops to a table and counts writes.

Like the kernel it keeps one route of ours per prefix *and metric*: `routes` holds the latest one
per prefix (what most tests look at), `others` the further ones at other metrics."""

import errno

from agent.fib.types import Op, OpError, OpKind


class FakeNetlink:
    def __init__(self, routes=None, fail=None):
        self.routes = dict(routes or {})  # prefix -> KernelRoute (ours)
        self.others = {}  # prefix -> {metric: KernelRoute}: more of ours on that prefix
        self.writes = 0
        self.fail = fail or {}  # prefix -> errno
        self.log = []  # every op applied, in order

    def table(self):
        """Every route of ours: {(prefix, metric): route}."""
        out = {(p, r.metric): r for p, r in self.routes.items()}
        out.update({(p, m): r for p, more in self.others.items() for m, r in more.items()})
        return out

    def apply(self, ops):
        errors = []
        for op in ops:
            self.writes += 1
            if op.prefix in self.fail:
                errors.append(OpError(op, self.fail[op.prefix], "injected"))
                continue
            self.log.append(op)
            prefix, metric = op.prefix, op.route.metric
            cur = self.routes.get(prefix)
            more = self.others.get(prefix, {})
            if op.kind == OpKind.DELETE:
                if cur is not None and cur.metric == metric:
                    del self.routes[prefix]
                    if more:  # another metric of ours remains the route for this prefix
                        self.routes[prefix] = more.pop(min(more))
                else:
                    more.pop(metric, None)  # absent: success
            elif op.kind == OpKind.ADD and ((cur is not None and cur.metric == metric) or metric in more):
                errors.append(OpError(op, errno.EEXIST, "File exists"))
            elif metric in more:  # replace of a route at another metric than the latest
                more[metric] = op.route
            else:
                if cur is not None and cur.metric != metric:
                    self.others.setdefault(prefix, {})[cur.metric] = cur
                self.routes[prefix] = op.route
            if prefix in self.others and not self.others[prefix]:
                del self.others[prefix]
        return errors
