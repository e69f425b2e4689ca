#!/usr/bin/env bash
# Installs what building, testing and running Harmonia needs: Debian packages (only those
# missing, so a prepared machine pays nothing) and the Python venv in .venv. slurmctld, slurmd,
# slurm-client and munge (with slurm-wlm-basic-plugins: burst_buffer_lua.so) run
# `harmonia cluster` and tests/slurm.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libsimgrid-dev libns3-dev nlohmann-json3-dev
          libcli11-dev libgtest-dev libbenchmark-dev libxxhash-dev clang-format clang-tidy fio openmpi-bin
          libopenmpi-dev libprotobuf-dev protobuf-compiler libprotobuf-c-dev protobuf-c-compiler gfortran
          sqlite3 strace rsync ccache slurmctld slurmd slurm-client munge libmunge-dev iproute2)
packages+=(lua5.1 lua-posix lua-cjson slurmdbd mariadb-server)  # burst_buffer.lua, cluster --accounting
# The site file (toml++), the metrics endpoint (cpp-httplib); packages and their tests (CPack's
# dpkg-shlibdeps, debootstrap and systemd-nspawn: make package-test).
packages+=(libtomlplusplus-dev libcpp-httplib-dev dpkg-dev debootstrap systemd-container)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}"
fi

if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
# Reinstall only when the package metadata changed since the last install.
stamp=.venv/.harmonia-installed
if [[ ! -f $stamp || python/pyproject.toml -nt $stamp ]]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e "python[dev]"
  touch "$stamp"
fi
