"""Every configuration kind the loader knows, from the modules that define them.

DOC: the base kinds live in `agent.config`; RoutePolicy in `agent.policy_models`; BgpPeer and
BgpSpeaker in `agent.speaker.models`; Advertisement in `agent.export.models`. Those modules build on `agent.config`, so the registry that
joins them is this separate leaf module (imported by the loader only).
"""

from .base import KINDS as _BASE
from .advertisement import KINDS as _EXPORT
from .policy import KINDS as _POLICY
from .bgp import KINDS as _SPEAKER

KINDS = {**_BASE, **_POLICY, **_SPEAKER, **_EXPORT}
