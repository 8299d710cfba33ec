"""Every configuration kind the loader knows, from the modules that define them.

DOC: one module per kind family defines its kinds and a `KINDS` dict: `agentconfig`
(AgentConfig), `static` (StaticRoutes), `policy` (RoutePolicy), `bgp` (BgpPeer, BgpSpeaker),
`advertisement` (Advertisement), `bfd` (BfdProfile). This leaf module joins them for the loader, the Kubernetes
source and the CRD generator. `RouteAgentNodeState` (`nodestate`) is written, never read as
configuration, so it is not here.
"""

from .advertisement import KINDS as _ADVERTISEMENT
from .agentconfig import KINDS as _AGENT
from .bfd import KINDS as _BFD
from .bgp import KINDS as _BGP
from .policy import KINDS as _POLICY
from .static import KINDS as _STATIC

KINDS = {**_AGENT, **_STATIC, **_POLICY, **_BGP, **_ADVERTISEMENT, **_BFD}
