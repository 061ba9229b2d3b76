#!/usr/bin/env bash
# build/build.sh — build what the app ships, with PyInstaller, then smoke-test it. The app bundles dist/metona/:
#   dist/metona/metona-sidecar    the sidecar's executable (the process the app spawns), a ONE-FOLDER build with
#   dist/metona/_internal/        its libraries (core only; nothing is unpacked on start)
#   dist/metona/metona-engines/   the ONE-FOLDER engines beside the executable: faster-whisper/ctranslate2, torch +
#                                 pyannote, openvino, with the models ready (Whisper tiny.en/base, diarization
#                                 weights, the local model already converted); the sidecar starts its transcription
#                                 and local-model workers from here
# Both carry the same build id (build/build_id.py): the sidecar refuses engines from another build.
#
#   bash build/build.sh            # cold: a few minutes (the engines' analysis of torch dominates); re-builds reuse
#                                  # build/work/
#   bash build/build.sh --clean    # throw the work dirs away first
#
# Specs: build/metona-sidecar.spec (what is in/out of the one-file binary, and why it starts fast) and
# build/metona-engines.spec; the models come from where scripts/setup put them (build/engines_models.py: nothing is
# downloaded). Output dirs (git-ignored): dist/ and build/work/.
# Knobs (see the specs): METONA_BUILD_ENTRY, METONA_STRIP, METONA_BUNDLE_NODE;
# METONA_BUILD_ENGINES=0 builds the sidecar only (it then reports the engines' components unavailable).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VPY="$ROOT/.venv/bin/python"
[[ -x "$VPY" ]] || { echo "[build] ERROR: .venv missing; run: bash scripts/setup" >&2; exit 1; }
"$VPY" -c "import PyInstaller" 2>/dev/null || { echo "[build] ERROR: PyInstaller not in .venv (the 'build' extra); run: bash scripts/setup" >&2; exit 1; }

clean=()
[[ "${1:-}" == "--clean" ]] && clean=(--clean)

APP="$ROOT/dist/metona"   # what the app bundles (the sidecar's one-folder, the engines inside it)
BIN="$APP/metona-sidecar"
export METONA_BUILD_ID="$("$VPY" "$ROOT/build/build_id.py")"

t0=$(date +%s.%N)
echo "[build] pyinstaller build/metona-sidecar.spec -> $APP/ (build id $METONA_BUILD_ID)" >&2
"$VPY" -m PyInstaller --noconfirm "${clean[@]}" --log-level WARN \
    --workpath "$ROOT/build/work" --distpath "$ROOT/dist" "$ROOT/build/metona-sidecar.spec" >&2
t1=$(date +%s.%N)
echo "[build] built $APP/: $(du -sm --apparent-size "$APP" | cut -f1) MiB in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}') s" >&2

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

if [[ "${METONA_BUILD_ENGINES:-1}" == 1 ]]; then
    t0=$(date +%s.%N)
    echo "[build] pyinstaller build/metona-engines.spec -> $APP/metona-engines/" >&2
    "$VPY" -m PyInstaller --noconfirm "${clean[@]}" --log-level WARN \
        --workpath "$ROOT/build/work" --distpath "$APP" "$ROOT/build/metona-engines.spec" >&2
    ENG="$APP/metona-engines/metona-engines"
    # every engine imports inside the frozen folder; its versions go into the manifest
    versions="$(cd "$tmp" && env -i PATH=/usr/bin:/bin HOME="$tmp" timeout 300 "$ENG" check 2>"$tmp/engines.err" | tail -n1)" || {
        echo "[build] ERROR: the engines' import check failed:" >&2; tail -n 30 "$tmp/engines.err" >&2; exit 1; }
    PYTHONPATH="$ROOT" "$VPY" "$ROOT/build/engines_models.py" "$APP/metona-engines" --versions "$versions" \
        --build-id "$METONA_BUILD_ID" >/dev/null
    t1=$(date +%s.%N)
    echo "[build] built $APP/metona-engines/: $(du -sm --apparent-size "$APP/metona-engines" | cut -f1) MiB (models:" \
        "$(du -sm --apparent-size "$APP/metona-engines/models" | cut -f1) MiB) in" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}') s; engines: $versions" >&2
else
    rm -rf "$APP/metona-engines"
    echo "[build] engines not built (METONA_BUILD_ENGINES=0): the binary reports them unavailable" >&2
fi
echo "[build] start time: .venv/bin/python scripts/bench/bench_binary_start.py --runs 10" >&2
