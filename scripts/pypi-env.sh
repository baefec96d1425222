# shellcheck shell=bash
# The project's virtual environments from PyPI (PyTorch 2.x with CUDA: 5.7 GB; the wheel's build
# tools), made once per machine and requirement set in a per-user cache, and linked from where
# the checkout expects them (.venv/torch2, build-wheel/tools). Sourced by scripts/setup.sh and
# tests/packaging/test_wheel.sh.
#
# Why a cache: every fresh clone (CI's is one) would otherwise download gigabytes again, and
# could not run at all while PyPI cannot be reached, although the same environment already sits
# on the machine. The cache is keyed by the interpreter and the exact requirement list, so a new
# pin makes a new environment (never an upgrade in place under another checkout's feet); an
# environment counts only once pip has finished in it (a marker written last), and it is made
# under a lock, so that two checkouts setting up at once make it once. Like pre-commit's and
# tox's environments, it lives under $XDG_CACHE_HOME:
#
#   DDPRUN_CACHE_DIR   (${XDG_CACHE_HOME:-$HOME/.cache}/ddprun)   the cache; venvs/NAME-KEY in it
#
# Removing a directory of venvs/ is always safe: the next setup makes it again (from PyPI).

ddprun_cache_dir() {
  local home=${HOME:-}
  [ -n "$home" ] || home=$(getent passwd "$(id -u)" | cut -d: -f6)
  echo "${DDPRUN_CACHE_DIR:-${XDG_CACHE_HOME:-$home/.cache}/ddprun}"
}

# pypi_env_path NAME PYTHON REQUIREMENT...: where the cache keeps (or will keep) that environment.
pypi_env_path() {
  local name=$1 python=$2
  shift 2
  local key
  key=$({
    "$python" -c 'import sys; print(sys.version)'
    realpath "$python"
    printf '%s\n' "$@"
  } | sha256sum | cut -c1-16)
  echo "$(ddprun_cache_dir)/venvs/$name-$key"
}

# pypi_env LINK NAME PYTHON REQUIREMENT...: makes LINK a symbolic link to the cached environment
# for these requirements, making that environment first (python -m venv, pip install) when the
# cache does not hold a complete one. What LINK was before (an old environment of the checkout,
# a link to another pin) is replaced. Fails, saying so, when pip fails (PyPI out of reach).
pypi_env() {
  local link=$1 name=$2 python=$3
  shift 3
  local env
  env=$(pypi_env_path "$name" "$python" "$@")
  local marker=$env/.ddprun-complete
  mkdir -p "$(dirname "$env")"
  (
    # Released when this subshell ends, however it ends.
    exec 9>"$env.lock"
    flock 9
    if [ ! -f "$marker" ]; then
      # A directory without the marker is an install that was interrupted: start again.
      rm -rf "$env"
      echo "pypi-env: making $env from PyPI: $*"
      local started=$SECONDS
      "$python" -m venv "$env"
      if ! "$env/bin/pip" install -q --disable-pip-version-check "$@"; then
        echo "pypi-env: pip could not install $* into $env (is PyPI reachable?)" >&2
        rm -rf "$env"
        exit 1
      fi
      printf '%s\n' "$@" >"$marker"
      echo "pypi-env: $env made in $((SECONDS - started)) s"
    fi
  ) || return 1
  if [ -L "$link" ] || [ -e "$link" ]; then
    rm -rf "$link"
  fi
  mkdir -p "$(dirname "$link")"
  ln -s "$env" "$link"
  echo "pypi-env: $link -> $env"
}
