#!/usr/bin/env bash
# The whole thing, locally (make demo): three masters and a backend on
# 127.0.0.1, a real 20,000-row Lance dataset, and real IVF_PQ and BTREE index
# builds driven through the full lifecycle to COMMITTED with refresh DONE.
#
#   deploy/local/demo.sh        (make demo: builds and installs the builder first)
#   deploy/local/cluster.sh down   (make demo-down: stop everything, delete the state)
#
# Needs bin/lancemaster (make build), node >= 20 and builders/lancedb/node_modules
# (npm ci; make setup). Everything listens on 127.0.0.1 only.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
state="$here/.state"
bin=${LANCEMASTER_BIN:-$root/bin/lancemaster}
export LANCEMASTER_ADDR=127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203
lake="$state/lake"

step() { printf '\n==> %s\n' "$*"; }
die() { echo "demo.sh: $*" >&2; exit 1; }
lm() { "$bin" --timeout 60s "$@"; }

[ -x "$bin" ] || die "no binary at $bin: run 'make build'"
[ -d "$root/builders/lancedb/node_modules/@lancedb/lancedb" ] || die "the builder is not installed: run 'make setup'"

if compgen -G "$state/*.pid" >/dev/null; then
  step "stopping the demo cluster of an earlier run and deleting its state (make demo starts fresh)"
  "$here/cluster.sh" down
fi

step "starting three masters and one backend"
"$here/cluster.sh" up

step "writing a sample dataset: $lake/db/items.lance (20,000 rows: id, 128-dim float32 vector, text)"
mkdir -p "$lake/db"
node "$root/builders/lancedb/make-dataset.js" "$lake/db" items --rows 20000 --dim 128 --overwrite

step "registering the catalog and the backend; asserting local files are shared with the one backend"
lm catalogs create lake --root "$lake"
lm backends add 127.0.0.1:7401
lm config set enable_lance_index_local_file_mutation true

step "what the backend sees"
lm datasets inspect lake.db.items

admit() { # prints the job id of an admission
  local out
  out=$(lm -o json jobs create-index "$@") || return 1
  sed -n 's/.*"job_id": *\([0-9][0-9]*\).*/\1/p' <<<"$out" | head -n 1
}

step "admitting an IVF_PQ index on vector and a BTREE index on id"
ivf=$(admit lake.db.items vec_ivfpq --column vector --type IVF_PQ \
  --property metric=l2 --property num_partitions=32 --property num_sub_vectors=16 --property num_bits=4)
btree=$(admit lake.db.items id_btree --column id --type BTREE)
[ -n "$ivf" ] && [ -n "$btree" ] || die "admission did not answer job ids"
echo "IVF_PQ job $ivf, BTREE job $btree"

step "watching them to COMMITTED and refresh DONE"
lm jobs watch "$ivf" "$btree" --interval 500ms --timeout-total 150s

step "jobs list"
lm jobs list

step "checking through inspect that both indexes exist"
out=$(lm datasets inspect lake.db.items)
echo "$out"
grep -q 'vec_ivfpq *IVF_PQ' <<<"$out" || die "vec_ivfpq is not in the dataset"
grep -q 'id_btree *BTREE' <<<"$out" || die "id_btree is not in the dataset"

cat <<MSG

The demo ran end to end. The cluster is still up:
  export LANCEMASTER_ADDR=$LANCEMASTER_ADDR
  $bin jobs list
  $bin backends list
The read-only web console (every master serves it): http://127.0.0.1:7301/ui/
Stop it and delete its state with: make demo-down
MSG
