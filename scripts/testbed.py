#!/usr/bin/env python3
"""Hosts of their own on one machine: Linux network namespaces joined through a bridge.

    scripts/testbed.py up NAME [--config examples/testbed/testbed.toml]   # prints the hosts (JSON)
    scripts/testbed.py down NAME
    scripts/testbed.py show NAME

`up` makes one namespace per host (NAME-schedd0, NAME-bb0.., NAME-c0..) and one for the switch
(NAME-sw, holding the bridge), a veth pair from each host into the bridge, the host's address
from the configuration's private subnet, and tc shaping of both ends of every link (tbf at the
configured rate; netem for the latency when the kernel has it, else said). Nothing is attached
to the machine's own namespace, so traffic cannot leave the machine. What it made is recorded in
/run/harmonia-testbed/NAME.json; `down` removes exactly that (deleting a namespace deletes its
veth ends) and the record. Both are idempotent: `up` of a test bed that exists tears it down
first; `down` of one that does not exist does nothing. Root only.
"""

import argparse
import ipaddress
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

STATE = Path("/run/harmonia-testbed")
NAME = re.compile(
    r"^[a-z][a-z0-9]{0,7}$"
)  # short: interface names are at most 15 bytes
RATE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit)$")
TIME = re.compile(r"^\d+(\.\d+)?(us|ms|s)$")
SIZE = re.compile(r"^\d+(b|kb|mb)$")


class TestbedError(Exception):
    pass


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise TestbedError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done


