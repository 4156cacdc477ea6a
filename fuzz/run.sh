#!/bin/sh
# Build the store frame fuzz target with clang (build-fuzz/) and run it for a bounded time
# from a small generated seed corpus. Usage: fuzz/run.sh [seconds, default 60]
set -eu
secs="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" "$root" -Dfuzz=true -Dtests=disabled
fi
ninja -C "$build" fuzz/store_frame_fuzz

corpus="$build/fuzz-corpus/store_frame"
mkdir -p "$corpus"
# Seeds: one well-formed frame per operation and reply status. The first two bytes choose
# request/reply and the limits (see store_frame_fuzz.c); 0x80 = default limits.
python3 - "$corpus" <<'PY'
import struct, sys, os
out = sys.argv[1]
def frame(code, args, flags=0, timeout=0):
    body = b"".join(struct.pack("<I", len(a)) + a for a in args)
    return struct.pack("<BBBBIII", 1, code, flags, 0, len(args), timeout, len(body)) + body
seeds = {
    "hello": (0, frame(1, [b"token"])),
    "set": (0, frame(2, [b"rank/0/addr", b"10.0.0.1:4000"])),
    "get": (0, frame(3, [b"rank/0/addr"], timeout=30000)),
    "add": (0, frame(4, [b"counter", struct.pack("<q", 5)])),
    "cas": (0, frame(5, [b"k", b"", b"v"], flags=1)),
    "wait": (0, frame(6, [b"a", b"b", b"c", b"d"], timeout=1000)),
    "delete": (0, frame(7, [b"k"])),
    "num_keys": (0, frame(8, [])),
    "check": (0, frame(9, [b"a", b"b"])),
    "reply_ok": (1, frame(0, [b"value"])),
    "reply_timeout": (1, frame(1, [b"1 of 1 keys still missing"])),
    "reply_absent": (1, frame(0, [b""], flags=1)),
}
for name, (reply, data) in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([reply, 0x80]) + data)
PY
echo "fuzzing store frames for ${secs} s (corpus $corpus)"
exec "$build/fuzz/store_frame_fuzz" -max_total_time="$secs" -max_len=4096 -print_final_stats=1 "$corpus"
