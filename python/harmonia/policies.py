"""The scheduling policies `harmonia-sim` implements, by the names the CLI and results use."""

POLICIES: tuple[str, ...] = (
    "datawarp",
    "max-buffer-efficiency",
    "priority",
    "max-bandwidth",
    "fairness",
    "min-stall",
)


def parse_policies(spec: str) -> list[str]:
    """Turn ``"all"`` or a comma-separated list of policy names into a list of names.

    Duplicates are dropped, the order given is kept. Raises ValueError for an unknown name.
    """
    if spec.strip() == "all":
        return list(POLICIES)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise ValueError(
            f'no policy given in "{spec}" (use "all" or names from: {", ".join(POLICIES)})'
        )
    for name in names:
        if name not in POLICIES:
            raise ValueError(f'unknown policy "{name}" (known: all, {", ".join(POLICIES)})')
    return list(dict.fromkeys(names))
