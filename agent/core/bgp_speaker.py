"""What the speaker says about itself and about the commands it was given (typed events).

DOC: the companions of `agent.core.bgp`'s events that the speaker's supervisor and API channel
(`agent.speaker.process`, `agent.speaker.channel`) add, rather than the codec: frozen, slotted
values like the others.

* `SpeakerDown(reason)`: ExaBGP died or was stopped. It comes before the ``PeerState(down)`` the
  supervisor emits for each peer whose session was connected or up, so a consumer knows those
  sessions ended because the speaker did, not because the peer went away (the reason text is for
  people only).
* `CommandAck(command, ok)`: ExaBGP's ``done`` / ``error`` matched to the command it answers.
* `CommandsDropped(commands, reason)`: commands that were queued and will never reach ExaBGP
  (the queue reached its bound): whoever sent them must plan again.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bgp import Command


@dataclass(frozen=True, slots=True)
class SpeakerDown:
    """ExaBGP is gone (exited, killed, stopped, or its API connection closed)."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class CommandAck:
    """ExaBGP's answer to `command`: ``done`` (`ok`) or ``error``. ``done`` also answers commands
    that changed nothing."""

    command: Command | str
    ok: bool


@dataclass(frozen=True, slots=True)
class CommandsDropped:
    """Queued commands that were thrown away, in the order they were sent."""

    commands: tuple[Command | str, ...]
    reason: str = ""