def load(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise TestbedError(f"{path}: {error}") from error
    bed, link = data.get("testbed", {}), data.get("link", {})
    for key in set(data) - {"testbed", "link"}:
        raise TestbedError(f"{path}: unknown table [{key}]")
    known = {"subnet", "first_host", "schedulers", "buffer_nodes", "compute_hosts"}
    for key in set(bed) - known:
        raise TestbedError(f"{path}: testbed.{key}: unknown key")
    for key in set(link) - {"rate", "latency", "burst"}:
        raise TestbedError(f"{path}: link.{key}: unknown key")
    try:
        subnet = ipaddress.ip_network(bed.get("subnet", "10.203.0.0/24"))
    except ValueError as error:
        raise TestbedError(f"{path}: testbed.subnet: {error}") from error
    if not subnet.is_private or subnet.version != 4:
        raise TestbedError(
            f"{path}: testbed.subnet: {subnet} is not a private IPv4 network"
        )
    counts = {}
    for key, default in (("schedulers", 1), ("buffer_nodes", 4), ("compute_hosts", 2)):
        value = bed.get(key, default)
        if not isinstance(value, int) or not 0 <= value <= 32:
            raise TestbedError(
                f"{path}: testbed.{key}: expected an integer from 0 to 32"
            )
        counts[key] = value
    first = bed.get("first_host", 10)
    if (
        not isinstance(first, int)
        or first < 1
        or first + sum(counts.values()) >= subnet.num_addresses - 1
    ):
        raise TestbedError(
            f"{path}: testbed.first_host: the hosts do not fit in {subnet}"
        )
    shaping = {"rate": link.get("rate", "1gbit"), "latency": link.get("latency", "0ms"),
               "burst": link.get("burst", "64kb")}  # fmt: skip
    for key, pattern, example in (("rate", RATE, "1gbit"), ("latency", TIME, "0.2ms"),
                                  ("burst", SIZE, "64kb")):  # fmt: skip
        if not isinstance(shaping[key], str) or not pattern.match(shaping[key]):
            raise TestbedError(
                f"{path}: link.{key}: {shaping[key]!r}: expected e.g. {example!r}"
            )
    return {"subnet": subnet, "first": first, "counts": counts, "link": shaping}


def has_netem() -> bool:
    """Whether the kernel has sch_netem (delay): tried on a throw-away dummy link."""
    probe = "hmnetemprobe"
    run("ip", "netns", "add", probe, check=False)
    try:
        run("ip", "-n", probe, "link", "add", "d0", "type", "dummy")
        return run("tc", "-n", probe, "qdisc", "add", "dev", "d0", "root", "netem", "delay",
                   "1ms", check=False).returncode == 0  # fmt: skip
    except TestbedError:
        return False
    finally:
        run("ip", "netns", "del", probe, check=False)


def _seconds(text: str) -> float:
    number = float(re.sub(r"[a-z]+$", "", text))
    return number * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[re.sub(r"^[\d.]+", "", text)]


def shape(namespace: str, device: str, link: dict[str, str], netem: bool) -> None:
    """Egress of `device`: netem delay (when there is any and the kernel has it) above a tbf."""
    tbf = ["tbf", "rate", link["rate"], "burst", link["burst"], "latency", "100ms"]
    if netem and _seconds(link["latency"]) > 0:
        run("tc", "-n", namespace, "qdisc", "add", "dev", device, "root", "handle", "1:", "netem",
            "delay", link["latency"])  # fmt: skip
        run("tc", "-n", namespace, "qdisc", "add", "dev", device, "parent", "1:1", "handle",
            "10:", *tbf)  # fmt: skip
    else:
        run("tc", "-n", namespace, "qdisc", "add", "dev", device, "root", *tbf)


def down(name: str) -> list[str]:
    record = STATE / f"{name}.json"
    if not record.exists():
        return []
    made = json.loads(record.read_text())["namespaces"]
    for namespace in made:
        run("ip", "netns", "del", namespace, check=False)
    record.unlink()
    return list(made)


def up(name: str, config: Path) -> dict[str, Any]:
    settings = load(config)
    down(name)
    netem = has_netem()
    STATE.mkdir(parents=True, exist_ok=True)
    switch = f"{name}-sw"
    hosts: list[dict[str, str]] = []
    made: list[str] = []
    record = STATE / f"{name}.json"

    def remember() -> None:
        record.write_text(json.dumps({"namespaces": made}) + "\n")

    try:
        run("ip", "netns", "add", switch)
        made.append(switch)
        remember()
        run("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", switch, "link", "set", "br0", "up")
        run("ip", "-n", switch, "link", "set", "lo", "up")
        index = settings["first"]
        prefix = settings["subnet"].prefixlen
        for role, key in (
            ("schedd", "schedulers"),
            ("bb", "buffer_nodes"),
            ("c", "compute_hosts"),
        ):
            for k in range(settings["counts"][key]):
                namespace = f"{name}-{role}{k}"
                address = str(settings["subnet"].network_address + index)
                index += 1
                run("ip", "netns", "add", namespace)
                made.append(namespace)
                remember()
                # The pair is made inside the switch's namespace and one end moved to the host's:
                # it never exists in the machine's own namespace.
                port = f"p-{role}{k}"
                run("ip", "-n", switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                    "netns", namespace)  # fmt: skip
                run("ip", "-n", switch, "link", "set", port, "master", "br0")
                run("ip", "-n", switch, "link", "set", port, "up")
                run("ip", "-n", namespace, "link", "set", "lo", "up")
                run(
                    "ip",
                    "-n",
                    namespace,
                    "addr",
                    "add",
                    f"{address}/{prefix}",
                    "dev",
                    "eth0",
                )
                run("ip", "-n", namespace, "link", "set", "eth0", "up")
                shape(namespace, "eth0", settings["link"], netem)  # host -> switch
                shape(switch, port, settings["link"], netem)  # switch -> host
                hosts.append({"role": role, "namespace": namespace, "address": address,
                              "switch_port": port})  # fmt: skip
    except TestbedError:
        down(name)
        raise
    description = {"name": name, "hosts": hosts, "link": settings["link"],
                   "latency_applied": netem or _seconds(settings["link"]["latency"]) == 0,
                   "config": str(config)}  # fmt: skip
    record.write_text(json.dumps({"namespaces": made, **description}) + "\n")
    if not netem:
        print(f"testbed {name}: this kernel has no sch_netem: links are shaped to "
              f"{settings['link']['rate']} but get no added latency", file=sys.stderr)  # fmt: skip
    return description


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "down", "show"))
    parser.add_argument(
        "name", help="a short name: a lowercase letter, then up to 7 of [a-z0-9]"
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "examples/testbed/testbed.toml",
    )
    args = parser.parse_args()
    if not NAME.match(args.name):
        print(f"testbed: name {args.name!r}: a lowercase letter, then up to 7 of [a-z0-9]",
              file=sys.stderr)  # fmt: skip
        return 2
    if os.geteuid() != 0:
        print("testbed: network namespaces need root", file=sys.stderr)
        return 2
    try:
        if args.action == "up":
            print(json.dumps(up(args.name, args.config), indent=2))
        elif args.action == "down":
            removed = down(args.name)
            print(f"testbed {args.name}: removed {len(removed)} namespaces")
        else:
            record = STATE / f"{args.name}.json"
            print(
                record.read_text()
                if record.exists()
                else f"testbed {args.name}: not up"
            )
    except TestbedError as error:
        print(f"testbed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
