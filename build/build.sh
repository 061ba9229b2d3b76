#!/usr/bin/env bash
# build/build.sh — build the ONE-FILE sidecar binary dist/metona-sidecar with PyInstaller, then smoke-test it.
#
#   bash build/build.sh            # ≈2–3 min cold on this machine kind; re-builds reuse build/work/
#   bash build/build.sh --clean    # throw build/work away first
#
# Spec: build/metona-sidecar.spec (what is in/out of the binary, and why it starts fast).
# Output dirs (git-ignored): dist/ and build/work/.
# Knobs (see the spec): METONA_BUILD_ENTRY, METONA_COMPRESS, METONA_STRIP, METONA_BUNDLE_NODE.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VPY="$ROOT/.venv/bin/python"
[[ -x "$VPY" ]] || { echo "[build] ERROR: .venv missing; run: bash scripts/setup" >&2; exit 1; }
"$VPY" -c "import PyInstaller" 2>/dev/null || { echo "[build] ERROR: PyInstaller not in .venv (the 'build' extra); run: bash scripts/setup" >&2; exit 1; }

clean=()
[[ "${1:-}" == "--clean" ]] && clean=(--clean)

t0=$(date +%s.%N)
echo "[build] pyinstaller build/metona-sidecar.spec -> dist/metona-sidecar" >&2
"$VPY" -m PyInstaller --noconfirm "${clean[@]}" --log-level WARN \
    --workpath "$ROOT/build/work" --distpath "$ROOT/dist" "$ROOT/build/metona-sidecar.spec" >&2
t1=$(date +%s.%N)
BIN="$ROOT/dist/metona-sidecar"
size=$(stat -c %s "$BIN")
echo "[build] built $BIN: $((size / 1048576)) MiB ($size bytes) in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}') s" >&2

# Smoke test: one ping from a clean environment in another directory. The real sidecar answers
# {"jsonrpc":"2.0","result":{},"id":1}; a stand-in entry (METONA_BUILD_ENTRY) answers the same shape.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
answer="$(cd "$tmp" && printf '{"jsonrpc":"2.0","id":1,"method":"ping"}\n' \
    | env -i PATH=/usr/bin:/bin HOME="$tmp" timeout 60 "$BIN" --data-dir "$tmp/data" 2>"$tmp/stderr" | head -n1)" || true
if ! printf '%s' "$answer" | "$VPY" -c 'import json,sys; m=json.loads(sys.stdin.read()); sys.exit(not (m.get("id")==1 and "result" in m))' 2>/dev/null; then
    echo "[build] ERROR: smoke test failed: ping answered: ${answer:-<nothing>}" >&2
    tail -n 30 "$tmp/stderr" >&2 || true
    exit 1
fi
echo "[build] smoke test OK: $answer" >&2

# Frozen self-test: every bundled core library exercised inside the binary (a ping imports none of them).
if [[ -z "${METONA_BUILD_ENTRY:-}" ]]; then
    if ! (cd "$tmp" && METONA_FROZEN_SELFTEST=1 timeout 300 "$BIN" >"$tmp/selftest.out" 2>"$tmp/selftest.err"); then
        echo "[build] ERROR: frozen self-test failed:" >&2
        grep '"ok": false' "$tmp/selftest.out" >&2 || tail -n 30 "$tmp/selftest.err" >&2
        exit 1
    fi
    echo "[build] frozen self-test OK ($(grep -c '"ok": true' "$tmp/selftest.out") checks)" >&2
fi
echo "[build] start time: .venv/bin/python scripts/bench/bench_binary_start.py --runs 10" >&2
