"""The scheduling policies `harmonia-sim` implements, by the names the CLI and results use.

The names come from the C++ registry through `harmonia-describe`, asked the first time one is
read: `POLICIES` (the baseline and the Harmonia paper's policies, what "all" means), `PEERS`
(published schedulers that came after Harmonia, docs/scheduling-model.md section 8) and
`EVERY_POLICY` (every registered policy: both, and `auto`, section 9).
"""

from harmonia.names import policy_names

_GROUPS = {
    "POLICIES": ("baseline", "harmonia"),
    "PEERS": ("peer",),
    "EVERY_POLICY": (),
}


def __getattr__(name: str) -> tuple[str, ...]:
    if name in _GROUPS:
        return policy_names(*_GROUPS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_policies(spec: str) -> list[str]:
    """Turn ``"all"`` (the paper's policies), ``"peers"``, ``"every"`` (both, and auto) or a
    comma-separated list of policy names and groups into a list of names.

    Duplicates are dropped, the order given is kept. Raises ValueError for an unknown name.
    """
    every = policy_names()
    groups = {
        "all": policy_names(*_GROUPS["POLICIES"]),
        "peers": policy_names(*_GROUPS["PEERS"]),
        "every": every,
    }
    names: list[str] = []
    for name in (part.strip() for part in spec.split(",")):
        if name:
            names += groups.get(name, (name,))
    if not names:
        raise ValueError(
            f'no policy given in "{spec}" (use "all", "peers", "every" or names from: '
            f"{', '.join(every)})"
        )
    for name in names:
        if name not in every:
            raise ValueError(
                f'unknown policy "{name}" (known: all, peers, every, {", ".join(every)})'
            )
    return list(dict.fromkeys(names))
