#!/usr/bin/env bash
# Sets up a throwaway promotions repository from examples/promotions (once), then runs the controller
# against the embedded management cluster described by examples/fleet.yaml. Extra arguments go to
# `tollgate run` (e.g. --log debug). The repository path is printed; commit to it to roll out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repo=${TOLLGATE_DEMO_REPO:-${TMPDIR:-/tmp}/tollgate-demo}
if [ ! -d "$repo/.git" ]; then
  mkdir -p "$repo"
  cp "$root"/examples/promotions/*.yaml "$repo"/
  git -C "$repo" init -q -b main
  git -C "$repo" add .
  git -C "$repo" -c user.name="Demo User" -c user.email=demo@example.com commit -qm "Initial promotions"
fi
echo "promotions repository: $repo"
cd "$root"
# TOLLGATE_BIN: an already built binary (the walkthrough test uses its own build).
bin=${TOLLGATE_BIN:-}
if [ -z "$bin" ]; then
  echo "building tollgate (release; the first build takes a few minutes, cargo shows its progress)"
  cargo build --release --locked
  bin="${CARGO_TARGET_DIR:-target}"/release/tollgate
fi
# The embedded mode writes its own kubeconfig (one per run) and prints the lines that reach it;
# a KUBECONFIG in this shell is not read.
exec "$bin" run --repo "$repo" --branch main --embedded examples/fleet.yaml --log info "$@"
