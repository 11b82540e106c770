# Sourced by scripts/serve.sh and scripts/test.sh, from the repository root.
#
# ensure_venv [EXTRA]: .venv/ with the project installed into it (editable, with the optional
# dependencies EXTRA, e.g. "test"), installing only when needed: when there is no .venv yet,
# or when pyproject.toml (or the checkout's place) changed since the last install. The stamp
# .venv/.installed-<EXTRA or base> records what was installed; an install for "test" also
# serves the base. Otherwise nothing is installed and nothing is fetched.
ensure_venv() {
  local extra=${1:-} want
  want="$(cksum < pyproject.toml) $PWD"
  if _installed "${extra:-base}" "$want" || { [ -z "$extra" ] && _installed test "$want"; }; then
    return 0
  fi
  if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv || return
    .venv/bin/python -m pip install -q --upgrade pip || return
  fi
  .venv/bin/python -m pip install -q -e ".${extra:+[$extra]}" || return  # no stamp: the next start retries
  printf '%s\n' "$want" > ".venv/.installed-${extra:-base}"
}

_installed() {  # NAME WANT: the stamp NAME says WANT, and the venv's Python is there
  [ -x .venv/bin/python ] && [ -f ".venv/.installed-$1" ] && [ "$(cat ".venv/.installed-$1")" = "$2" ]
}
