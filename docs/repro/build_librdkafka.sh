#!/usr/bin/env bash
# Build confluent-kafka against librdkafka from source, with or without F5's fix, into a
# virtualenv of its own (the project's .venv is left alone):
#
#   docs/repro/build_librdkafka.sh OUT_DIR [--patched]
#
# librdkafka's source comes from the Rust crate rdkafka-sys on crates.io, which bundles it
# (4.10.0 carries librdkafka 2.12.1, the newest it carries); confluent-kafka 2.12.1 (the
# release of the same librdkafka line) is built from its PyPI source against it. With
# --patched, librdkafka-f5.patch is applied first: an OffsetFetch answered
# UNSTABLE_OFFSET_COMMIT after the assignment changed puts the partition back on the pending
# list with its offset STORED (fetched again), not INVALID (started at auto.offset.reset).
# Then: OUT_DIR/venv/bin/python docs/repro/f5_pending_offsets.py --bootstrap HOST:PORT
set -euo pipefail
out=$(realpath -m "${1:?usage: build_librdkafka.sh OUT_DIR [--patched]}")
patched=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
crate=rdkafka-sys-4.10.0+2.12.1
mkdir -p "$out"
cd "$out"
if [ ! -d "$crate" ]; then
  curl -fsSL "https://static.crates.io/crates/rdkafka-sys/${crate/+/%2B}.crate" | tar xz
fi
src="$out/$crate/librdkafka"
if [ "$patched" = "--patched" ] && ! grep -q "Query the committed offset again" "$src/src/rdkafka_assignment.c"; then
  patch -d "$src" -p1 < "$here/librdkafka-f5.patch"
fi
(cd "$src" && ./configure --prefix="$out/librdkafka" --disable-ssl --disable-sasl \
  --disable-gssapi --disable-curl --disable-zstd --disable-lz4-ext >/dev/null \
  && make -j"$(nproc)" libs >/dev/null && make install-subdirs >/dev/null)
python3 -m venv "$out/venv"
"$out/venv/bin/pip" install -q --disable-pip-version-check setuptools wheel
CFLAGS="-I$out/librdkafka/include" \
LDFLAGS="-L$out/librdkafka/lib -Wl,-rpath,$out/librdkafka/lib" \
  "$out/venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
  --no-binary confluent-kafka "confluent-kafka==2.12.1"
"$out/venv/bin/python" -c "import confluent_kafka as c; print('confluent-kafka', c.version(), 'librdkafka', c.libversion()[0])"
