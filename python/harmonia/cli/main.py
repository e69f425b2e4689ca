"""The `harmonia` typer application."""

import typer

from harmonia.buffers.cli import up
from harmonia.cli.bench import bench
from harmonia.cli.cluster import cluster
from harmonia.cli.demo import demo
from harmonia.cli.describe import describe
from harmonia.cli.import_darshan import import_darshan
from harmonia.cli.ping import ping
from harmonia.cli.profile import profile_device
from harmonia.cli.recover import recover
from harmonia.cli.replay import replay_command
from harmonia.cli.report import report
from harmonia.cli.reproduce import reproduce
from harmonia.cli.run import run
from harmonia.cli.schedd import schedd
from harmonia.cli.sim import sim
from harmonia.cli.status import status
from harmonia.cli.sweep import sweep
from harmonia.cli.validate import validate
from harmonia.forwarding.cli import fwdsim
from harmonia.network.cli import netsim
from harmonia.phases.cli import annotate_command, phases

app = typer.Typer(
    help="Harmonia: interference-aware burst-buffer I/O scheduling.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
app.command()(validate)
app.command()(sim)
app.command()(demo)
app.command()(report)
app.add_typer(reproduce, name="reproduce")
app.command()(recover)
app.command(name="profile")(profile_device)
app.command(name="annotate")(annotate_command)
app.command()(phases)
app.command()(bench)
app.command(name="import-darshan")(import_darshan)
app.command()(schedd)
app.command(context_settings={"allow_interspersed_args": False})(run)
app.command()(status)
app.command()(ping)
app.command()(up)
app.command()(netsim)
app.command(name="replay")(replay_command)
app.command()(fwdsim)
app.command()(describe)
app.add_typer(cluster, name="cluster")
app.command()(sweep)
