"""The state directory is private: 0700 (also when it existed before), files in it 0600."""

import os
import stat

import pytest

from agent.config.loader import ConfigError
from agent.daemon.agent import Agent


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    old = os.umask(0o022)  # the usual default: files 0644, directories 0755
    yield
    os.umask(old)


async def _run_until_kubernetes_fails(tmp_path, state):
    # cluster mode without credentials fails right after the state directory is prepared
    agent = Agent(None, kubernetes=True, kubeconfig=str(tmp_path / "missing"), node_name="n",
                  state_dir=str(state), api_port=0)
    with pytest.raises(ConfigError):
        await agent.run()


async def test_an_existing_state_dir_and_its_files_are_made_private(tmp_path, umask, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    state = tmp_path / "state"
    speaker = state / "speaker"
    speaker.mkdir(parents=True)
    os.chmod(state, 0o755)
    os.chmod(speaker, 0o755)
    env = speaker / "exabgp.env"
    env.write_text("")
    assert mode(env) == 0o644
    await _run_until_kubernetes_fails(tmp_path, state)
    assert (mode(state), mode(speaker), mode(env)) == (0o700, 0o700, 0o600)
    # what the agent writes there from now on is 0600 (as the speaker writes its pid file)
    pid = speaker / "exabgp.pid"
    pid.write_text("1\n")
    assert mode(pid) == 0o600


async def test_a_new_state_dir_is_created_0700(tmp_path, umask, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    state = tmp_path / "run" / "route-agent"
    await _run_until_kubernetes_fails(tmp_path, state)
    assert mode(state) == 0o700
