"""The scheduling policies `harmonia-sim` implements, by the names the CLI and results use.

`POLICIES` (the baseline and the Harmonia paper's policies, what "all" means) comes from the C++
registry through `harmonia-describe`, asked the first time it is read.
"""

from harmonia.names import policy_names


def __getattr__(name: str) -> tuple[str, ...]:
    if name == "POLICIES":
        return policy_names("baseline", "harmonia")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_policies(spec: str) -> list[str]:
    """Turn ``"all"`` or a comma-separated list of policy names into a list of names.

    Duplicates are dropped, the order given is kept. Raises ValueError for an unknown name.
    """
    paper = policy_names("baseline", "harmonia")
    if spec.strip() == "all":
        return list(paper)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise ValueError(
            f'no policy given in "{spec}" (use "all" or names from: {", ".join(paper)})'
        )
    for name in names:
        if name not in policy_names():
            raise ValueError(f'unknown policy "{name}" (known: all, {", ".join(policy_names())})')
    return list(dict.fromkeys(names))
