#!/usr/bin/env bash
# The fresh-machine check: a minimal Debian root built with debootstrap, the checkout copied in, and inside
# it `ci/setup.sh --cross`, the nocuda build with the unit tests, and the aarch64 cross build with a short
# ctest under qemu. A package that set-up forgets to install fails here, whatever this machine has.
#
#   ci/fresh.sh              needs root (chroot, mounts) and the package mirrors this machine uses
#
# Environment:
#   QG_FRESH_CACHE=DIR   where the pristine root is kept as a tarball between runs (default
#                        ~/.cache/qgold-fresh); only an optimisation: without it the root is built anew
#   QG_FRESH_SUITE, QG_FRESH_MIRROR   the Debian suite and mirror (default: this machine's)
#   QG_FRESH_KEEP=1      keep the root after the run (its path is printed)
#
# The root inherits this machine's package-source configuration (apt sources, pip configuration and
# PIP_* variables, the CA bundle), since package indexes are often reached through a proxy whose CA only
# the host trusts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T0=$(date +%s)
elapsed() { echo "[$(($(date +%s) - T0)) s]"; }
die() { echo "fresh.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts)"
step "host set-up: debootstrap $(elapsed)"
ci/setup.sh --fresh-root >/dev/null

# Suite and mirror: this machine's, from os-release and its apt sources (deb822 or one-line format).
SUITE=${QG_FRESH_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
[ -n "$SUITE" ] || die "cannot tell the Debian suite; set QG_FRESH_SUITE"
MIRROR=${QG_FRESH_MIRROR:-$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}')}
[ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$MIRROR" ] || die "cannot find this machine's Debian mirror; set QG_FRESH_MIRROR"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/qgold-fresh.XXXXXX")
R=$WORK/root
mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null || true
    done
    # Never remove a tree with a live mount inside (it would walk into the host's /dev).
    if grep -q " $WORK/" /proc/self/mounts; then
        echo "fresh.sh: mounts remain under $WORK; not removing it" >&2
    elif [ "${QG_FRESH_KEEP:-0}" = 1 ]; then
        echo "fresh.sh: root kept at $R"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

# The pristine root: from the cache when there is one, else debootstrap (and fill the cache).
CACHE=${QG_FRESH_CACHE:-${HOME:-/root}/.cache/qgold-fresh}
TARBALL=$CACHE/$SUITE-minbase.tar.gz
mkdir -p "$R"
if [ -s "$TARBALL" ] && tar -C "$R" -xzf "$TARBALL" 2>/dev/null; then
    step "clean root: $SUITE from the cache $TARBALL $(elapsed)"
else
    rm -rf "$R"; mkdir -p "$R"
    step "clean root: debootstrap --variant=minbase $SUITE $MIRROR $(elapsed)"
    debootstrap --variant=minbase "$SUITE" "$R" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
        { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
    if mkdir -p "$CACHE" 2>/dev/null; then
        tmp=$(mktemp "$CACHE/.root.XXXXXX")
        if tar -C "$R" -czf "$tmp" . 2>/dev/null; then mv -f "$tmp" "$TARBALL"; else rm -f "$tmp"; fi
    fi
fi

# The host's package-source configuration, so the root reaches the same indexes the same way.
# (debootstrap's own sources.list goes: the host's sources replace it, or apt sees every list twice)
rm -f "$R/etc/apt/sources.list"
cp -a /etc/apt/sources.list.d/. "$R/etc/apt/sources.list.d/" 2>/dev/null || true
[ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$R/etc/apt/sources.list"
cp -a /etc/apt/apt.conf.d/. "$R/etc/apt/apt.conf.d/" 2>/dev/null || true
for f in /etc/pip.conf /etc/resolv.conf /etc/hosts; do [ -f "$f" ] && cp -L "$f" "$R$f"; done
# The host's CA bundle goes where no package of the root writes (ca-certificates, pulled in by set-up,
# would regenerate /etc/ssl/certs without the host's own CAs), and the root's TLS clients are pointed at it.
CA_ENV=()
for f in ${PIP_CERT:-} ${SSL_CERT_FILE:-} ${REQUESTS_CA_BUNDLE:-} /etc/ssl/certs/ca-certificates.crt; do
    if [ -f "$f" ]; then
        mkdir -p "$R/opt/host-ca"; cp -L "$f" "$R/opt/host-ca/ca-bundle.crt"
        for v in SSL_CERT_FILE PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE; do CA_ENV+=("$v=/opt/host-ca/ca-bundle.crt"); done
        break
    fi
done
# Keyrings named by Signed-By in the copied sources.
for k in $(grep -ho 'Signed-By: *[^ ]*\|signed-by=[^] ]*' /etc/apt/sources.list.d/* /etc/apt/sources.list 2>/dev/null | sed 's/.*[:=] *//' | sort -u); do
    [ -f "$k" ] && { mkdir -p "$R$(dirname "$k")"; cp -L "$k" "$R$k"; }
done

# The checkout as git sees it (tracked and untracked-not-ignored files): no build trees, no venv.
mkdir -p "$R/src/qgold"
git ls-files -z -co --exclude-standard | tar -C "$ROOT" --null -T - -cf - | tar -C "$R/src/qgold" -xf -
# Sources that cite the shared specs may find them beside the checkout, as in CI.
[ -d "$ROOT/../shared" ] && cp -a "$ROOT/../shared" "$R/src/shared"

for m in proc dev dev/pts; do
    mkdir -p "$R/$m"
    case $m in
    proc) mount -t proc proc "$R/proc" ;;
    *) mount --bind "/$m" "$R/$m" ;;
    esac
    mounted+=("$R/$m")
done

inroot() { chroot "$R" /usr/bin/env -u LD_PRELOAD HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ${CA_ENV[@]+"${CA_ENV[@]}"} "$@"; }
step "inside: apt-get update $(elapsed)"
inroot apt-get update -qq -o Acquire::Retries=1 >/dev/null
step "inside: ci/setup.sh --cross $(elapsed)"
inroot bash -c 'cd /src/qgold && ci/setup.sh --cross'
# nocuda build and its unit tests (but the generators' end-to-end regeneration test, minutes of
# regenerating every fixture, which ci/test.sh runs); then the aarch64 build and a short ctest under qemu.
step "inside: build nocuda + ctest -L unit $(elapsed)"
inroot bash -c "cd /src/qgold && source ci/common.sh && configure_build nocuda >/dev/null &&
    ctest --preset nocuda -j $JOBS -L unit -E '^unit\\.generators\\.regen\$'"
FRESH_TESTS='^(unit\.errors|unit\.kquants\.ref|golden\.q4_k\..*)$'
step "inside: build aarch64 (the short ctest's programs) + ctest under qemu $(elapsed)"
# The programs those tests run (tests/test-targets.txt) and what they link: the NEON kernels, the
# harness with the aarch64 HDF5; the whole aarch64 tree is ci/test.sh's.
inroot bash -c "cd /src/qgold && source ci/common.sh && cmake --preset aarch64 -DQG_WERROR=$WERROR >/dev/null &&
    cmake --build --preset aarch64 -j $JOBS --target \$(awk '\$1 ~ /$FRESH_TESTS/ { print \$2 }' build-aarch64/tests/test-targets.txt | sort -u) &&
    ctest --preset aarch64 -j $JOBS -R '$FRESH_TESTS'"
step "fresh root: passed $(elapsed)"
