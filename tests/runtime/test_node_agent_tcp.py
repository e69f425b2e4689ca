"""The node agent's TCP path (docs/node-agent.md, docs/security.md "Identity"): harmonia-agentd
--schedd tcp:HOST:PORT against a harmonia-schedd with --auth munge and a munged of the project's
own (scripts/munged.sh). The agent authenticates each of its connections with a MUNGE
credential and speaks for its ranks as one connection; when the daemon refuses the agent's
credential, the ranks register directly at once and write every byte."""

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bbio_support import BUILD
from munge_support import munged
from schedd_support import (
    SCHEDD,
    expected_bytes,
    finish,
    munge_daemon,
    start_writer,
    status,
    wait_listening,
    wait_until,
)

AGENTD = BUILD / "src" / "agent" / "harmonia-agentd"


def _why_not() -> str:
    for tool in ("munged", "mungekey"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: munge; scripts/install-deps.sh)"
    if not AGENTD.is_file() or not SCHEDD.is_file():
        return "harmonia-agentd or harmonia-schedd is not built"
    return ""


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "-")


@pytest.fixture(scope="module")
def munge() -> Iterator[tuple[str, str]]:
    """The daemon's munged, and a foreign one (a key of its own): its credentials are refused."""
    with munged("harmonia-agent-munge-", 2) as (site, foreign):
        yield site, foreign


@pytest.fixture
def schedd(tmp_path: Path, munge: tuple[str, str]) -> Iterator[tuple[Path, str]]:
    """harmonia-schedd --auth munge: its Unix socket (for status) and its TCP address."""
    unix = tmp_path / "schedd.sock"
    with munge_daemon(unix, munge[0]) as address:
        yield unix, f"tcp:{address}"


def _agent(socket_path: Path, schedd: str, munge_socket: str) -> subprocess.Popen[str]:
    agent = subprocess.Popen(
        [str(AGENTD), "--socket", str(socket_path), "--schedd", schedd],
        env={**os.environ, "HARMONIA_MUNGE_SOCKET": munge_socket},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return wait_listening(agent, socket_path, "harmonia-agentd")


def _stop(agent: subprocess.Popen[str]) -> str:
    if agent.poll() is None:
        agent.send_signal(signal.SIGTERM)
    out, _ = agent.communicate(timeout=10)
    return out


def _job(unix: Path, key: str) -> dict[str, Any]:
    return next((dict(j) for j in status(unix)["jobs"] if j["job"] == key), {})


# Each rank writes this many chunks 0.1 s apart: long enough for all three to be in their phase
# at once even when they start seconds apart on a loaded machine.
CHUNKS = 40


def _ranks(schedd: str, agent: Path, munge_socket: str, where: Path) -> list[Any]:
    """Three ranks of job T writing CHUNKS chunks of 1 MB, 0.1 s apart, through the agent; their
    own credentials come from the daemon's munged."""
    return [
        start_writer(Path(schedd), "T", where / f"r{k}", chunks=CHUNKS, pause=0.1,
                     HARMONIA_AGENT=str(agent), HARMONIA_MUNGE_SOCKET=munge_socket,
                     PMI_RANK=str(k), PMI_SIZE="3")
        for k in range(3)
    ]  # fmt: skip


def _write_through_agent(
    where: Path, schedd: tuple[Path, str], site: str, agent_munge: str, connections: int
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """_ranks through an agent whose credentials come from the munged at `agent_munge` (the
    ranks' from the daemon's, `site`), until job T shows `connections` connections in its
    phase: the job as the daemon showed it then, the ranks' results (every byte written,
    checked here) and the agent's counts."""
    unix, tcp = schedd
    agent = _agent(where / "agent.sock", tcp, agent_munge)
    try:
        ranks = _ranks(tcp, where / "agent.sock", site, where)

        def all_in_phase() -> bool:
            return _job(unix, "T").get("in_phase") == connections

        assert wait_until(all_in_phase), _job(unix, "T")
        seen = _job(unix, "T")
        results = [finish(rank) for rank in ranks]
    finally:
        counts = _stop(agent)
    for k in range(len(results)):
        assert (where / f"r{k}").read_bytes() == expected_bytes(CHUNKS)
    return seen, results, counts


def test_the_agent_authenticates_over_tcp_and_speaks_for_its_ranks(
    tmp_path: Path, schedd: tuple[Path, str], munge: tuple[str, str]
) -> None:
    # Under --auth munge an unauthenticated agent is refused (its ranks would then show as
    # three connections): one connection, in the phase, is the agent's, authenticated.
    seen, results, counts = _write_through_agent(
        tmp_path, schedd, munge[0], munge[0], 1
    )
    assert (seen["processes"], seen["ranks"]) == (1, 3), seen
    for result in results:
        assert (
            "refused" not in result["stderr"] and "directly" not in result["stderr"]
        ), result
    assert '"to_scheduler": ' in counts and '"to_scheduler": 0' not in counts, counts


def test_a_refused_credential_sends_the_ranks_to_the_daemon_directly(
    tmp_path: Path, schedd: tuple[Path, str], munge: tuple[str, str]
) -> None:
    # The agent's munged is not the daemon's: its credentials do not decode there. Each rank,
    # refused through the agent, registered itself: three connections.
    seen, results, _ = _write_through_agent(tmp_path, schedd, munge[0], munge[1], 3)
    assert seen["processes"] == 3, seen
    for result in results:
        # CHUNKS chunks 0.1 s apart take CHUNKS / 10 s (20 took 2.02 s): a phase begin left
        # waiting for an answer (a rank gives up after 1 s) would show.
        assert result["written"] - result["opened"] < CHUNKS * 0.1 + 0.7, result
        said = result["stderr"]
        assert (
            f"HARMONIA_AGENT={tmp_path / 'agent.sock'}: registration refused" in said
        ), said
        assert "speaking to the scheduler daemon directly" in said, said
