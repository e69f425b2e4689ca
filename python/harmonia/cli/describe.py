"""`harmonia describe`: the policies, coordination strategies and request schedulers this build
registers, with their settings' defaults (from `harmonia-describe`, the one source of names)."""

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harmonia.cli import EXIT_FAILED, fail
from harmonia.names import described
from harmonia.simulator import SimulatorNotFound


def describe(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print harmonia-describe's JSON.")
    ] = False,
    settings: Annotated[
        bool,
        typer.Option(
            help="List the daemons' settings instead (harmonia.toml keys, options, defaults, "
            "ranges; docs/configuration.md)."
        ),
    ] = False,
    markdown: Annotated[
        bool, typer.Option(help="With --settings: as the Markdown table of the docs.")
    ] = False,
) -> None:
    """List the policies by family, the coordination strategies and flush orders, and the request
    schedulers with their options, defaults and ranges; or, with --settings, every setting of
    harmonia-schedd and harmonia-bbd."""
    try:
        names = described()
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    if as_json:
        typer.echo(json.dumps(names, indent=1))
        return
    console = Console()
    if settings:
        if markdown:
            typer.echo(settings_markdown(names["settings"]), nl=False)
            return
        table = Table(title=escape("Settings ([table] key in harmonia.toml, option, variable)"))
        for column in ("key", "option", "variable", "default", "range", "what"):
            table.add_column(column)
        for s in names["settings"]:
            table.add_row(s["key"], s["flag"], s["environment"], _default(s), _range(s), s["help"])
        console.print(table)
        return
    policies = Table(title="Burst-buffer policies (harmonia sim --policies, harmonia up --policy)")
    policies.add_column("policy")
    policies.add_column("family")
    for policy in names["policies"]:
        policies.add_row(policy["name"], policy["family"])
    console.print(policies)
    defaults = Table(title=escape("Policy settings ([scheduler] in a scenario)"))
    defaults.add_column("setting")
    defaults.add_column("default", justify="right")
    for key, value in names["scheduler_defaults"].items():
        defaults.add_row(key, str(value))
    console.print(defaults)
    coordination = names["coordination"]
    strategies = Table(title=escape("Coordination (harmonia-schedd, the [schedd] site table)"))
    strategies.add_column("setting")
    strategies.add_column("choices or default")
    strategies.add_row("strategy", ", ".join(coordination["strategies"]))
    strategies.add_row("flush_order", ", ".join(coordination["flush_orders"]))
    for key, value in coordination["defaults"].items():
        strategies.add_row(key, str(value))
    console.print(strategies)
    schedulers = Table(title="Request schedulers (harmonia fwdsim: schedulers, options)")
    schedulers.add_column("scheduler")
    schedulers.add_column("option")
    schedulers.add_column("default", justify="right")
    schedulers.add_column("range", justify="right")
    for scheduler in names["request_schedulers"]:
        if not scheduler["options"]:
            schedulers.add_row(scheduler["name"], "", "", "")
        for k, option in enumerate(scheduler["options"]):
            maximum = "" if option["max"] >= 2**64 - 1 else str(option["max"])
            schedulers.add_row(
                scheduler["name"] if k == 0 else "",
                option["name"],
                "required" if option.get("required") else str(option["default"]),
                f"{option['min']}..{maximum}",
            )
    console.print(schedulers)


def _range(setting: dict[str, Any]) -> str:
    """A setting's choices or range, as the docs table shows it."""
    if setting.get("choices"):
        return ", ".join(setting["choices"])
    if "min" not in setting:
        return ""
    low, high = setting["min"], setting["max"]
    if setting["type"] == "size":
        return f">= {int(low)}" if high >= 2**62 else f"{int(low)}..{int(high)}"
    return f"{_number(low)}..{_number(high)}"


def _number(value: float) -> str:
    """A bound as written: whole numbers in full (a uid, not 4.29497e+09)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _default(setting: dict[str, Any]) -> str:
    default = str(setting["default"])
    if default == "" and setting["type"] == "integer" and setting["unit"]:
        return str(setting["unit"])  # an integer left unset: the code decides
    if setting["type"] in ("string", "choice"):
        return json.dumps(default)
    return default if default != "" else "none"


def settings_markdown(settings: list[dict[str, Any]]) -> str:
    """The daemons' settings as the Markdown table of docs/configuration.md."""
    daemons = {("harmonia-schedd",): "schedd", ("harmonia-bbd",): "bbd"}
    lines = [
        "| key | option | daemons | type | default | range | what |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in settings:
        unit = f" ({s['unit']})" if s["unit"] in ("seconds", "bytes", "bytes/s") else ""
        cells = [
            f"`{s['key']}`",
            f"`{s['flag']}`" + (" (repeatable)" if s.get("repeatable") else ""),
            daemons.get(tuple(s["daemons"]), "both"),
            s["type"] + unit,
            f"`{_default(s)}`",
            _range(s),
            s["help"].replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
