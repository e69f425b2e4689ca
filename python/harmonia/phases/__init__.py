"""I/O phase detection (docs/phase-detection.md) outside the running library: `#pragma harmonia`
markers turned into libharmonia calls (annotate), I/O loops found in C, C++ and Fortran sources
(source), I/O entry points read from an executable (binary), the accuracy of every mode against
known phases (experiment), and the commands `harmonia annotate`, `harmonia phases` and
`harmonia reproduce phases` (cli)."""
